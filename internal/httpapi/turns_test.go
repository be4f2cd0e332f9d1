package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

// holder keeps provider calls whose latest user text contains a marker in
// flight until released: a turn held inside its provider call.
type holder struct {
	marker  string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newHolder(marker string) *holder {
	return &holder{marker: marker, entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (h *holder) hook(ctx context.Context, r *mockllm.Request) error {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role != "user" {
			continue
		}
		if !strings.Contains(r.Messages[i].Content, h.marker) {
			return nil
		}
		break
	}
	select {
	case h.entered <- struct{}{}:
	default:
	}
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return nil
}

func (h *holder) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-h.entered:
	case <-time.After(60 * time.Second):
		t.Fatal("the turn never reached the provider")
	}
}

func (h *holder) Release() { h.once.Do(func() { close(h.release) }) }

func text(s string) []client.MessagePart { return []client.MessagePart{client.TextPart(s)} }

func schemaFormat() *client.ResponseFormat {
	return &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(okSchema)}}
}

type counters struct {
	History int64
	Attempt int32
	Status  string
}

func chatCounters(t *testing.T, env *testenv.Env, chat uuid.UUID) counters {
	t.Helper()
	var c counters
	if err := env.Pool.QueryRow(context.Background(), `SELECT history_version, generation_attempt, status FROM chats WHERE id = $1`, chat).
		Scan(&c.History, &c.Attempt, &c.Status); err != nil {
		t.Fatal(err)
	}
	return c
}

func apiStatus(err error) int {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.StatusCode
	}
	return 0
}

func TestDeleteQueuedWritesCancellationWithoutDisturbingTheTurn(t *testing.T) {
	t.Parallel()
	h := newHolder("hold")
	t.Cleanup(h.Release)
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{BeforeRespond: h.hook}})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("hold this turn")})
	if err != nil {
		t.Fatal(err)
	}
	h.waitEntered(t)
	sent, err := c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: text("later"), ResponseFormat: schemaFormat()})
	if err != nil || !sent.Queued {
		t.Fatalf("queue: %+v %v", sent, err)
	}
	before := chatCounters(t, env, chat.Chat.ID)

	del, err := c.DeleteQueued(ctx, chat.Chat.ID, sent.QueuedMessage.ID)
	if err != nil {
		t.Fatal(err)
	}
	req := *sent.QueuedMessage.StructuredOutputRequestID
	if len(del.Messages) != 1 || del.Messages[0].StructuredOutput == nil ||
		del.Messages[0].StructuredOutput.Status != client.OutputCancelled ||
		del.Messages[0].StructuredOutput.Error.Code != client.CodeQueueDeleted || del.Messages[0].StructuredOutput.RequestID != req {
		t.Fatalf("delete response %+v", del)
	}
	// Visible through REST while the turn is still held, and the turn's
	// fence, attempt and status did not move.
	res, err := c.GetStructuredOutput(ctx, req, 0)
	if err != nil || res.Status != client.OutputCancelled || res.Error.Code != client.CodeQueueDeleted {
		t.Fatalf("lookup %+v %v", res, err)
	}
	if after := chatCounters(t, env, chat.Chat.ID); after != before {
		t.Fatalf("the running turn was disturbed: %+v -> %+v", before, after)
	}
	hist, _ := c.ListMessages(ctx, chat.Chat.ID, 0, 0)
	if len(hist.QueuedMessages) != 0 || hist.Messages[len(hist.Messages)-1].ID != del.Messages[0].ID {
		t.Fatalf("history %+v queue %+v", hist.Messages, hist.QueuedMessages)
	}
	if _, err := c.DeleteQueued(ctx, chat.Chat.ID, sent.QueuedMessage.ID); apiStatus(err) != 404 {
		t.Fatalf("second delete: %v", err)
	}

	h.Release()
	waitStatus(t, c, chat.Chat.ID, client.StatusWaiting)
	if n := len(env.Mock.Requests()); n != 1 {
		t.Fatalf("%d provider calls: the held turn was retried or repeated", n)
	}
}

func waitStatus(t *testing.T, c *client.Client, chat uuid.UUID, want client.ChatStatus) client.Chat {
	t.Helper()
	ctx := t.Context()
	for {
		ch, err := c.GetChat(ctx, chat)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Status == want {
			return ch
		}
		select {
		case <-ctx.Done():
			t.Fatalf("chat is %s, want %s", ch.Status, want)
		case <-time.After(10 * time.Millisecond): // polling committed state through the API
		}
	}
}

