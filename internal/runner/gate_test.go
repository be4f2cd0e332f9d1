package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
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

// refusedField checks that err is a 400 naming field.
func refusedField(t *testing.T, err error, field string) {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest {
		t.Fatalf("want a 400, got %v", err)
	}
	for _, v := range ae.Body.Validations {
		if v.Field == field {
			return
		}
	}
	t.Fatalf("the 400 names no %s: %v", field, err)
}

// Turning the experiment off (docs/operations.md, "Turning structured
// output off or rolling back") while structured requests run, wait for a
// client tool and sit in a queue: the replicas restarted without it refuse
// new structured requests, and every request accepted before ends with its
// receipt, none stranded.
func TestGateOffFinishesAcceptedWork(t *testing.T) {
	t.Parallel()
	// Before: a turn held in its provider call with three requests queued
	// behind it (one after an ordinary message), and a turn that waits for
	// a client tool.
	var held atomic.Bool
	entered := make(chan struct{})
	hold := func(ctx context.Context, r *mockllm.Request) error {
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "First.") && held.CompareAndSwap(false, true) {
			close(entered)
			<-ctx.Done() // until the replica stops
			return ctx.Err()
		}
		return nil
	}
	askTool := func(r *mockllm.Request) (mockllm.Step, bool) {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "user" && strings.Contains(last.Content, "Use the tool.") {
			return mockllm.Step{ToolCalls: []mockllm.ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"q":"x"}`}}}, true
		}
		return mockllm.Step{}, false
	}
	before := testenv.New(t, testenv.Options{Mock: mockllm.Options{BeforeRespond: hold, StepFor: askTool},
		Runner: runner.Options{DrainTimeout: 50 * time.Millisecond}})
	c := before.Client("alice")
	ctx := t.Context()
	first, err := c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("First.")}, ResponseFormat: structured(reportSchema)})
	if err != nil {
		t.Fatal(err)
	}
	chat := first.Chat.ID
	reqs := []uuid.UUID{*first.Messages[0].StructuredOutputRequestID}
	<-entered
	for _, m := range []struct {
		text       string
		structured bool
	}{{"Second.", true}, {"Third.", true}, {"Plain.", false}, {"Fourth.", true}} {
		r := client.SendMessageRequest{Content: []client.MessagePart{client.TextPart(m.text)}}
		if m.structured {
			r.ResponseFormat = structured(reportSchema)
		}
		sent, err := c.SendMessage(ctx, chat, r)
		if err != nil || !sent.Queued {
			t.Fatalf("send %s: %+v %v", m.text, sent, err)
		}
		if m.structured {
			reqs = append(reqs, *sent.QueuedMessage.StructuredOutputRequestID)
		}
	}
	tooled, err := c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("Use the tool.")},
		ResponseFormat: structured(reportSchema), DynamicTools: []client.DynamicTool{{Name: "lookup"}}})
	if err != nil {
		t.Fatal(err)
	}
	waitChat(t, c, tooled.Chat.ID, func(ch client.Chat) bool { return ch.Status == client.StatusRequiresAction })

	// The replicas restart without the experiment (Reopen stops the old
	// workers first: the held turn is handed back).
	after := testenv.Reopen(t, before, testenv.Options{StructuredOutputOff: true})
	c = after.Client("alice")
	_, err = c.SendMessage(ctx, chat, client.SendMessageRequest{Content: []client.MessagePart{client.TextPart("Fifth.")}, ResponseFormat: structured(reportSchema)})
	refusedField(t, err, "response_format")
	_, err = c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("New.")}, ResponseFormat: structured(reportSchema)})
	refusedField(t, err, "response_format")
	// An edit that keeps the first message's format is a new request too.
	_, err = c.EditMessage(ctx, chat, first.Messages[0].ID, client.EditMessageRequest{Content: []client.MessagePart{client.TextPart("First, again.")}})
	refusedField(t, err, "response_format")

	if _, err := c.SubmitToolResults(ctx, tooled.Chat.ID, client.ToolResultsRequest{Results: []client.ToolResult{
		{ToolCallID: "call_1", Output: json.RawMessage(`"make test"`)}}}); err != nil {
		t.Fatal(err)
	}
	for i, req := range append(reqs, *tooled.Messages[0].StructuredOutputRequestID) {
		if res := wait(t, c, req); res.Status != client.OutputSucceeded {
			t.Fatalf("request %d: %+v", i, res)
		}
		oneReceipt(t, after, req)
	}
	settled(t, after, tooled.Chat.ID, *tooled.Messages[0].StructuredOutputRequestID, client.OutputSucceeded, "")
	h := waitIdle(t, c, chat)
	if len(h.QueuedMessages) != 0 {
		t.Fatalf("queue left: %+v", h.QueuedMessages)
	}
	// Ordinary chats go on as before.
	plain, err := c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("Hello.")}})
	if err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, plain.Chat.ID)
	if n := pendingRequests(t, after); n != 0 {
		t.Fatalf("%d structured requests still pending", n)
	}
}

// pendingRequests is the query operations.md has operators run before a
// rollback.
func pendingRequests(t *testing.T, env *testenv.Env) int {
	t.Helper()
	var n int
	if err := env.Pool.QueryRow(t.Context(), `SELECT count(*) FROM structured_requests WHERE status = 'pending'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
