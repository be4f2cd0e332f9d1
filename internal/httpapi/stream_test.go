package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

// collector reads a stream in the background.
type collector struct {
	events chan client.StreamEvent
	errs   chan error
	s      *client.Stream
}

func collect(t *testing.T, s *client.Stream) *collector {
	c := &collector{events: make(chan client.StreamEvent, 4096), errs: make(chan error, 1), s: s}
	go func() {
		for {
			ev, err := s.Next()
			if err != nil {
				c.errs <- err
				return
			}
			c.events <- ev
		}
	}()
	t.Cleanup(s.Close)
	return c
}

// until returns the events up to and including the first that matches.
func (c *collector) until(t *testing.T, what string, match func(client.StreamEvent) bool) []client.StreamEvent {
	t.Helper()
	var got []client.StreamEvent
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev := <-c.events:
			got = append(got, ev)
			if match(ev) {
				return got
			}
		case err := <-c.errs:
			// The events read before the error were sent before it: a
			// stream's last event must not lose the race to its end.
			for len(c.events) > 0 {
				ev := <-c.events
				if got = append(got, ev); match(ev) {
					return got
				}
			}
			t.Fatalf("stream ended waiting for %s: %v (got %s)", what, err, kinds(got))
		case <-timeout:
			t.Fatalf("no %s within 60s (got %s)", what, kinds(got))
		}
	}
}

func kinds(evs []client.StreamEvent) string {
	var b []string
	for _, e := range evs {
		k := e.Type
		if e.Message != nil {
			k += "#" + itoa(e.Message.ID)
		}
		if e.Chat != nil {
			k += ":" + string(e.Chat.Status)
		}
		b = append(b, k)
	}
	return strings.Join(b, " ")
}

func itoa(n int64) string {
	return strings.TrimSpace(strings.ReplaceAll(string(json.RawMessage(mustJSON(n))), "\"", ""))
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func isReceipt(req uuid.UUID) func(client.StreamEvent) bool {
	return func(ev client.StreamEvent) bool {
		return ev.Message != nil && ev.Message.StructuredOutput != nil && ev.Message.StructuredOutput.RequestID == req
	}
}

func isStatus(s client.ChatStatus) func(client.StreamEvent) bool {
	return func(ev client.StreamEvent) bool { return ev.Type == client.EventStatus && ev.Chat.Status == s }
}

func TestStreamDeliversATurnAndResumes(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{ChunkDelay: time.Millisecond}})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("report"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	req := *chat.Messages[0].StructuredOutputRequestID
	s := collect(t, c.Stream(ctx, chat.Chat.ID, 0))
	evs := s.until(t, "the receipt", isReceipt(req))
	evs = append(evs, s.until(t, "waiting", isStatus(client.StatusWaiting))...)

	// Every committed message arrives once, in id order, the user input first.
	var ids []int64
	for _, e := range evs {
		if e.Message != nil {
			ids = append(ids, e.Message.ID)
		}
	}
	hist, _ := c.ListMessages(ctx, chat.Chat.ID, 0, 0)
	if len(ids) != len(hist.Messages) {
		t.Fatalf("stream delivered %v, history has %d messages (%s)", ids, len(hist.Messages), kinds(evs))
	}
	for i, m := range hist.Messages {
		if ids[i] != m.ID {
			t.Fatalf("stream order %v, history %+v", ids, hist.Messages)
		}
	}
	// The receipt carries the same outcome as REST.
	out, _ := c.GetStructuredOutput(ctx, req, 0)
	last := evs[len(evs)-1]
	_ = last
	for _, e := range evs {
		if isReceipt(req)(e) && string(e.Message.StructuredOutput.Value) != string(out.Value) {
			t.Fatalf("stream value %s, REST %s", e.Message.StructuredOutput.Value, out.Value)
		}
	}
	// Reconnect after the last id: nothing old comes back.
	s2 := collect(t, c.Stream(ctx, chat.Chat.ID, s.s.LastID()))
	evs2 := s2.until(t, "status", func(e client.StreamEvent) bool { return e.Type == client.EventStatus })
	for _, e := range evs2 {
		if e.Message != nil {
			t.Fatalf("resumed stream repeated message %d", e.Message.ID)
		}
	}
}

// midHold holds the provider response whose last user text contains
// "hold": before its first chunk until start is closed (a stream that
// opens after the chat was created sees the step's fragments from the
// first: a chat handed to a worker at admission starts at once), and after
// the first chunks until release, so a preview is in flight.
type midHold struct {
	start   chan struct{}
	release chan struct{}
	entered chan struct{}
	done    atomic.Bool
}

func newMidHold() *midHold {
	return &midHold{start: make(chan struct{}), release: make(chan struct{}), entered: make(chan struct{}, 1)}
}

