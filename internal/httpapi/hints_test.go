package httpapi_test

import (
	"strings"
	"testing"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testenv"
)

// TestFieldHints: members a request written for another API carries are
// refused with what chatd takes instead, and OpenAI's strict: true is
// accepted as the no-op it is here.
func TestFieldHints(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	token := env.Token("alice")
	chat, err := env.Client("alice").CreateChat(t.Context(), client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	send := "/api/v1/chats/" + chat.Chat.ID.String() + "/messages"
	messages := `{"messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		name, path, body, field, hint string
	}{
		{"messages on create", "/api/v1/chats", messages, "messages", `send its parts as "content"`},
		{"messages on send", send, messages, "messages", `send its parts as "content"`},
		{"messages beside content", "/api/v1/chats", `{"content":[{"type":"text","text":"hi"}],"messages":[]}`, "messages", `"content"`},
		{"model on send", send, `{"content":[{"type":"text","text":"hi"}],"model":"x"}`, "model", "when the chat is created"},
		{"strict false", "/api/v1/chats", createBody(format(`{"name":"n","strict":false,"schema":{}}`)),
			"response_format.json_schema.strict", `chatd always validates the result against the schema; remove "strict"`},
	}
	for _, tc := range cases {
		res := call(t, env, token, "POST", tc.path, tc.body)
		if res.status != 400 || len(res.err.Validations) != 1 || res.err.Validations[0].Field != tc.field ||
			!strings.Contains(res.err.Validations[0].Detail, tc.hint) {
			t.Errorf("%s: %d %s, want 400 on %s saying %q", tc.name, res.status, res.body, tc.field, tc.hint)
		}
	}
	if res := call(t, env, token, "POST", "/api/v1/chats", createBody(format(`{"name":"n","strict":true,"schema":`+okSchema+`}`))); res.status != 201 {
		t.Errorf("strict true: %d %s, want 201", res.status, res.body)
	}
}
