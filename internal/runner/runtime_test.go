package runner_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/hooks"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
	"github.com/chatd/chatd/internal/tools"
)

func ledger(t *testing.T, env *testenv.Env, req uuid.UUID) (rejections, validation, steps int) {
	t.Helper()
	if err := env.Pool.QueryRow(t.Context(), `SELECT rejections, validation_rejections, steps FROM structured_requests WHERE request_id = $1`, req).
		Scan(&rejections, &validation, &steps); err != nil {
		t.Fatal(err)
	}
	return
}

func TestFinalizerBesideAToolIsOneRejection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := &mockllm.Script{Steps: []mockllm.Step{
		{ToolCalls: []mockllm.ToolCall{{Name: "read_file", Arguments: `{"path":"notes.txt"}`}, {Name: runner.FinalizerName, Value: json.RawMessage(`{"command":"x"}`)}}},
		{Value: json.RawMessage(`{"command":"y"}`)},
	}}
	env := testenv.New(t, testenv.Options{Workspace: dir, Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputSucceeded || !jsonEqual(t, res.Value, json.RawMessage(`{"command":"y"}`)) {
		t.Fatalf("result %+v %s", res, res.Value)
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")
	if r, v, s := ledger(t, env, req); r != 1 || v != 0 || s != 2 {
		t.Fatalf("rejections %d validation %d steps %d", r, v, s)
	}
	// Nothing in the invalid batch ran: the tool result says so.
	var results string
	_ = env.Pool.QueryRow(t.Context(), `SELECT content::text FROM chat_messages WHERE chat_id = $1 AND role = 'tool' ORDER BY id LIMIT 1`, chat).Scan(&results)
	if strings.Contains(results, "hello") || strings.Count(results, "Not run") != 2 {
		t.Fatalf("invalid batch results: %s", results)
	}
}

func TestUnsafeFinalizerArgumentsAreNeverStored(t *testing.T) {
	t.Parallel()
	bad := []string{
		`{"output":{"command":"a"},"output":{"command":"b"}}`,
		`{"output":{"command":"a\u0000b"}}`,
		`{"output":{"command":"a","n":1e400}}`,
	}
	var steps []mockllm.Step
	for _, args := range bad {
		steps = append(steps, mockllm.Step{ToolCalls: []mockllm.ToolCall{{Name: runner.FinalizerName, Arguments: args}}})
	}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: &mockllm.Script{Steps: steps}}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputFailed || res.Error.Code != client.CodeNotProduced {
		t.Fatalf("result %+v", res)
	}
	settled(t, env, chat, req, client.OutputFailed, client.CodeNotProduced)
	rows, err := env.Pool.Query(t.Context(), `SELECT content::text FROM chat_messages WHERE chat_id = $1 AND role = 'assistant' AND kind = 'message'`, chat)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var content string
		_ = rows.Scan(&content)
		n++
		// The reason may quote the offending number as text; no number
		// 1e400, second key or NUL may be stored as data.
		if strings.Contains(content, `"b"`) || strings.Contains(content, ": 1e400") || strings.Contains(content, `\u0000`) ||
			!strings.Contains(content, `"args": {}`) || !strings.Contains(content, "args_rejected") {
			t.Errorf("stored step %s", content)
		}
	}
	if n != 3 {
		t.Fatalf("%d assistant steps stored, want 3", n)
	}
}

func TestOversizedFinalizerArgumentsAreNeverStored(t *testing.T) {
	t.Parallel()
	huge := `{"output":{"command":"` + strings.Repeat("x", 300<<10) + `"}}`
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: &mockllm.Script{Steps: []mockllm.Step{
		{ToolCalls: []mockllm.ToolCall{{Name: runner.FinalizerName, Arguments: huge}}},
	}}}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	if res := wait(t, c, req); res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v", res)
	}
	var largest int
	_ = env.Pool.QueryRow(t.Context(), `SELECT max(octet_length(content::text)) FROM chat_messages WHERE chat_id = $1`, chat).Scan(&largest)
	if largest > 64<<10 {
		t.Fatalf("a %d-byte row was stored", largest)
	}
	if r, _, _ := ledger(t, env, req); r != 1 {
		t.Fatalf("rejections %d, want 1", r)
	}
}