func TestInterruptCancelsTheActiveRequestAndMovesTheQueueOn(t *testing.T) {
	t.Parallel()
	h := newHolder("hold")
	t.Cleanup(h.Release)
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{BeforeRespond: h.hook}})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("hold: structured"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	h.waitEntered(t)
	next, err := c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: text("next"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Interrupt(ctx, chat.Chat.ID); err != nil {
		t.Fatal(err)
	}
	first, err := c.WaitStructuredOutput(ctx, *chat.Messages[0].StructuredOutputRequestID)
	if err != nil || first.Status != client.OutputCancelled || first.Error.Code != client.CodeInterrupted {
		t.Fatalf("interrupted request: %+v %v", first, err)
	}
	second, err := c.WaitStructuredOutput(ctx, *next.QueuedMessage.StructuredOutputRequestID)
	if err != nil || second.Status != client.OutputSucceeded {
		t.Fatalf("queued request after the interrupt: %+v %v", second, err)
	}
	// Exactly one receipt per request.
	var receipts int
	_ = env.Pool.QueryRow(ctx, `SELECT count(*) FROM chat_messages WHERE chat_id = $1 AND kind = 'receipt'`, chat.Chat.ID).Scan(&receipts)
	if receipts != 2 {
		t.Fatalf("%d receipts, want 2", receipts)
	}
	waitStatus(t, c, chat.Chat.ID, client.StatusWaiting)
	if _, err := c.Interrupt(ctx, chat.Chat.ID); apiStatus(err) != 409 {
		t.Fatalf("interrupting an idle chat: %v", err)
	}
}

func TestSendWithInterruptBehavior(t *testing.T) {
	t.Parallel()
	h := newHolder("hold")
	t.Cleanup(h.Release)
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{BeforeRespond: h.hook}})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("hold"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	h.waitEntered(t)
	sent, err := c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: text("now instead"), BusyBehavior: client.BusyInterrupt})
	if err != nil || !sent.Queued {
		t.Fatalf("send: %+v %v", sent, err)
	}
	res, err := c.WaitStructuredOutput(ctx, *chat.Messages[0].StructuredOutputRequestID)
	if err != nil || res.Status != client.OutputCancelled || res.Error.Code != client.CodeInterrupted {
		t.Fatalf("%+v %v", res, err)
	}
	hist := waitStatus(t, c, chat.Chat.ID, client.StatusWaiting)
	_ = hist
	msgs, _ := c.ListMessages(ctx, chat.Chat.ID, 0, 0)
	last := msgs.Messages[len(msgs.Messages)-1]
	prev := msgs.Messages[len(msgs.Messages)-2]
	if prev.Role != client.RoleUser || prev.Content[0].Text != "now instead" || last.Role != client.RoleAssistant {
		t.Fatalf("the interrupting message did not run next: %+v", msgs.Messages)
	}
}

