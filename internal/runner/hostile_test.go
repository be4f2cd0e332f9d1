package runner_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

// Hostile model output: each test fails on the code before its fix (a step
// that could never commit, corrupted arguments, unbounded text).

// createWith starts a structured chat with the given client tools.
func createWith(t *testing.T, c *client.Client, tools []client.DynamicTool) (uuid.UUID, uuid.UUID) {
	t.Helper()
	res, err := c.CreateChat(t.Context(), client.CreateChatRequest{
		Content:        []client.MessagePart{client.TextPart("Report the test command.")},
		ResponseFormat: structured(reportSchema), DynamicTools: tools,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.Chat.ID, *res.Messages[0].StructuredOutputRequestID
}

// storedCalls returns the tool-call parts the chat's assistant steps stored.
func storedCalls(t *testing.T, env *testenv.Env, chat uuid.UUID) []map[string]any {
	t.Helper()
	rows, err := env.Pool.Query(t.Context(), `SELECT p FROM chat_messages m, jsonb_array_elements(m.content) p
		WHERE m.chat_id = $1 AND m.role = 'assistant' AND p->>'type' = 'tool-call' ORDER BY m.id`, chat)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var p map[string]any
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// Item 1: a number jsonb cannot store, in the arguments of an ordinary
// server tool call and of a client tool call, made the step uncommittable:
// the worker asked the provider again forever. Now the arguments are
// screened like the finalizer's: placeholder, server-only marker, error
// result, and the turn goes on.
func TestUnstorableToolArgumentsAreScreened(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := &mockllm.Script{Steps: []mockllm.Step{
		{ToolCalls: []mockllm.ToolCall{{Name: "read_file", Arguments: `{"path":"notes.txt","n":1e-999999}`}}},
		{ToolCalls: []mockllm.ToolCall{{Name: "ask", Arguments: `{"n":1e999999}`}}},
		{ToolCalls: []mockllm.ToolCall{{Name: "ask", Arguments: `{"q":1,"q":2}`}}},
		{Value: json.RawMessage(`{"command":"make test"}`)},
	}}
	env := testenv.New(t, testenv.Options{Workspace: dir, Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	chat, req := createWith(t, c, []client.DynamicTool{{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)}})
	if res := wait(t, c, req); res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v", res)
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")
	if n := providerCalls(env); n != 4 {
		t.Fatalf("%d provider calls, want 4", n)
	}
	calls := storedCalls(t, env, chat)
	if len(calls) != 4 {
		t.Fatalf("stored calls %v", calls)
	}
	for i, want := range []string{"too close to zero for a 64-bit float", "beyond the range of a 64-bit float", "duplicate key"} {
		args, _ := json.Marshal(calls[i]["args"])
		if string(args) != "{}" || !strings.Contains(calls[i]["args_rejected"].(string), want) {
			t.Errorf("call %d stored %v", i, calls[i])
		}
	}
	// Neither the server tool nor the client ran them: each got an error.
	var results []string
	rows, _ := env.Pool.Query(t.Context(), `SELECT content::text FROM chat_messages WHERE chat_id = $1 AND role = 'tool' ORDER BY id`, chat)
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		results = append(results, s)
	}
	if len(results) < 3 {
		t.Fatalf("tool results %v", results)
	}
	for _, r := range results[:3] {
		if !strings.Contains(r, "Not run: the arguments are not acceptable JSON") || strings.Contains(r, "hello") {
			t.Errorf("tool result %s", r)
		}
	}
	// The API never shows the server-only marker.
	h, err := c.ListMessages(t.Context(), chat, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(h); strings.Contains(string(b), "args_rejected") {
		t.Errorf("the marker reached the client: %s", b)
	}
}

// Item 1's backstop: whatever makes a step persistently uncommittable (here
// a fault injected in the database), the attempts are bounded and the turn
// ends with a receipt instead of calling the provider forever.
func TestPersistentCommitFailureEndsTheTurn(t *testing.T) {
	t.Parallel()
	script := &mockllm.Script{Steps: []mockllm.Step{{TextOnly: true, Text: "POISON"}}, Then: mockllm.ThenRepeat}
	env := testenv.New(t, testenv.Options{NoRunner: true, Mock: mockllm.Options{Script: script}})
	if _, err := env.Pool.Exec(t.Context(), `
		CREATE FUNCTION test_poison() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.role = 'assistant' AND NEW.content::text LIKE '%POISON%' THEN
				RAISE EXCEPTION 'numeric field overflow' USING ERRCODE = '22003';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER test_poison BEFORE INSERT ON chat_messages FOR EACH ROW EXECUTE FUNCTION test_poison();`); err != nil {
		t.Fatal(err)
	}
	env.StartRunner()
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputFailed || res.Error.Code != client.CodeProviderError ||
		!strings.Contains(res.Error.Message, "no answer of the model could be completed and stored in 5 attempts") {
		t.Fatalf("result %+v %+v", res, res.Error)
	}
	settled(t, env, chat, req, client.OutputFailed, client.CodeProviderError)
	if n := providerCalls(env); n != 5 {
		t.Fatalf("%d provider calls, want the 5 attempts", n)
	}
	ch, err := c.GetChat(t.Context(), chat)
	if err != nil || ch.Status != client.StatusError {
		t.Fatalf("chat %+v %v", ch, err)
	}
}

// Item 2: two calls of one step with the same id kept one another's
// arguments, ran a tool with the other's arguments, and could leave the
// chat waiting for a call that could never be answered. The later call is
// renamed when the step is received; each keeps its own arguments.
func TestDuplicateToolCallIDsAreRenamed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{"a.txt": "alpha", "b.txt": "bravo"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := &mockllm.Script{Steps: []mockllm.Step{
		{ToolCalls: []mockllm.ToolCall{{ID: "dup", Name: "read_file", Arguments: `{"path":"a.txt"}`}, {ID: "dup", Name: "read_file", Arguments: `{"path":"b.txt"}`}}},
		{ToolCalls: []mockllm.ToolCall{{ID: "same", Name: "ask", Arguments: `{"q":"first"}`}, {ID: "same", Name: "ask", Arguments: `{"q":"second"}`}}},
		{Value: json.RawMessage(`{"command":"make test"}`)},
	}}
	env := testenv.New(t, testenv.Options{Workspace: dir, Mock: mockllm.Options{Script: script},
		Runner: runner.Options{ActionTimeout: time.Minute}})
	c := env.Client("alice")
	chat, req := createWith(t, c, []client.DynamicTool{{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)}})

	// The client sees two calls with their own ids and arguments.
	var pending []client.ToolCall
	for deadline := time.Now().Add(60 * time.Second); ; {
		ch, err := c.GetChat(t.Context(), chat)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Status == client.StatusRequiresAction {
			pending = ch.PendingToolCalls
			break
		}
		if time.Now().After(deadline) || ch.Status == client.StatusWaiting || ch.Status == client.StatusError {
			t.Fatalf("chat %s, never waited for the client", ch.Status)
		}
		time.Sleep(20 * time.Millisecond) // polling the API like a client
	}
	if len(pending) != 2 || pending[0].ToolCallID != "same" || pending[1].ToolCallID != "same_2" ||
		!strings.Contains(string(pending[0].Args), "first") || !strings.Contains(string(pending[1].Args), "second") {
		t.Fatalf("pending calls %+v", pending)
	}
	var results []client.ToolResult
	for _, p := range pending {
		results = append(results, client.ToolResult{ToolCallID: p.ToolCallID, Output: json.RawMessage(`"ok"`)})
	}
	if _, err := c.SubmitToolResults(t.Context(), chat, client.ToolResultsRequest{Results: results}); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, c, req); res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v", res)
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")
	// The server tool read each file for its own call.
	reqs := env.Mock.Requests()
	var seen []string
	for _, m := range reqs[1].Messages {
		if m.Role == "tool" {
			seen = append(seen, m.Content)
		}
	}
	if len(seen) != 2 || seen[0] != "alpha" || seen[1] != "bravo" {
		t.Fatalf("the model saw results %q", seen)
	}
	calls := storedCalls(t, env, chat)
	if len(calls) != 5 || calls[0]["tool_call_id"] != "dup" || calls[1]["tool_call_id"] != "dup_2" {
		t.Fatalf("stored calls %v", calls)
	}
}

// Item 5: assistant text had no cap (32 MiB was stored). The step is cut
// off at the cap while it streams and ends as a length finish.
func TestAssistantTextIsCapped(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("é", 1<<20) // 2 MiB of text
	script := &mockllm.Script{Steps: []mockllm.Step{{TextOnly: true, Text: huge}}}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	res, err := c.CreateChat(t.Context(), client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("talk")}})
	if err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, res.Chat.ID)
	var size int
	var finish string
	if err := env.Pool.QueryRow(t.Context(), `SELECT octet_length(content->0->>'text'), finish_reason FROM chat_messages
		WHERE chat_id = $1 AND role = 'assistant'`, res.Chat.ID).Scan(&size, &finish); err != nil {
		t.Fatal(err)
	}
	if size > 1<<20 || size < 1<<20-2 || finish != "length" {
		t.Fatalf("stored %d bytes of text, finish %q", size, finish)
	}
	if ch, _ := c.GetChat(t.Context(), res.Chat.ID); ch.Status != client.StatusWaiting {
		t.Fatalf("chat %s", ch.Status)
	}
}