func (h *midHold) hook(ctx context.Context, r *mockllm.Request, n int) error {
	if n != 0 && n != 3 {
		return nil
	}
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			if !strings.Contains(r.Messages[i].Content, "hold") {
				return nil
			}
			break
		}
	}
	if n == 0 {
		if !h.done.Load() {
			select {
			case <-h.start:
			case <-ctx.Done():
			}
		}
		return nil
	}
	if h.done.Swap(true) {
		return nil
	}
	h.entered <- struct{}{}
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return nil
}

func TestQueuedCancellationDuringAHeldTurn(t *testing.T) {
	t.Parallel()
	h := newMidHold()
	t.Cleanup(func() { h.done.Store(true) })
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{BeforeChunk: h.hook,
		Script: &mockllm.Script{Steps: []mockllm.Step{{Text: "Thinking about it step by step, then answering at length."}}}}})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("hold this ordinary turn")})
	if err != nil {
		t.Fatal(err)
	}
	s := collect(t, c.Stream(ctx, chat.Chat.ID, 0))
	s.until(t, "the initial status", func(e client.StreamEvent) bool { return e.Type == client.EventStatus })
	close(h.start) // the stream follows the chat: the step may begin
	<-h.entered
	// A preview of the held step reaches the stream.
	evs := s.until(t, "a preview part", func(e client.StreamEvent) bool { return e.Type == client.EventMessagePart })
	firstPart := evs[len(evs)-1].Part
	all := evs
	before := chatCounters(t, env, chat.Chat.ID)

	sent, err := c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: text("later"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	req := *sent.QueuedMessage.StructuredOutputRequestID
	all = append(all, s.until(t, "the queue with the request", func(e client.StreamEvent) bool {
		return e.Type == client.EventQueue && len(e.Queue.QueuedMessages) == 1
	})...)
	if _, err := c.DeleteQueued(ctx, chat.Chat.ID, sent.QueuedMessage.ID); err != nil {
		t.Fatal(err)
	}
	evs = s.until(t, "the cancelled receipt", isReceipt(req))
	all = append(all, evs...)
	sincePreview := false
	for _, e := range all {
		if e.Type == client.EventMessagePart {
			sincePreview = true
		}
		if sincePreview && (e.Type == client.EventPreviewReset || e.Type == client.EventHistoryReset) {
			t.Fatalf("a receipt-only change reset the preview: %s", kinds(all))
		}
	}
	if rec := evs[len(evs)-1].Message.StructuredOutput; rec.Status != client.OutputCancelled || rec.Error.Code != client.CodeQueueDeleted {
		t.Fatalf("receipt %+v", rec)
	}
	// REST agrees, and the held turn's fence, attempt and status did not move.
	if r, _ := c.GetStructuredOutput(ctx, req, 0); r.Status != client.OutputCancelled {
		t.Fatalf("REST %+v", r)
	}
	if after := chatCounters(t, env, chat.Chat.ID); after != before {
		t.Fatalf("counters %+v -> %+v", before, after)
	}

	close(h.release)
	all = append(all, s.until(t, "waiting", isStatus(client.StatusWaiting))...)
	// The same generation went on: its parts continue the sequence without
	// a reset, and the assistant message was committed once.
	var assistant int
	lastSeq := firstPart.Seq - 1
	for _, e := range all {
		switch {
		case e.Type == client.EventMessagePart && e.Part.HistoryVersion == firstPart.HistoryVersion:
			if e.Part.Seq != lastSeq+1 && e.Part.Seq != lastSeq {
				t.Fatalf("preview sequence jumped %d -> %d", lastSeq, e.Part.Seq)
			}
			lastSeq = e.Part.Seq
		case e.Message != nil && e.Message.Role == client.RoleAssistant && e.Message.StructuredOutput == nil:
			assistant++
		}
	}
	if assistant != 1 || len(env.Mock.Requests()) != 1 {
		t.Fatalf("%d assistant messages, %d provider calls: the turn was repeated", assistant, len(env.Mock.Requests()))
	}

	// Reconnect with after_id: nothing lost, nothing repeated.
	hist, _ := c.ListMessages(ctx, chat.Chat.ID, 0, 0)
	s2 := collect(t, c.Stream(ctx, chat.Chat.ID, hist.Messages[0].ID))
	evs2 := s2.until(t, "status", func(e client.StreamEvent) bool { return e.Type == client.EventStatus })
	var got []int64
	for _, e := range evs2 {
		if e.Message != nil {
			got = append(got, e.Message.ID)
		}
	}
	if len(got) != len(hist.Messages)-1 {
		t.Fatalf("reconnect after %d delivered %v, history %d rows", hist.Messages[0].ID, got, len(hist.Messages))
	}

	// An edit afterwards resets history on the stream and resends it.
	if _, err := c.EditMessage(ctx, chat.Chat.ID, hist.Messages[0].ID, client.EditMessageRequest{Content: text("edited")}); err != nil {
		t.Fatal(err)
	}
	s.until(t, "history_reset", func(e client.StreamEvent) bool { return e.Type == client.EventHistoryReset })
	evs = s.until(t, "the replacement", func(e client.StreamEvent) bool {
		return e.Message != nil && e.Message.Role == client.RoleUser && e.Message.Content[0].Text == "edited"
	})
	for _, e := range evs {
		if e.Message != nil && e.Message.Content[0].Text == "hold this ordinary turn" {
			t.Fatal("the deleted message was resent")
		}
	}
}