func TestEditOrderAndReceipts(t *testing.T) {
	t.Parallel()
	h := newHolder("hold")
	t.Cleanup(h.Release)
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{BeforeRespond: h.hook}})
	c := env.Client("alice")
	ctx := t.Context()

	// Request A completes; request B is active (held); C and D are queued.
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("first"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	reqA := *chat.Messages[0].StructuredOutputRequestID
	if r, err := c.WaitStructuredOutput(ctx, reqA); err != nil || r.Status != client.OutputSucceeded {
		t.Fatalf("A: %+v %v", r, err)
	}
	waitStatus(t, c, chat.Chat.ID, client.StatusWaiting)
	b, err := c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: text("hold B"), ResponseFormat: schemaFormat()})
	if err != nil || b.Message == nil {
		t.Fatalf("B: %+v %v", b, err)
	}
	h.waitEntered(t)
	cq, err := c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: text("C"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	dq, err := c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: text("D")})
	if err != nil {
		t.Fatal(err)
	}
	_ = dq

	// Edit B, preserving its format.
	edit, err := c.EditMessage(ctx, chat.Chat.ID, b.Message.ID, client.EditMessageRequest{Content: text("B edited")})
	if err != nil {
		t.Fatal(err)
	}
	reqB, reqC := *b.Message.StructuredOutputRequestID, *cq.QueuedMessage.StructuredOutputRequestID
	if len(edit.Messages) != 3 {
		t.Fatalf("edit inserted %d messages, want 2 receipts + the replacement: %+v", len(edit.Messages), edit.Messages)
	}
	for i, want := range []uuid.UUID{reqB, reqC} {
		m := edit.Messages[i]
		if m.StructuredOutput == nil || m.StructuredOutput.RequestID != want || m.StructuredOutput.Status != client.OutputCancelled ||
			m.StructuredOutput.Error.Code != client.CodeSuperseded {
			t.Fatalf("receipt %d: %+v", i, m.StructuredOutput)
		}
	}
	repl := edit.Messages[2]
	if repl.ID != edit.Message.ID || repl.StructuredOutputRequestID == nil || *repl.StructuredOutputRequestID == reqB {
		t.Fatalf("replacement %+v: want a fresh request UUID", repl)
	}
	if !(edit.Messages[0].ID < edit.Messages[1].ID && edit.Messages[1].ID < repl.ID) {
		t.Fatalf("not in id order: %d %d %d", edit.Messages[0].ID, edit.Messages[1].ID, repl.ID)
	}
	if len(edit.DeletedMessageIDs) != 1 || edit.DeletedMessageIDs[0] != b.Message.ID {
		t.Fatalf("deleted %v, want [%d]", edit.DeletedMessageIDs, b.Message.ID)
	}

	h.Release()
	res, err := c.WaitStructuredOutput(ctx, *repl.StructuredOutputRequestID)
	if err != nil || res.Status != client.OutputSucceeded {
		t.Fatalf("replacement: %+v %v", res, err)
	}
	// A's receipt is untouched; B and C have exactly one receipt each.
	for _, id := range []uuid.UUID{reqA, reqB, reqC, *repl.StructuredOutputRequestID} {
		var n int
		_ = env.Pool.QueryRow(ctx, `SELECT count(*) FROM chat_messages WHERE structured_request_id = $1 AND kind = 'receipt'`, id).Scan(&n)
		if n != 1 {
			t.Fatalf("request %s has %d receipts", id, n)
		}
	}
	if r, _ := c.GetStructuredOutput(ctx, reqA, 0); r.Status != client.OutputSucceeded {
		t.Fatalf("A after the edit: %+v", r)
	}
	hist, _ := c.ListMessages(ctx, chat.Chat.ID, 0, 0)
	if len(hist.QueuedMessages) != 0 {
		t.Fatalf("queue not cleared: %+v", hist.QueuedMessages)
	}

	// Explicit text clears the format; editing a non-user message is a 400.
	waitStatus(t, c, chat.Chat.ID, client.StatusWaiting)
	plain, err := c.EditMessage(ctx, chat.Chat.ID, repl.ID, client.EditMessageRequest{Content: text("plain now"), ResponseFormat: &client.ResponseFormat{Type: "text"}})
	if err != nil || plain.Message.StructuredOutputRequestID != nil {
		t.Fatalf("clearing edit: %+v %v", plain, err)
	}
	waitStatus(t, c, chat.Chat.ID, client.StatusWaiting)
	hist, _ = c.ListMessages(ctx, chat.Chat.ID, 0, 0)
	last := hist.Messages[len(hist.Messages)-1]
	if _, err := c.EditMessage(ctx, chat.Chat.ID, last.ID, client.EditMessageRequest{Content: text("x")}); apiStatus(err) != 400 {
		t.Fatalf("editing an assistant message: %v", err)
	}
	if _, err := c.EditMessage(ctx, chat.Chat.ID, 999999, client.EditMessageRequest{Content: text("x")}); apiStatus(err) != 404 {
		t.Fatalf("editing a missing message: %v", err)
	}
}

