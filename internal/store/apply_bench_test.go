package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/store"
)

// finalizerCommit is the plain structured turn's last commit, as the runner
// makes it: the step that called the finalizer, its acknowledgement, the
// step and the candidate recorded, the receipt, and the end of the turn.
func finalizerCommit(f store.Fence, req uuid.UUID, attempt int32) store.Commit {
	rid := uuid.NullUUID{UUID: req, Valid: true}
	call := jsonb.Part{Type: jsonb.PartToolCall, ToolCallID: "call_1", ToolName: "coder_structured_output",
		Args: json.RawMessage(`{"output":{"answer":42}}`)}
	f.Attempt = &attempt
	c := store.FinishTurn(store.Ending{
		Messages: []store.NewMessage{
			{Role: client.RoleAssistant, RequestID: rid, FinishReason: "tool-calls", Parts: []jsonb.Part{call},
				Usage: json.RawMessage(`{"input_tokens":120,"output_tokens":12}`)},
			{Role: client.RoleTool, RequestID: rid, Parts: []jsonb.Part{{Type: jsonb.PartToolResult, ToolCallID: "call_1",
				ToolName: "coder_structured_output", Result: json.RawMessage(`"Accepted"`)}}},
		},
		Progress: &store.Progress{RequestID: req, Steps: 1, SetCandidate: true,
			Candidate: json.RawMessage(`{"answer":42}`), CandidateCallID: "call_1"},
		Outcomes: []store.Outcome{{RequestID: req, Status: client.OutputSucceeded, Value: json.RawMessage(`{"answer":42}`)}},
	})
	c.Fence = f
	return c
}

// BenchmarkFinalizerCommit times store.Apply of the finalizer step's commit
// (the worker_commit that ends a plain structured turn) on the test template
// database; it reports the statements the commit sends and the round trips
// it waits for (BEGIN and COMMIT included).
func BenchmarkFinalizerCommit(b *testing.B) {
	cfg := dbtest.Config(b)
	txs := store.Trace(cfg)
	st := store.New(dbtest.NewPool(b, cfg))
	ctx := b.Context()
	user := newUser(b, st, "alice")
	worker := uuid.New()
	var statements, roundTrips int64
	for b.Loop() {
		b.StopTimer()
		chat, input, err := st.CreateChat(ctx, store.NewChat{OwnerID: user.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")},
			Request: &store.RequestSpec{Name: "r", Schema: json.RawMessage(`{"type":"object"}`)}})
		if err != nil {
			b.Fatal(err)
		}
		claim, err := st.ClaimTurn(ctx, store.ClaimParams{Worker: worker, Chat: chat.ID, Lease: time.Minute, CountAttempt: true})
		if err != nil || claim.Turn.Chat.ID != chat.ID {
			b.Fatalf("claim: %v", err)
		}
		c := finalizerCommit(store.Fence{ChatID: chat.ID, WorkerID: worker, HistoryVersion: claim.Turn.Chat.HistoryVersion},
			input.StructuredRequestID.UUID, claim.Turn.Chat.GenerationAttempt)
		before := txs.Snapshot()["worker_commit"]
		b.StartTimer()
		res, err := st.Apply(ctx, c)
		b.StopTimer()
		if err != nil || res.Chat.Status != client.StatusWaiting || res.Request.Status != client.OutputSucceeded {
			b.Fatalf("apply: %v", err)
		}
		after := txs.Snapshot()["worker_commit"]
		statements += after.Statements - before.Statements
		roundTrips += after.RoundTrips - before.RoundTrips
		b.StartTimer()
	}
	b.ReportMetric(float64(statements)/float64(b.N), "statements/op")
	b.ReportMetric(float64(roundTrips)/float64(b.N), "round_trips/op")
}

// TestFinalizerCommitSeesMessageQueuedWhileItWaited: a message queued by a
// transaction that held the chat while the finalizer commit waited for its
// lock is promoted by that commit (the end of the turn reads the queue after
// the lock, never with a snapshot from before it), and the commit's rows
// come back in order.
func TestFinalizerCommitSeesMessageQueuedWhileItWaited(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	st := store.New(pool)
	ctx := t.Context()
	user := newUser(t, st, "alice")
	chat, input, err := st.CreateChat(ctx, store.NewChat{OwnerID: user.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")},
		Request: &store.RequestSpec{Name: "r", Schema: json.RawMessage(`{"type":"object"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	worker := uuid.New()
	claim, err := st.ClaimTurn(ctx, store.ClaimParams{Worker: worker, Chat: chat.ID, Lease: time.Minute, CountAttempt: true})
	if err != nil || claim.Turn.Chat.ID != chat.ID {
		t.Fatalf("claim: %v", err)
	}
	c := finalizerCommit(store.Fence{ChatID: chat.ID, WorkerID: worker, HistoryVersion: claim.Turn.Chat.HistoryVersion},
		input.StructuredRequestID.UUID, claim.Turn.Chat.GenerationAttempt)

	// Another transaction holds the chat and queues a message.
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(context.Background()) }()
	if _, err := holder.Exec(ctx, `SELECT 1 FROM chats WHERE id = $1 FOR UPDATE`, chat.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `INSERT INTO chat_queued_messages (chat_id, content) VALUES ($1, '[{"type":"text","text":"next"}]')`, chat.ID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		res store.Committed
		err error
	}
	applied := make(chan result, 1)
	go func() {
		res, err := st.Apply(ctx, c)
		applied <- result{res, err}
	}()
	// The commit waits for the chat's lock (polling the server's view).
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%-- name: ChatLock%')`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the commit never waited for the chat's lock")
		}
		time.Sleep(5 * time.Millisecond) // polling the server's view
	}
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-applied
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.res.Promoted || r.res.Chat.Status != client.StatusRunning || r.res.Chat.WorkerID.UUID != worker {
		t.Fatalf("queued message not promoted: promoted %v, chat %s owned by %v", r.res.Promoted, r.res.Chat.Status, r.res.Chat.WorkerID)
	}
	var kinds []string
	for i, m := range r.res.Messages {
		kinds = append(kinds, string(m.Role)+"/"+string(m.Kind))
		if i > 0 && m.ID <= r.res.Messages[i-1].ID {
			t.Fatalf("messages out of order: %+v", r.res.Messages)
		}
	}
	if got := strings.Join(kinds, " "); got != "assistant/message tool/message assistant/receipt user/message" {
		t.Fatalf("messages %s", got)
	}
	var queued int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM chat_queued_messages WHERE chat_id = $1`, chat.ID).Scan(&queued); err != nil || queued != 0 {
		t.Fatalf("%d queued after the commit (%v)", queued, err)
	}
}
