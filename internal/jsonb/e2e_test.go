package jsonb_test

// End-to-end: the whole server (testenv: real PostgreSQL, runner, HTTP API,
// an OpenAI-wire mock provider through the real provider client) stores
// and serves text and raw JSON that plain encoding/json + jsonb cannot.

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/testenv"
)

func e2eCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitSettled waits, woken by the chat's own notifications, until the chat
// is no longer running, and returns its REST history.
func waitSettled(t *testing.T, env *testenv.Env, c *client.Client, chat uuid.UUID) (client.Chat, client.ListMessagesResponse) {
	t.Helper()
	ctx := e2eCtx(t)
	sub := env.Hub.Subscribe(chat)
	defer sub.Close()
	for {
		ch, err := c.GetChat(ctx, chat)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Status == client.StatusWaiting || ch.Status == client.StatusError {
			h, err := c.ListMessages(ctx, chat, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			return ch, h
		}
		select {
		case <-sub.C():
		case <-ctx.Done():
			t.Fatalf("chat still %s", ch.Status)
		}
	}
}

func meaning(t *testing.T, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", raw, err)
	}
	return v
}

// TestEndToEndNULInMessageText: user text with NUL (and natural sentinel
// characters) is stored, reaches the model, and comes back over REST
// exactly, from history and from the queue.
func TestEndToEndNULInMessageText(t *testing.T) {
	t.Parallel()
	const first = "before\x00after, natural \ue000\ue001 and \ue000\ue000, trailing \ue000"
	const queued = "queued\x00text"
	hold := make(chan struct{})
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{
		Script: &mockllm.Script{Steps: []mockllm.Step{{Text: "answer\x00one"}, {Text: "answer two"}}},
		BeforeRespond: func(ctx context.Context, r *mockllm.Request) error {
			if strings.HasPrefix(r.Messages[len(r.Messages)-1].Content, "before") {
				select {
				case <-hold:
				case <-ctx.Done():
				}
			}
			return nil
		},
	}})
	c := env.Client("alice")
	ctx := e2eCtx(t)
	res, err := c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart(first)}})
	if err != nil {
		t.Fatalf("create a chat whose text contains NUL: %v", err)
	}
	chat := res.Chat.ID
	if got := res.Messages[0].Content[0].Text; got != first {
		t.Errorf("create response text %+q, want %+q", got, first)
	}

	// While the first turn is held, a second message waits in the queue
	// (chat_queued_messages.content).
	if _, err := c.SendMessage(ctx, chat, client.SendMessageRequest{Content: []client.MessagePart{client.TextPart(queued)}}); err != nil {
		t.Fatalf("queue a message whose text contains NUL: %v", err)
	}
	h, err := c.ListMessages(ctx, chat, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.QueuedMessages) != 1 || h.QueuedMessages[0].Content[0].Text != queued {
		t.Fatalf("queue %+v, want one message %+q", h.QueuedMessages, queued)
	}
	close(hold)

	ch, h := waitSettled(t, env, c, chat)
	if ch.Status != client.StatusWaiting {
		t.Fatalf("chat status %s", ch.Status)
	}
	var texts []string
	for _, m := range h.Messages {
		for _, p := range m.Content {
			texts = append(texts, string(m.Role)+":"+p.Text)
		}
	}
	want := []string{"user:" + first, "assistant:answer\x00one", "user:" + queued, "assistant:answer two"}
	if !reflect.DeepEqual(texts, want) {
		t.Errorf("REST history\n got %+q\nwant %+q", texts, want)
	}

	// The model saw the text as sent.
	reqs := env.Mock.Requests()
	if len(reqs) != 2 || reqs[0].Messages[len(reqs[0].Messages)-1].Content != first {
		t.Errorf("provider requests: %d, first prompt ends %+q", len(reqs), reqs[0].Messages[len(reqs[0].Messages)-1].Content)
	}
	// Operators querying the table see the sentinel form, never a NUL.
	var stored string
	if err := env.Pool.QueryRow(ctx, `SELECT content->0->>'text' FROM chat_messages WHERE chat_id = $1 ORDER BY id LIMIT 1`, chat).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if wantStored := "before\ue000\ue001after, natural \ue000\ue000\ue001 and \ue000\ue000\ue000\ue000, trailing \ue000\ue000"; stored != wantStored {
		t.Errorf("stored text %+q, want %+q", stored, wantStored)
	}
}

