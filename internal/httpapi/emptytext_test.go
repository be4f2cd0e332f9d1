package httpapi_test

import (
	"fmt"
	"testing"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testenv"
)

// TestEmptyTextRefused: a message whose text is empty or only whitespace
// is refused at admission, naming the part, on every path that admits
// content, and nothing is stored (a provider would refuse it later, as a
// failed turn).
func TestEmptyTextRefused(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	token := env.Token("alice")
	busy, err := env.Client("alice").CreateChat(t.Context(), client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	chatPath := "/api/v1/chats/" + busy.Chat.ID.String()
	editPath := fmt.Sprintf("%s/messages/%d", chatPath, busy.Messages[0].ID)
	paths := []struct{ method, path string }{{"POST", "/api/v1/chats"}, {"POST", chatPath + "/messages"}, {"PATCH", editPath}}
	cases := []struct {
		name, content string
		fields        []string
	}{
		{"empty", `[{"type":"text","text":""}]`, []string{"content.0.text"}},
		{"no text member", `[{"type":"text"}]`, []string{"content.0.text"}},
		{"whitespace", `[{"type":"text","text":" \n\t\u00a0\u3000"}]`, []string{"content.0.text"}},
		{"second part empty", `[{"type":"text","text":"hi"},{"type":"text","text":"  "}]`, []string{"content.1.text"}},
		{"every part empty", `[{"type":"text","text":""},{"type":"text","text":" "}]`, []string{"content.0.text", "content.1.text"}},
	}
	for _, p := range paths {
		for _, tc := range cases {
			before := rows(t, env)
			res := call(t, env, token, p.method, p.path, `{"content":`+tc.content+`}`)
			if res.status != 400 {
				t.Errorf("%s %s, %s: status %d, want 400: %s", p.method, p.path, tc.name, res.status, res.body)
				continue
			}
			var got []string
			for _, v := range res.err.Validations {
				got = append(got, v.Field)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.fields) {
				t.Errorf("%s %s, %s: fields %v, want %v: %s", p.method, p.path, tc.name, got, tc.fields, res.body)
			}
			if after := rows(t, env); after != before {
				t.Errorf("%s: a refused request changed the database:\n before %s\n after  %s", tc.name, before, after)
			}
		}
	}
	// Text with surrounding whitespace is kept as sent.
	if r := call(t, env, token, "POST", "/api/v1/chats", `{"content":[{"type":"text","text":"  hi\n"}]}`); r.status != 201 {
		t.Fatalf("text with surrounding whitespace: %d %s", r.status, r.body)
	}
}