func TestToolUseThenFinalize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const content = "The test command is: make test\n"
	if err := os.WriteFile(filepath.Join(dir, "CONTRIBUTING.md"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	value, _ := json.Marshal(map[string]string{"command": content})
	script := &mockllm.Script{Steps: []mockllm.Step{
		{ToolCalls: []mockllm.ToolCall{{Name: "list_files", Arguments: `{}`}}},
		{ToolCalls: []mockllm.ToolCall{{Name: "read_file", Arguments: `{"path":"CONTRIBUTING.md"}`}}},
		{Value: value},
	}}
	env := testenv.New(t, testenv.Options{Workspace: dir, Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputSucceeded || !jsonEqual(t, res.Value, value) {
		t.Fatalf("result %+v %s", res, res.Value)
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")
	// The model saw the file through the tool, and ordinary tool steps did
	// not count as rejections.
	reqs := env.Mock.Requests()
	if reqs[0].Tool("read_file") == nil || reqs[0].Tool("list_files") == nil {
		t.Fatal("workspace tools not offered")
	}
	msgs := reqs[2].Messages
	if m := msgs[len(msgs)-1]; m.Role != "tool" || m.Content != content {
		t.Fatalf("the model saw %+v", m)
	}
	if r, _, s := ledger(t, env, req); r != 0 || s != 3 {
		t.Fatalf("rejections %d steps %d", r, s)
	}
}

// hookServer answers stop hooks with the decisions given, in order (the last
// repeats), recording the events.
type hookServer struct {
	mu        sync.Mutex
	decisions []hooks.Decision
	events    []hooks.StopEvent
	block     chan struct{} // when set, calls wait on it (or the caller's ctx)
}

func (h *hookServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ev hooks.StopEvent
	_ = json.NewDecoder(r.Body).Decode(&ev)
	h.mu.Lock()
	h.events = append(h.events, ev)
	d := h.decisions[min(len(h.events), len(h.decisions))-1]
	block := h.block
	h.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-r.Context().Done():
			return
		}
	}
	_ = json.NewEncoder(w).Encode(d)
}

func (h *hookServer) calls() []hooks.StopEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hooks.StopEvent(nil), h.events...)
}

func TestHookContinuesOnceAcrossARestart(t *testing.T) {
	t.Parallel()
	hs := &hookServer{decisions: []hooks.Decision{
		{Decision: "continue", ModelContext: "Double-check the command.", Notice: "Checking again."},
		{Decision: "finish"},
	}}
	hookSrv := httptest.NewServer(hs)
	defer hookSrv.Close()

	// The second provider call (after the hook's continuation) is held so
	// the server can be restarted between candidate A and candidate B.
	var held atomic.Bool
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	script := &mockllm.Script{Steps: []mockllm.Step{{Value: json.RawMessage(`{"command":"A"}`)}, {Value: json.RawMessage(`{"command":"B"}`)}}}
	hold := func(ctx context.Context, r *mockllm.Request) error {
		last := r.Messages[len(r.Messages)-1]
		if strings.Contains(last.Content, "Double-check") && held.CompareAndSwap(false, true) {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return context.Canceled // the restart cut this call off
		}
		return nil
	}
	opts := testenv.Options{Hooks: []hooks.Config{{URL: hookSrv.URL}},
		Mock:   mockllm.Options{Script: script, BeforeRespond: hold},
		Runner: runner.Options{DrainTimeout: 50 * time.Millisecond}}
	env := testenv.New(t, opts)
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	select {
	case <-entered:
	case <-time.After(60 * time.Second):
		t.Fatal("the continued turn never reached the provider")
	}
	// Between A and B: A is not public, the request is pending, the control
	// row is visible, and the candidate was cleared.
	if res, _ := c.GetStructuredOutput(t.Context(), req, 0); res.Status != client.OutputPending {
		t.Fatalf("after the continuation: %+v", res)
	}
	var candidate []byte
	_ = env.Pool.QueryRow(t.Context(), `SELECT candidate FROM structured_requests WHERE request_id = $1`, req).Scan(&candidate)
	if candidate != nil {
		t.Fatalf("candidate A still current: %s", candidate)
	}
	r1, v1, s1 := ledger(t, env, req)

	env.StopRunner() // "kill" the server while the provider call is held
	close(release)
	env2 := testenv.Reopen(t, env, testenv.Options{Hooks: opts.Hooks, Mock: mockllm.Options{Script: &mockllm.Script{Steps: []mockllm.Step{{Value: json.RawMessage(`{"command":"B"}`)}}}}})
	res := wait(t, env2.Client("alice"), req)
	if res.Status != client.OutputSucceeded || !jsonEqual(t, res.Value, json.RawMessage(`{"command":"B"}`)) {
		t.Fatalf("result %+v %s", res, res.Value)
	}
	settled(t, env2, chat, req, client.OutputSucceeded, "")
	r2, v2, s2 := ledger(t, env2, req)
	if r2 != r1 || v2 != v1 || r1 != 0 || s2 != s1+1 {
		t.Fatalf("counters before restart %d/%d/%d, after %d/%d/%d", r1, v1, s1, r2, v2, s2)
	}
	// A was never published; the hook saw A, then B.
	var aReceipts int
	_ = env2.Pool.QueryRow(t.Context(), `SELECT count(*) FROM chat_messages WHERE chat_id = $1 AND kind = 'receipt' AND content::text LIKE '%"A"%'`, chat).Scan(&aReceipts)
	calls := hs.calls()
	if aReceipts != 0 || len(calls) != 2 || !strings.Contains(string(calls[0].Candidate), `"A"`) || !strings.Contains(string(calls[1].Candidate), `"B"`) ||
		calls[1].Continuations != 1 {
		t.Fatalf("A receipts %d, hook calls %+v", aReceipts, calls)
	}
	// The control row is client-visible, as text (a client that knows only
	// the documented part types reads it); the model-only context is not.
	h, _ := env2.Client("alice").ListMessages(t.Context(), chat, 0, 0)
	notices := 0
	documented := map[string]bool{"text": true, "reasoning": true, "tool-call": true, "tool-result": true, "file": true, "source": true}
	for _, m := range h.Messages {
		for _, p := range m.Content {
			if !documented[p.Type] {
				t.Fatalf("part type %q is not one api.md documents: %+v", p.Type, m)
			}
			if p.Type == "text" && p.Text == "Checking again." {
				notices++
			}
			if strings.Contains(p.Text, "Double-check") {
				t.Fatalf("model-only context reached the client: %+v", m)
			}
		}
	}
	if notices != 1 {
		t.Fatalf("%d control notices in history", notices)
	}
}