// TestEndToEndToolCallArguments: a model's tool call arguments with lone
// surrogate escapes and NUL in keys and values are stored (no "unsupported
// Unicode escape sequence"), the turn completes, and REST returns them as
// the codec specifies: lone surrogates as U+FFFD, NUL kept, valid pairs
// kept, escaped backslashes literal.
func TestEndToEndToolCallArguments(t *testing.T) {
	t.Parallel()
	calls := []struct{ args, want string }{
		{`{"q":"\ud800x"}`, `{"q":"\ufffdx"}`},
		{`{"a\u0000b":"c\u0000d"}`, `{"a\u0000b":"c\u0000d"}`},
		{`{"lo\udc00":["\ud83d\ude00","\ud83d"],"lit":"\\u0000","n":12345678901234567890.5,"s":"\ue000\ue001"}`,
			`{"lo\ufffd":["😀","\ufffd"],"lit":"\\u0000","n":12345678901234567890.5,"s":"\ue000\ue001"}`},
	}
	var step mockllm.Step
	for i, c := range calls {
		step.ToolCalls = append(step.ToolCalls, mockllm.ToolCall{ID: "call_" + string(rune('a'+i)), Name: "lookup", Arguments: c.args})
	}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: &mockllm.Script{Steps: []mockllm.Step{step, {Text: "done"}}}}})
	c := env.Client("alice")
	res, err := c.CreateChat(e2eCtx(t), client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("look it up")}})
	if err != nil {
		t.Fatal(err)
	}
	ch, h := waitSettled(t, env, c, res.Chat.ID)
	if ch.Status != client.StatusWaiting {
		t.Fatalf("chat status %s: the turn did not complete", ch.Status)
	}
	var args, results []client.MessagePart
	var final string
	for _, m := range h.Messages {
		for _, p := range m.Content {
			switch p.Type {
			case "tool-call":
				args = append(args, p)
			case "tool-result":
				results = append(results, p)
			case "text":
				final = p.Text
			}
		}
	}
	if len(args) != len(calls) || len(results) != len(calls) || final != "done" {
		t.Fatalf("history: %d calls, %d results, last text %q: %+v", len(args), len(results), final, h.Messages)
	}
	for i, c := range calls {
		if !reflect.DeepEqual(meaning(t, args[i].Args), meaning(t, []byte(c.want))) {
			t.Errorf("call %d arguments over REST %s, want %s", i, args[i].Args, c.want)
		}
		if !results[i].IsError || !strings.Contains(string(results[i].Result), "Unknown tool") {
			t.Errorf("result %d: %s", i, results[i].Result)
		}
	}
	// Two provider calls: nothing was lost and retried. The second
	// replayed the arguments as stored.
	reqs := env.Mock.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d provider calls, want 2", len(reqs))
	}
	var replayed []string
	for _, m := range reqs[len(reqs)-1].Messages {
		for _, tc := range m.ToolCalls {
			replayed = append(replayed, tc.Arguments)
		}
	}
	if len(replayed) != len(calls) {
		t.Fatalf("replayed %d tool calls", len(replayed))
	}
	for i, c := range calls {
		if !reflect.DeepEqual(meaning(t, []byte(replayed[i])), meaning(t, []byte(c.want))) {
			t.Errorf("call %d replayed to the model as %s, want %s", i, replayed[i], c.want)
		}
	}
}