func TestQueuedCancellationDuringAClientToolWait(t *testing.T) {
	t.Parallel()
	script := &mockllm.Script{Steps: []mockllm.Step{
		{Text: "Let me ask the client.", ToolCalls: []mockllm.ToolCall{{ID: "call_1", Name: "confirm", Arguments: `{}`}}},
		{Text: "Done."},
	}}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: script}, Runner: runner.Options{Poll: time.Hour}})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("go"), DynamicTools: []client.DynamicTool{{Name: "confirm"}}})
	if err != nil {
		t.Fatal(err)
	}
	s := collect(t, c.Stream(ctx, chat.Chat.ID, 0))
	s.until(t, "action_required", func(e client.StreamEvent) bool {
		return e.Type == client.EventActionRequired && len(e.Action.ToolCalls) == 1 && e.Action.ToolCalls[0].ToolCallID == "call_1"
	})
	before := chatCounters(t, env, chat.Chat.ID)
	sent, err := c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: text("later"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	req := *sent.QueuedMessage.StructuredOutputRequestID
	if _, err := c.DeleteQueued(ctx, chat.Chat.ID, sent.QueuedMessage.ID); err != nil {
		t.Fatal(err)
	}
	evs := s.until(t, "the cancelled receipt", isReceipt(req))
	for _, e := range evs {
		if e.Type == client.EventActionRequired || e.Type == client.EventPreviewReset {
			t.Fatalf("the wait was disturbed: %s", kinds(evs))
		}
	}
	if after := chatCounters(t, env, chat.Chat.ID); after != before {
		t.Fatalf("counters %+v -> %+v", before, after)
	}
	ch, _ := c.GetChat(ctx, chat.Chat.ID)
	if ch.Status != client.StatusRequiresAction || len(ch.PendingToolCalls) != 1 || ch.PendingToolCalls[0].ToolCallID != "call_1" {
		t.Fatalf("pending call lost: %+v", ch)
	}
	if _, err := c.SubmitToolResults(ctx, chat.Chat.ID, client.ToolResultsRequest{Results: []client.ToolResult{{ToolCallID: "call_1", Output: json.RawMessage(`true`)}}}); err != nil {
		t.Fatal(err)
	}
	s.until(t, "waiting", isStatus(client.StatusWaiting))
	if n := len(env.Mock.Requests()); n != 2 {
		t.Fatalf("%d provider calls, want 2 (no step repeated)", n)
	}
}

