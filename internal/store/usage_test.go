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

// TestReceiptUsageOnEveryPath: a receipt keeps the request's usage sum (an
// earlier commit's step plus the finishing commit's own) whichever way the
// commit writes it: summed by the receipt's INSERT (succeeded with
// progress), returned by the progress update (failed with progress), or
// read before the receipt (no progress in the commit).
func TestReceiptUsageOnEveryPath(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	st := store.New(pool)
	user := newUser(t, st, "alice")
	const want = `{"input_tokens": 220, "output_tokens": 22, "reasoning_tokens": 3, "cache_read_tokens": 50, "cache_write_tokens": null}`
	for _, tc := range []struct {
		name     string
		progress bool
		outcome  store.Outcome
	}{
		{"summed by the receipt", true, store.Outcome{Status: client.OutputSucceeded, Value: json.RawMessage(`{"answer":42}`)}},
		{"returned by the progress", true, store.Outcome{Status: client.OutputFailed, Code: client.CodeValidationExhausted, Message: "no"}},
		{"read before the receipt", false, store.Outcome{Status: client.OutputCancelled, Code: client.CodeInterrupted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			chat, input, err := st.CreateChat(ctx, store.NewChat{OwnerID: user.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")},
				Request: &store.RequestSpec{Name: "r", Schema: json.RawMessage(`{"type":"object"}`)}})
			if err != nil {
				t.Fatal(err)
			}
			req := input.StructuredRequestID.UUID
			worker := uuid.New()
			claim, err := st.ClaimTurn(ctx, store.ClaimParams{Worker: worker, Chat: chat.ID, Lease: time.Minute, CountAttempt: true})
			if err != nil || claim.Turn.Chat.ID != chat.ID {
				t.Fatalf("claim: %v", err)
			}
			step := func(usage string) store.NewMessage {
				return store.NewMessage{Role: client.RoleAssistant, RequestID: input.StructuredRequestID, FinishReason: "stop",
					Parts: []jsonb.Part{jsonb.Text("thinking")}, Usage: json.RawMessage(usage)}
			}
			attempt := claim.Turn.Chat.GenerationAttempt
			first, err := st.Apply(ctx, store.Commit{
				Fence:    store.Fence{ChatID: chat.ID, WorkerID: worker, HistoryVersion: claim.Turn.Chat.HistoryVersion, Attempt: &attempt},
				Messages: []store.NewMessage{step(`{"input_tokens":100,"output_tokens":10,"cache_read_tokens":50}`)},
				Progress: &store.Progress{RequestID: req, Steps: 1},
			})
			if err != nil {
				t.Fatal(err)
			}
			outcome := tc.outcome
			outcome.RequestID = req
			ending := store.Ending{
				Messages: []store.NewMessage{step(`{"input_tokens":120,"output_tokens":12,"reasoning_tokens":3}`)},
				Outcomes: []store.Outcome{outcome},
			}
			if tc.progress {
				ending.Progress = &store.Progress{RequestID: req, Steps: 1}
			}
			last := store.FinishTurn(ending)
			last.Fence = store.Fence{ChatID: chat.ID, WorkerID: worker, HistoryVersion: first.Chat.HistoryVersion}
			if _, err := st.Apply(ctx, last); err != nil {
				t.Fatal(err)
			}
			var got string
			if err := pool.QueryRow(ctx, `SELECT content->1->'outcome'->'usage' FROM chat_messages
				WHERE structured_request_id = $1 AND kind = 'receipt'`, req).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("receipt usage %s, want %s", got, want)
			}
		})
	}
}