// refusingTransport sends its first refusals provider calls to a port
// nothing listens on (a real "connection refused" from the real network
// stack), then to the provider.
type refusingTransport struct {
	refusals atomic.Int32
	closed   string
}

func (rt *refusingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if rt.refusals.Add(-1) >= 0 {
		r = r.Clone(r.Context())
		r.URL.Host = rt.closed
	}
	return http.DefaultTransport.RoundTrip(r)
}

// closedPort returns an address on which nothing listens.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Item 16: a provider that refuses connections for a moment (a restart)
// failed every request in flight at once. Transport failures are retried
// within the attempt budget.
func TestConnectionRefusedIsRetried(t *testing.T) {
	t.Parallel()
	rt := &refusingTransport{closed: closedPort(t)}
	rt.refusals.Store(3)
	env := testenv.New(t, testenv.Options{ProviderTransport: rt})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	if res := wait(t, c, req); res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v %+v", res, res.Error)
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")
	if n := providerCalls(env); n != 1 || rt.refusals.Load() >= 0 {
		t.Fatalf("%d calls reached the provider, %d refusals left", n, rt.refusals.Load())
	}
}

// When the provider stays unreachable, the receipt says what failed (the
// host and "connection refused"), and nothing secret.
func TestUnreachableProviderReceiptSaysWhy(t *testing.T) {
	t.Parallel()
	rt := &refusingTransport{closed: closedPort(t)}
	rt.refusals.Store(1 << 20)
	const key = "sk-secret-key-123456"
	env := testenv.New(t, testenv.Options{ProviderTransport: rt, APIKey: key, Runner: runner.Options{MaxAttempts: 3}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	res := wait(t, c, req)
	// The host is the configured one (the transport's detour is invisible).
	u, _ := url.Parse(env.MockURL)
	// ...and, the address being local, asks whether the provider runs.
	want := "the model provider at " + u.Host + " could not be reached: connection refused after 3 attempts" +
		"; it is a local address: is the provider running? (for the example configuration: make mockllm)"
	if res.Status != client.OutputFailed || res.Error.Code != client.CodeProviderError || res.Error.Message != want {
		t.Fatalf("result %+v %+v, want message %q", res, res.Error, want)
	}
	settled(t, env, chat, req, client.OutputFailed, client.CodeProviderError)
	if n := 1<<20 - rt.refusals.Load(); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	ch, _ := c.GetChat(t.Context(), chat)
	if ch.LastError == nil || ch.LastError.Message != want || strings.Contains(ch.LastError.Message, key) {
		t.Fatalf("last_error %+v", ch.LastError)
	}
}
