package store_test

import (
	"encoding/json"
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
	return store.Commit{
		Fence: f,
		Messages: []store.NewMessage{
			{Role: client.RoleAssistant, RequestID: rid, FinishReason: "tool-calls", Parts: []jsonb.Part{call},
				Usage: json.RawMessage(`{"input_tokens":120,"output_tokens":12}`)},
			{Role: client.RoleTool, RequestID: rid, Parts: []jsonb.Part{{Type: jsonb.PartToolResult, ToolCallID: "call_1",
				ToolName: "coder_structured_output", Result: json.RawMessage(`"Accepted"`)}}},
		},
		Progress: &store.Progress{RequestID: req, Steps: 1, SetCandidate: true,
			Candidate: json.RawMessage(`{"answer":42}`), CandidateCallID: "call_1"},
		Outcomes: []store.Outcome{{RequestID: req, Status: client.OutputSucceeded, Value: json.RawMessage(`{"answer":42}`)}},
		End:      store.EndTurn,
	}
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
	token, err := st.CreateToken(ctx, "alice")
	if err != nil {
		b.Fatal(err)
	}
	user, err := st.Authenticate(ctx, token)
	if err != nil {
		b.Fatal(err)
	}
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