// TestEndToEndToolResultThroughStore: tool results with NUL in keys and
// values, written by a worker commit (store.Apply), come back over REST.
// (Clients cannot post tool results yet; when POST
// /api/v1/chats/{chat}/tool-results exists, cover it through the API too.)
func TestEndToEndToolResultThroughStore(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	c := env.Client("alice")
	ctx := e2eCtx(t)
	res, err := c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("run it")}})
	if err != nil {
		t.Fatal(err)
	}
	worker := uuid.New()
	chat, err := env.Store.Claim(ctx, worker, time.Minute)
	if err != nil || chat.ID != res.Chat.ID {
		t.Fatalf("claim: %v (chat %s)", err, chat.ID)
	}
	const result = `{"out\u0000put":"x\u0000y","nested":[{"\u0000":"\u0000"}],"lone":"\udc00","s":"\ue000"}`
	const wantResult = `{"out\u0000put":"x\u0000y","nested":[{"\u0000":"\u0000"}],"lone":"\ufffd","s":"\ue000"}`
	commit := store.FinishTurn(store.Ending{
		Messages: []store.NewMessage{
			{Role: client.RoleAssistant, Parts: []jsonb.Part{{Type: jsonb.PartToolCall, ToolCallID: "call\x00", ToolName: "run", Args: json.RawMessage(`{"k\u0000":"v"}`)}}},
			{Role: client.RoleTool, Parts: []jsonb.Part{{Type: jsonb.PartToolResult, ToolCallID: "call\x00", ToolName: "run", Result: json.RawMessage(result)}}},
		},
	})
	commit.Fence = store.Fence{ChatID: chat.ID, WorkerID: worker, HistoryVersion: chat.HistoryVersion}
	_, err = env.Store.Apply(ctx, commit)
	if err != nil {
		t.Fatalf("commit tool results with NUL: %v", err)
	}
	h, err := c.ListMessages(ctx, res.Chat.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got *client.MessagePart
	for _, m := range h.Messages {
		for i, p := range m.Content {
			if p.Type == "tool-result" {
				got = &m.Content[i]
			}
		}
	}
	if got == nil {
		t.Fatalf("no tool result in %+v", h.Messages)
	}
	if got.ToolCallID != "call\x00" || !reflect.DeepEqual(meaning(t, got.Result), meaning(t, []byte(wantResult))) {
		t.Errorf("tool result over REST: id %+q result %s, want %s", got.ToolCallID, got.Result, wantResult)
	}
}

// TestEndToEndToolResultThroughAPI: a client submits a tool result with NUL
// in a key and a value and a lone surrogate through POST .../tool-results;
// it is stored and comes back over REST as docs/codec.md says.
func TestEndToEndToolResultThroughAPI(t *testing.T) {
	t.Parallel()
	script := &mockllm.Script{Steps: []mockllm.Step{
		{ToolCalls: []mockllm.ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"q":"x"}`}}},
		{Text: "thanks"},
	}}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	ctx := e2eCtx(t)
	res, err := c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("look it up")},
		DynamicTools: []client.DynamicTool{{Name: "lookup"}}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ch, err := c.GetChat(ctx, res.Chat.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Status == client.StatusRequiresAction {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the chat never asked for the tool result")
		case <-time.After(10 * time.Millisecond): // polling committed state through the API
		}
	}
	const output = `{"out\u0000put":"x\u0000y","lone":"\ud800","pair":"\ud83d\ude00","s":"\ue000"}`
	const want = `{"out\u0000put":"x\u0000y","lone":"\ufffd","pair":"\ud83d\ude00","s":"\ue000"}`
	if _, err := c.SubmitToolResults(ctx, res.Chat.ID, client.ToolResultsRequest{Results: []client.ToolResult{
		{ToolCallID: "call_1", Output: json.RawMessage(output)}}}); err != nil {
		t.Fatalf("submit a tool result with NUL: %v", err)
	}
	for {
		ch, err := c.GetChat(ctx, res.Chat.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Status == client.StatusWaiting {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the turn did not finish: %s", ch.Status)
		case <-time.After(10 * time.Millisecond):
		}
	}
	h, err := c.ListMessages(ctx, res.Chat.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got *client.MessagePart
	for _, m := range h.Messages {
		for i, p := range m.Content {
			if p.Type == "tool-result" {
				got = &m.Content[i]
			}
		}
	}
	if got == nil || !reflect.DeepEqual(meaning(t, got.Result), meaning(t, []byte(want))) {
		t.Fatalf("tool result over REST: %+v, want %s", got, want)
	}
	// The model received it too, NUL preserved (the result is JSON text).
	reqs := env.Mock.Requests()
	last := reqs[len(reqs)-1].Messages
	if m := last[len(last)-1]; m.Role != "tool" || !strings.Contains(m.Content, `"x\u0000y"`) {
		t.Fatalf("the model saw %+q", m.Content)
	}
}