func TestStreamAcrossReplicas(t *testing.T) {
	t.Parallel()
	// Replica A serves the API and streams but runs no workers; replica B,
	// on the same database, runs the turn.
	a := testenv.New(t, testenv.Options{NoRunner: true})
	b := testenv.Reopen(t, a, testenv.Options{NoRunner: true, Mock: mockllm.Options{ChunkDelay: 5 * time.Millisecond,
		Script: &mockllm.Script{Steps: []mockllm.Step{{Text: strings.Repeat("Working through the request. ", 12), Value: json.RawMessage(`{"command":"make test"}`)}}}}})
	c := a.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("across replicas"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	req := *chat.Messages[0].StructuredOutputRequestID
	s := collect(t, c.Stream(ctx, chat.Chat.ID, 0))
	evs := s.until(t, "the initial status", func(e client.StreamEvent) bool { return e.Type == client.EventStatus })
	b.StartRunner()
	evs = append(evs, s.until(t, "the receipt", isReceipt(req))...)
	evs = append(evs, s.until(t, "waiting", isStatus(client.StatusWaiting))...)

	seen := map[int64]int{}
	var order []int64
	parts := 0
	for _, e := range evs {
		if e.Message != nil {
			seen[e.Message.ID]++
			order = append(order, e.Message.ID)
		}
		if e.Type == client.EventMessagePart {
			parts++
		}
	}
	hist, _ := c.ListMessages(ctx, chat.Chat.ID, 0, 0)
	if len(order) != len(hist.Messages) {
		t.Fatalf("stream on A got %v, history %d", order, len(hist.Messages))
	}
	for i, m := range hist.Messages {
		if order[i] != m.ID || seen[m.ID] != 1 {
			t.Fatalf("order %v, counts %v", order, seen)
		}
	}
	if parts == 0 {
		t.Fatal("no preview deltas crossed from B to A")
	}
	if len(b.Mock.Requests()) != 1 || len(a.Mock.Requests()) != 0 {
		t.Fatal("the turn did not run on B")
	}
}

func TestStreamErrorsAndWatch(t *testing.T) {
	t.Parallel()
	h := newHolder("hold")
	t.Cleanup(h.Release)
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{BeforeRespond: h.hook}})
	c := env.Client("alice")
	ctx := t.Context()
	if _, err := c.Stream(ctx, uuid.New(), 0).Next(); apiStatus(err) != 404 {
		t.Fatalf("stream of a missing chat: %v", err)
	}
	w := collect(t, c.Watch(ctx))
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("hold")})
	if err != nil {
		t.Fatal(err)
	}
	w.until(t, "the chat running", func(e client.StreamEvent) bool {
		return e.Type == client.EventChat && e.Chat.ID == chat.Chat.ID && e.Chat.Status == client.StatusRunning
	})
	h.Release()
	w.until(t, "the chat waiting", func(e client.StreamEvent) bool {
		return e.Type == client.EventChat && e.Chat.ID == chat.Chat.ID && e.Chat.Status == client.StatusWaiting
	})
	// Another user's watch does not see it.
	other := collect(t, env.Client("bob").Watch(ctx))
	if _, err := c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: text("again")}); err != nil {
		t.Fatal(err)
	}
	w.until(t, "the chat changing again", func(e client.StreamEvent) bool {
		return e.Type == client.EventChat && e.Chat.ID == chat.Chat.ID && e.Chat.UpdatedAt.After(chat.Chat.UpdatedAt)
	})
	select {
	case ev := <-other.events:
		t.Fatalf("bob saw %+v", ev)
	default:
	}
	// Server shutdown ends streams cleanly.
	env.Server.Shutdown()
	select {
	case err := <-w.errs:
		_ = err // the reader reconnects and is refused or sees EOF; it ended
	case <-time.After(2 * time.Second):
		// The client reconnects after a clean end; what matters is that the
		// server side returned: count open streams.
	}
	deadline := time.Now().Add(10 * time.Second)
	for env.Server.Streams() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling a counter of the server under test
	}
	if n := env.Server.Streams(); n > 0 {
		t.Fatalf("%d streams still open after shutdown", n)
	}
}

// TestStreamLeavingDoesNotCancelItsRead: when the last stream of a chat
// leaves while the chat's feed is reading, the read runs to its end and its
// connection goes back to the pool; a cancelled query would cost the
// connection (pgx closes it) and a new backend for the next read.
func TestStreamLeavingDoesNotCancelItsRead(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("busy")}) // stays running: no workers
	if err != nil {
		t.Fatal(err)
	}
	sctx, leave := context.WithCancel(ctx)
	s := collect(t, c.Stream(sctx, chat.Chat.ID, 0))
	s.until(t, "the first status", isStatus(client.StatusRunning))

	// The test watches from a connection of its own: the pool would hand the
	// read's connection, once back, to a query watching that very connection,
	// which then sees itself active.
	watch, err := env.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Release()

	// The feed's next read waits behind a lock on chat_messages.
	hold, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(context.Background()) }()
	if _, err := hold.Exec(ctx, `LOCK TABLE chat_messages IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: text("queued")}); err != nil {
		t.Fatal(err)
	}
	var pid int32
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := watch.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE '%MessageListChangedForStream%'`).Scan(&pid)
		if err == nil {
			break
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the feed's read never waited for the lock")
		}
		time.Sleep(5 * time.Millisecond) // polling the database's view of other sessions
	}

	// The only stream leaves: its handler returns and the feed stops.
	leave()
	for env.Server.Streams() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stream never ended")
		}
		time.Sleep(5 * time.Millisecond) // polling the server's stream count
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The read finishes and its backend is idle in the pool, not gone.
	for {
		var state string
		err := watch.QueryRow(ctx, `SELECT state FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			t.Fatal("the read's connection was closed: its query was cancelled")
		}
		if err != nil {
			t.Fatal(err)
		}
		if state == "idle" {
			return
		}
		if state != "active" {
			t.Fatalf("the read's backend is %q", state)
		}
		if time.Now().After(deadline) {
			t.Fatal("the read never finished")
		}
		time.Sleep(5 * time.Millisecond) // polling the database's view of other sessions
	}
}
