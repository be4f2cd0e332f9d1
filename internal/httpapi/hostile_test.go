package httpapi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

// TestHostileRequests: inputs a hostile client sends are answered 400
// naming the field (never 500, never silently reinterpreted), and refused
// requests change nothing.
func TestHostileRequests(t *testing.T) {
	t.Parallel()
	script := &mockllm.Script{Steps: []mockllm.Step{
		{ToolCalls: []mockllm.ToolCall{{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Florence"}`}}},
	}}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	token := env.Token("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("weather?"),
		DynamicTools: []client.DynamicTool{{Name: "get_weather"}}})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, chat.Chat.ID, client.StatusRequiresAction)
	chatPath := "/api/v1/chats/" + chat.Chat.ID.String()
	results := chatPath + "/tool-results"
	content := `"content":[{"type":"text","text":"hi"}]`

	cases := []struct {
		name, method, path, body string
		field                    string // validations[0].field; "" for a 2xx
	}{
		// Item 6: U+0000 cannot be stored in a text column.
		{"NUL in title", "POST", "/api/v1/chats", `{` + content + `,"title":"a\u0000b"}`, "title"},
		{"NUL in system prompt", "POST", "/api/v1/chats", `{` + content + `,"system_prompt":"x\u0000"}`, "system_prompt"},
		{"NUL in a tool description", "POST", "/api/v1/chats", `{` + content + `,"dynamic_tools":[{"name":"t","description":"\u0000"}]}`, "dynamic_tools.0.description"},
		{"NUL in a tool schema", "POST", "/api/v1/chats", `{` + content + `,"dynamic_tools":[{"name":"t","input_schema":{"type":"object","description":"\u0000"}}]}`, "dynamic_tools.0.input_schema"},
		{"NUL in a PATCH title", "PATCH", chatPath, `{"title":"\u0000"}`, "title"},
		// Item 7: a number jsonb cannot store.
		{"unstorable output", "POST", results, `{"results":[{"tool_call_id":"call_w","output":123e-10000000}]}`, "results.0.output"},
		{"unstorable nested output", "POST", results, `{"results":[{"tool_call_id":"call_w","output":{"a":[1e999999]}}]}`, "results.0.output"},
		// Item 8: strict decoding.
		{"duplicate member", "POST", "/api/v1/chats", `{` + content + `,` + content + `}`, "content"},
		{"duplicate nested member", "POST", "/api/v1/chats", `{"content":[{"type":"text","text":"a","text":"b"}]}`, "content.0.text"},
		{"case-folded member", "POST", "/api/v1/chats", `{"CONTENT":[{"type":"text","text":"hi"}]}`, "CONTENT"},
		{"case-folded nested member", "POST", "/api/v1/chats", `{"content":[{"Type":"text","text":"hi"}]}`, "content.0.Type"},
		{"null text", "POST", "/api/v1/chats", `{"content":[{"type":"text","text":null}]}`, "content.0.text"},
		{"null text in a send", "POST", chatPath + "/messages", `{"content":[{"type":"text","text":null}]}`, "content.0.text"},
		{"duplicate result member", "POST", results, `{"results":[{"tool_call_id":"call_w","output":1,"output":2}]}`, "results.0.output"},
		{"duplicate in an output", "POST", results, `{"results":[{"tool_call_id":"call_w","output":{"a":1,"a":2}}]}`, "results.0.output"},
		{"PATCH case-folded", "PATCH", chatPath, `{"Title":"x"}`, "Title"},
		{"PATCH duplicate", "PATCH", chatPath, `{"title":"x","title":"y"}`, "title"},
		// Item 10: unknown query parameters.
		{"unknown list parameter", "GET", "/api/v1/chats?limt=5", "", "limt"},
		{"repeated list parameter", "GET", "/api/v1/chats?limit=5&limit=6", "", "limit"},
		{"parameter of a route with none", "GET", chatPath + "?verbose=1", "", "verbose"},
		{"unknown messages parameter", "GET", chatPath + "/messages?after=3", "", "after"},
		{"unknown wait parameter", "GET", "/api/v1/structured-outputs/" + chat.Chat.ID.String() + "?timeout=1s", "", "timeout"},
		{"parameter on a POST", "POST", chatPath + "/interrupt?force=1", "", "force"},

		// Still accepted.
		{"NUL in content is encoded", "POST", "/api/v1/chats", `{"content":[{"type":"text","text":"a\u0000b"}]}`, ""},
		{"known parameters", "GET", "/api/v1/chats?limit=5&cursor=", "", ""},
		{"known messages parameters", "GET", chatPath + "/messages?after_id=0&limit=3", "", ""},
	}
	for _, tc := range cases {
		before := rows(t, env)
		res := call(t, env, token, tc.method, tc.path, tc.body)
		if tc.field == "" {
			if res.status >= 300 {
				t.Errorf("%s: %d %s", tc.name, res.status, res.body)
			}
			continue
		}
		if res.status != 400 || len(res.err.Validations) == 0 || res.err.Validations[0].Field != tc.field {
			t.Errorf("%s: %d %s, want a 400 on %s", tc.name, res.status, res.body, tc.field)
			continue
		}
		if after := rows(t, env); after != before {
			t.Errorf("%s: a refused request changed the database:\n before %s\n after  %s", tc.name, before, after)
		}
	}
	// The chat still waits for its result, which is taken as sent.
	if _, err := c.SubmitToolResults(ctx, chat.Chat.ID, client.ToolResultsRequest{Results: []client.ToolResult{
		{ToolCallID: "call_w", Output: json.RawMessage(`{"forecast":"sunny","n":1e300}`)}}}); err != nil {
		t.Fatal(err)
	}
}

// TestBearerSchemeIsCaseInsensitive: RFC 7235 auth schemes are
// case-insensitive (item 9).
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	token := env.Token("alice")
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		if r := call(t, env, "", "GET", "/api/v1/chats", "", "Authorization", scheme+" "+token); r.status != 200 {
			t.Errorf("%s: %d %s", scheme, r.status, r.body)
		}
	}
	for _, h := range []string{"Basic " + token, "Bearer", "Bearer ", "Bearertoken " + token, token} {
		if r := call(t, env, "", "GET", "/api/v1/chats", "", "Authorization", h); r.status != 401 {
			t.Errorf("%q: %d %s", h, r.status, r.body)
		}
	}
}