func TestClientToolsRoundTrip(t *testing.T) {
	t.Parallel()
	script := &mockllm.Script{Steps: []mockllm.Step{
		{ToolCalls: []mockllm.ToolCall{{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Florence"}`}}},
		{}, // unscripted: the finalizer with a generated value
	}}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{
		Content: text("weather?"), ResponseFormat: schemaFormat(),
		DynamicTools: []client.DynamicTool{{Name: "get_weather", Description: "Weather for a city",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ch := waitStatus(t, c, chat.Chat.ID, client.StatusRequiresAction)
	if len(ch.PendingToolCalls) != 1 || ch.PendingToolCalls[0].ToolCallID != "call_w" || ch.PendingToolCalls[0].ToolName != "get_weather" {
		t.Fatalf("pending calls %+v", ch.PendingToolCalls)
	}
	// The client tool was offered beside the finalizer.
	if r := env.Mock.Requests()[0]; r.Tool("get_weather") == nil || r.Tool("coder_structured_output") == nil {
		t.Fatalf("tools offered: %+v", r.Tools)
	}

	bad := []struct {
		name    string
		results []client.ToolResult
		status  int
		field   string
	}{
		{"unknown id", []client.ToolResult{{ToolCallID: "call_x", Output: json.RawMessage(`"sunny"`)}}, 400, "results.0.tool_call_id"},
		{"duplicate", []client.ToolResult{{ToolCallID: "call_w", Output: json.RawMessage(`1`)}, {ToolCallID: "call_w", Output: json.RawMessage(`2`)}}, 400, "results.1.tool_call_id"},
		{"none", nil, 400, "results"},
	}
	for _, tc := range bad {
		_, err := c.SubmitToolResults(ctx, chat.Chat.ID, client.ToolResultsRequest{Results: tc.results})
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.StatusCode != tc.status || len(ae.Body.Validations) == 0 || !strings.HasPrefix(ae.Body.Validations[0].Field, tc.field) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	token := env.Token("alice")
	if r := call(t, env, token, "POST", "/api/v1/chats/"+chat.Chat.ID.String()+"/tool-results", `{"results":[{"tool_call_id":"call_w"}]}`); r.status != 400 ||
		r.err.Validations[0].Field != "results.0.output" {
		t.Fatalf("result without output: %d %s", r.status, r.body)
	}
	if _, err := c.SubmitToolResults(ctx, chat.Chat.ID, client.ToolResultsRequest{Results: []client.ToolResult{
		{ToolCallID: "call_w", Output: json.RawMessage(`{"forecast":"sunny"}`)}}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitStructuredOutput(ctx, *chat.Messages[0].StructuredOutputRequestID)
	if err != nil || res.Status != client.OutputSucceeded {
		t.Fatalf("%+v %v", res, err)
	}
	// The provider saw the client's result.
	reqs := env.Mock.Requests()
	last := reqs[len(reqs)-1].Messages
	if m := last[len(last)-1]; m.Role != "tool" || !strings.Contains(m.Content, "sunny") {
		t.Fatalf("prompt ends with %+v", m)
	}
	// Not waiting any more: 409. A result for the finalizer's call is a 400.
	if _, err := c.SubmitToolResults(ctx, chat.Chat.ID, client.ToolResultsRequest{Results: []client.ToolResult{
		{ToolCallID: "call_w", Output: json.RawMessage(`1`)}}}); apiStatus(err) != 409 {
		t.Fatalf("late results: %v", err)
	}
}

func TestFinalizerCallsCannotBeAnsweredByClients(t *testing.T) {
	t.Parallel()
	// The model calls a client tool and the finalizer together: an invalid
	// batch. Nothing is dispatched to the client; the model is asked again.
	script := &mockllm.Script{Steps: []mockllm.Step{
		{ToolCalls: []mockllm.ToolCall{{ID: "call_c", Name: "lookup", Arguments: `{}`}, {ID: "call_f", Name: "coder_structured_output", Value: json.RawMessage(`{"command":"x"}`)}}},
		{ToolCalls: []mockllm.ToolCall{{ID: "call_c2", Name: "lookup", Arguments: `{}`}}},
	}}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("go"), ResponseFormat: schemaFormat(),
		DynamicTools: []client.DynamicTool{{Name: "lookup"}}})
	if err != nil {
		t.Fatal(err)
	}
	ch := waitStatus(t, c, chat.Chat.ID, client.StatusRequiresAction)
	if len(ch.PendingToolCalls) != 1 || ch.PendingToolCalls[0].ToolCallID != "call_c2" {
		t.Fatalf("pending %+v: the invalid batch must not reach the client", ch.PendingToolCalls)
	}
	_, err = c.SubmitToolResults(ctx, chat.Chat.ID, client.ToolResultsRequest{Results: []client.ToolResult{
		{ToolCallID: "call_c2", Output: json.RawMessage(`1`)}, {ToolCallID: "call_f", Output: json.RawMessage(`{"output":{"command":"forged"}}`)}}})
	if apiStatus(err) != 400 {
		t.Fatalf("result for the finalizer's call id: %v", err)
	}
	var rejections int
	_ = env.Pool.QueryRow(ctx, `SELECT rejections FROM structured_requests WHERE request_id = $1`, *chat.Messages[0].StructuredOutputRequestID).Scan(&rejections)
	if rejections != 1 {
		t.Fatalf("rejections %d, want 1 for the invalid batch", rejections)
	}
}

func TestPlanModeSwitchWithPendingRequestConflicts(t *testing.T) {
	t.Parallel()
	h := newHolder("hold")
	t.Cleanup(h.Release)
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{BeforeRespond: h.hook}})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("hold"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	on := true
	_, err = c.UpdateChat(ctx, chat.Chat.ID, client.UpdateChatRequest{PlanMode: &on})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 409 || !strings.Contains(ae.Body.Message, chat.Messages[0].StructuredOutputRequestID.String()) {
		t.Fatalf("switching to plan mode with an active request: %v", err)
	}
	_, err = c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: text("plan it"), PlanMode: &on})
	if apiStatus(err) != 409 {
		t.Fatalf("send with plan_mode while a request is active: %v", err)
	}
	h.Release()
	if _, err := c.WaitStructuredOutput(ctx, *chat.Messages[0].StructuredOutputRequestID); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, chat.Chat.ID, client.StatusWaiting)
	got, err := c.UpdateChat(ctx, chat.Chat.ID, client.UpdateChatRequest{PlanMode: &on})
	if err != nil || got.Mode != client.ModePlan {
		t.Fatalf("plan mode once idle: %+v %v", got, err)
	}
	if _, err := c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: text("x"), ResponseFormat: schemaFormat()}); apiStatus(err) != 400 {
		t.Fatalf("structured request in a plan-mode chat: %v", err)
	}
}