func TestRestartBetweenCandidateAndReceiptWritesOneReceipt(t *testing.T) {
	t.Parallel()
	hs := &hookServer{decisions: []hooks.Decision{{Decision: "finish"}}, block: make(chan struct{})}
	hookSrv := httptest.NewServer(hs)
	defer hookSrv.Close()
	opts := testenv.Options{Hooks: []hooks.Config{{URL: hookSrv.URL}}, Runner: runner.Options{DrainTimeout: 50 * time.Millisecond}}
	env := testenv.New(t, opts)
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	// Wait until the candidate is committed and the hook is being asked.
	deadline := time.Now().Add(60 * time.Second)
	for len(hs.calls()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the hook was never called")
		}
		time.Sleep(5 * time.Millisecond) // polling an external server's log
	}
	var candidate []byte
	_ = env.Pool.QueryRow(t.Context(), `SELECT candidate FROM structured_requests WHERE request_id = $1`, req).Scan(&candidate)
	if candidate == nil {
		t.Fatal("no candidate committed before the hook")
	}
	env.StopRunner() // the worker dies between the candidate commit and the receipt
	// Cut off by the drain timeout, it still handed the chat back instead of
	// leaving it to its lease.
	var released bool
	_ = env.Pool.QueryRow(t.Context(), `SELECT worker_id IS NULL FROM chats WHERE id = $1`, chat).Scan(&released)
	if !released {
		t.Fatal("a stopped worker kept its chat until the lease expires")
	}
	hs.mu.Lock()
	hs.block = nil
	hs.mu.Unlock()
	env2 := testenv.Reopen(t, env, opts)
	res := wait(t, env2.Client("alice"), req)
	if res.Status != client.OutputSucceeded || !jsonEqual(t, res.Value, candidate) {
		t.Fatalf("result %+v %s, candidate %s", res, res.Value, candidate)
	}
	settled(t, env2, chat, req, client.OutputSucceeded, "")
	if n := len(hs.calls()); n < 2 {
		t.Fatalf("hook called %d times; the restarted worker must vet again", n)
	}
	if n := len(env.Mock.Requests()) + len(env2.Mock.Requests()); n != 1 {
		t.Fatalf("%d provider calls: the candidate was regenerated", n)
	}
}