// TestDerivedTitleFitsTheTitleLimit: a title derived from the first
// message is cut on a character boundary to the 256 bytes an explicit
// title may have (item 14).
func TestDerivedTitleFitsTheTitleLimit(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	c := env.Client("alice")
	ctx := t.Context()
	for _, first := range []string{strings.Repeat("😀", 100), strings.Repeat("é", 200), strings.Repeat("a", 300), "short"} {
		res, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text(first)})
		if err != nil {
			t.Fatal(err)
		}
		title := res.Chat.Title
		if len(title) > 256 || !utf8.ValidString(title) || title == "" || !strings.HasPrefix(first, strings.TrimSuffix(title, "…")) {
			t.Errorf("title of %d bytes derived from %.8q…: %q (%d bytes)", len(first), first, title, len(title))
		}
		// The derived title can be sent back as an explicit one.
		if _, err := c.UpdateChat(ctx, res.Chat.ID, client.UpdateChatRequest{Title: &title}); err != nil {
			t.Errorf("%q sent back: %v", title, err)
		}
	}
}

// apiWith serves env's chatd through an API of its own options.
func apiWith(t *testing.T, env *testenv.Env, o httpapi.Options) *httptest.Server {
	t.Helper()
	o.Store, o.Models, o.Hub, o.Logger, o.TestSignals = env.Store, env.Models, env.Hub, env.Logger, testenv.APISignals(nil)
	o.Experiments = map[string]bool{httpapi.ExperimentStructuredOutput: true}
	api := httpapi.New(o)
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		api.Shutdown()
		srv.Close()
	})
	return srv
}

// TestStalledBodyIsCutOff: a client that sends headers and part of a body
// then stalls gets a 408 once the body read timeout passes, instead of
// holding the connection and a handler (item 11).
func TestStalledBodyIsCutOff(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	token := env.Token("alice")
	const timeout = 300 * time.Millisecond
	srv := apiWith(t, env, httpapi.Options{BodyReadTimeout: timeout})
	for _, path := range []string{"/api/v1/chats", "/api/v1/chats/" + uuid.NewString() + "/interrupt"} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
			"Content-Length: 100\r\nIdempotency-Key: k\r\n\r\n{\"content\":", path, token)
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // the test's own bound
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		took := time.Since(start)
		if path == "/api/v1/chats" {
			if err != nil || resp.StatusCode != http.StatusRequestTimeout || took < timeout {
				t.Fatalf("%s: a stalled body: %v %v after %s", path, resp, err, took)
			}
			continue
		}
		// A route that reads no body answers, then the connection is closed
		// rather than left waiting for the rest of the body.
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		resp.Body.Close()
		if _, err := conn.Read(make([]byte, 1)); err == nil {
			t.Fatalf("%s: the connection is still open", path)
		}
		if took = time.Since(start); took > 20*time.Second {
			t.Fatalf("%s: the connection was held %s", path, took)
		}
	}
	// A body that arrives in time is served as usual.
	if r := call(t, env, token, "POST", "/api/v1/chats", createBody("")); r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

// TestStreamsPerUserAreCapped: one user cannot hold more than the cap of
// open streams (chat streams and watches together); one more is a 429 with
// Retry-After, other users are not affected, and a closed stream frees its
// slot (item 12).
func TestStreamsPerUserAreCapped(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	alice, bob := env.Token("alice"), env.Token("bob")
	srv := apiWith(t, env, httpapi.Options{MaxStreamsPerUser: 2})
	chat, err := client.New(srv.URL, alice, srv.Client()).CreateChat(t.Context(), client.CreateChatRequest{Content: text("hi")})
	if err != nil {
		t.Fatal(err)
	}
	streamPath := "/api/v1/chats/" + chat.Chat.ID.String() + "/stream"
	open := func(token, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	first := open(alice, streamPath)
	second := open(alice, "/api/v1/chats/watch")
	if first.StatusCode != 200 || second.StatusCode != 200 {
		t.Fatalf("%d %d", first.StatusCode, second.StatusCode)
	}
	for _, path := range []string{streamPath, "/api/v1/chats/watch"} {
		third := open(alice, path)
		var e client.Error
		if third.StatusCode != http.StatusTooManyRequests || third.Header.Get("Retry-After") == "" ||
			json.NewDecoder(third.Body).Decode(&e) != nil || !strings.Contains(e.Message, "Too many open streams") {
			t.Fatalf("%s over the cap: %d %v %+v", path, third.StatusCode, third.Header, e)
		}
	}
	if r := open(bob, "/api/v1/chats/watch"); r.StatusCode != 200 {
		t.Fatalf("another user: %d", r.StatusCode)
	}
	// Closing a stream frees its slot once its handler has ended.
	first.Body.Close()
	for {
		r := open(alice, "/api/v1/chats/watch")
		if r.StatusCode == 200 {
			break
		}
		r.Body.Close()
		select {
		case <-t.Context().Done():
			t.Fatal("the closed stream's slot was never freed")
		case <-time.After(20 * time.Millisecond): // polling the server's state through the API
		}
	}
}