func TestUnreachableHookFailsClosed(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Hooks: []hooks.Config{{URL: "http://127.0.0.1:1/hook", Timeout: "1s"}}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputFailed || res.Error.Code != client.CodeHookFailed || res.Value != nil {
		t.Fatalf("result %+v", res)
	}
	settled(t, env, chat, req, client.OutputFailed, client.CodeHookFailed)
}

func TestCompactionBetweenRejectionsKeepsTheCount(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	hold := func(ctx context.Context, r *mockllm.Request) error {
		if r.Tool(runner.FinalizerName) != nil && calls.Add(1) == 2 {
			entered <- struct{}{}
			select {
			case <-gate:
			case <-ctx.Done():
			}
		}
		return nil
	}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Mode: mockllm.ModeInvalid, BeforeRespond: hold}})
	c := env.Client("alice")
	ctx := t.Context()
	// An ordinary first turn gives compaction something to summarise.
	first, err := c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, first.Chat.ID)
	sent, err := c.SendMessage(ctx, first.Chat.ID, client.SendMessageRequest{Content: []client.MessagePart{client.TextPart("report")}, ResponseFormat: structured(reportSchema)})
	if err != nil {
		t.Fatal(err)
	}
	req := *sent.Message.StructuredOutputRequestID
	<-entered // one rejection is committed; the second step is in flight
	if r, _, _ := ledger(t, env, req); r != 1 {
		t.Fatalf("rejections %d before compaction", r)
	}
	resp, err := http.NewRequest("POST", env.API.URL+"/api/v1/chats/"+first.Chat.ID.String()+"/compact", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Header.Set("Authorization", "Bearer "+env.Token("alice"))
	r, err := env.API.Client().Do(resp)
	if err != nil || r.StatusCode != 202 {
		t.Fatalf("compact: %v %v", r, err)
	}
	r.Body.Close()
	close(gate)
	res := wait(t, c, req)
	if res.Status != client.OutputFailed || res.Error.Code != client.CodeValidationExhausted {
		t.Fatalf("result %+v", res)
	}
	if r, v, _ := ledger(t, env, req); r != 3 || v != 3 {
		t.Fatalf("rejections %d validation %d after compaction", r, v)
	}
	var compressed, summaries int
	var pending *time.Time
	_ = env.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM chat_messages WHERE chat_id = $1 AND compressed),
		(SELECT count(*) FROM chat_messages WHERE chat_id = $1 AND content @> '[{"type":"summary"}]'),
		(SELECT compaction_requested_at FROM chats WHERE id = $1)`, first.Chat.ID).Scan(&compressed, &summaries, &pending)
	if compressed != 2 || summaries != 1 || pending != nil {
		t.Fatalf("compressed %d summaries %d request %v", compressed, summaries, pending)
	}
	settled(t, env, first.Chat.ID, req, client.OutputFailed, client.CodeValidationExhausted)
	// The receipt of a request is never part of what was summarised, and
	// the finished request stays finished after a further compaction.
	var reqStatus string
	_ = env.Pool.QueryRow(ctx, `SELECT status FROM structured_requests WHERE request_id = $1`, req).Scan(&reqStatus)
	if reqStatus != "failed" {
		t.Fatalf("request %s", reqStatus)
	}
}

func TestAutomaticCompaction(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{ContextWindow: 120})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart(strings.Repeat("first turn ", 20))}})
	if err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, chat.Chat.ID)
	if _, err := c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: []client.MessagePart{client.TextPart("second")}}); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, chat.Chat.ID)
	reqs := env.Mock.Requests()
	last := reqs[len(reqs)-1]
	if !strings.Contains(last.Messages[0].Content+last.Messages[1].Content, "Summary of the earlier conversation") {
		t.Fatalf("the prompt after compaction does not start with the summary: %+v", last.Messages)
	}
	for _, m := range last.Messages {
		if strings.Contains(m.Content, "first turn first turn") {
			t.Fatalf("a compressed message was replayed: %+v", m)
		}
	}
}

func TestRefusalEndsTheRequest(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: &mockllm.Script{Steps: []mockllm.Step{
		{TextOnly: true, Text: "I can't help with that.", FinishReason: "content_filter"},
	}}}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputFailed || res.Error.Code != client.CodeRefused {
		t.Fatalf("result %+v", res)
	}
	settled(t, env, chat, req, client.OutputFailed, client.CodeRefused)
	if n := providerCalls(env); n != 1 {
		t.Fatalf("%d provider calls after a refusal", n)
	}
}

func TestStepLimitEndsTheRequest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := testenv.New(t, testenv.Options{Workspace: dir, Runner: runner.Options{MaxSteps: 3},
		Mock: mockllm.Options{Script: &mockllm.Script{Steps: []mockllm.Step{{ToolCalls: []mockllm.ToolCall{{Name: "list_files", Arguments: `{}`}}}}, Then: mockllm.ThenRepeat}}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputFailed || res.Error.Code != client.CodeNotProduced {
		t.Fatalf("result %+v", res)
	}
	settled(t, env, chat, req, client.OutputFailed, client.CodeNotProduced)
	if _, _, s := ledger(t, env, req); s != 3 {
		t.Fatalf("steps %d, want the limit 3", s)
	}
}

func TestStalledProviderStreamIsRetried(t *testing.T) {
	t.Parallel()
	// The first response stops after a few chunks and never finishes; the
	// silence timeout cuts it off and the retry succeeds.
	var stalls atomic.Int32
	stall := func(ctx context.Context, r *mockllm.Request, n int) error {
		if n == 2 && stalls.Add(1) == 1 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{BeforeChunk: stall},
		Runner: runner.Options{SilenceTimeout: 300 * time.Millisecond}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	if res := wait(t, c, req); res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v", res)
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")
	if n := providerCalls(env); n != 2 {
		t.Fatalf("%d provider calls, want the stalled one and its retry", n)
	}
	if _, _, s := ledger(t, env, req); s != 1 {
		t.Fatalf("steps %d: the stalled attempt must not count", s)
	}
}

// hangingTool is a server tool that ignores its deadline and blocks until
// the test ends, like a read of a FIFO did; entered says it was called.
func hangingTool(t *testing.T) (tools.Tool, <-chan struct{}) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	entered := make(chan struct{}, 16)
	return tools.Tool{Name: "hang", Description: "never returns", InputSchema: map[string]any{"type": "object"},
		Run: func(context.Context, json.RawMessage) (string, error) {
			entered <- struct{}{}
			<-release
			return "late", nil
		}}, entered
}

func TestServerToolDeadline(t *testing.T) {
	t.Parallel()
	hang, _ := hangingTool(t)
	script := &mockllm.Script{Steps: []mockllm.Step{
		{ToolCalls: []mockllm.ToolCall{{Name: "hang", Arguments: `{}`}}},
		{Value: json.RawMessage(`{"command":"make test"}`)},
	}}
	env := testenv.New(t, testenv.Options{Tools: []tools.Tool{hang}, Mock: mockllm.Options{Script: script},
		Runner: runner.Options{ServerToolTimeout: 200 * time.Millisecond}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	if res := wait(t, c, req); res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v", res)
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")
	var result string
	_ = env.Pool.QueryRow(t.Context(), `SELECT content::text FROM chat_messages WHERE chat_id = $1 AND role = 'tool' ORDER BY id LIMIT 1`, chat).Scan(&result)
	if !strings.Contains(result, "did not finish within 200ms") || !strings.Contains(result, `"is_error": true`) {
		t.Fatalf("tool result %s", result)
	}
}

// A drain ends within its timeout whatever a tool does, and hands the chat
// back: the tool's call runs again on the next owner.
func TestDrainEndsWhileAToolHangs(t *testing.T) {
	t.Parallel()
	hang, entered := hangingTool(t)
	script := &mockllm.Script{Steps: []mockllm.Step{{ToolCalls: []mockllm.ToolCall{{Name: "hang", Arguments: `{}`}}}}}
	env := testenv.New(t, testenv.Options{Tools: []tools.Tool{hang}, Mock: mockllm.Options{Script: script},
		Runner: runner.Options{DrainTimeout: 100 * time.Millisecond}})
	c := env.Client("alice")
	chat, _ := create(t, c, reportSchema)
	select {
	case <-entered:
	case <-time.After(60 * time.Second):
		t.Fatal("the tool was never called")
	}
	stopped := make(chan struct{})
	go func() {
		env.StopRunner()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the drain waited on a hanging tool")
	}
	var released bool
	_ = env.Pool.QueryRow(t.Context(), `SELECT worker_id IS NULL FROM chats WHERE id = $1`, chat).Scan(&released)
	if !released {
		t.Fatal("the drained worker kept its chat")
	}
}
