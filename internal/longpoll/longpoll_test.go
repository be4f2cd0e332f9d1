package longpoll_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/longpoll"
	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/store"
)

// TestAgreesWithTheTrigger: the long poll's assumption of who announces a
// finish agrees with the trigger's rule (chatd_finish_announced) in
// PostgreSQL, for each process that may admit and finish a request. Each
// poll, on this process, is woken by the finish well before its deadline,
// answers the finished request, and reads it exactly as often as the
// protocol says (Poll). A disagreement is a poll that waits out its
// deadline or reads more.
func TestAgreesWithTheTrigger(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	here, there := newProcess(t, pool), newProcess(t, pool)
	older := store.New(pool) // an older binary: names no process
	owner := newUser(t, here.store)
	for _, tc := range []struct {
		name          string
		admit, finish *store.Store
		// reads is what the poll reads: before it waits (the request, and
		// again after following its chat) and after it is woken.
		reads int64
	}{
		{"admitted and finished here: known pending, told", here.store, here.store, 0},
		{"admitted here, finished elsewhere: known pending, announced", here.store, there.store, 1},
		{"admitted and finished elsewhere: read, follow, read, announced", there.store, there.store, 3},
		{"admitted by an older binary: read, announced", older, there.store, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			chat, req := admit(t, tc.admit, owner)
			reads := &countingReader{s: here.store}
			waiting := make(chan struct{})
			p := longpoll.OnWaiting(longpoll.Poller{Hub: here.hub, Store: reads}, func() { close(waiting) })
			const wait = 15 * time.Second
			poll, err := p.Open(ctx, owner, req, wait)
			if err != nil {
				t.Fatal(err)
			}
			defer poll.Close()
			type answer struct {
				st  store.RequestState
				err error
			}
			answered := make(chan answer, 1)
			go func() {
				st, err := poll.Wait(ctx)
				answered <- answer{st, err}
			}()
			select {
			case <-waiting:
			case a := <-answered:
				t.Fatalf("the poll answered %+v %v before the finish", a.st.Request, a.err)
			}
			before := reads.n.Load()
			finish(t, tc.finish, chat, req)
			start := time.Now()
			a := <-answered
			if a.err != nil {
				t.Fatal(a.err)
			}
			if took := time.Since(start); took > wait/2 || a.st.Request.Status != client.OutputSucceeded {
				t.Fatalf("the poll answered %s after %s (its wait is %s): the finish was neither told nor announced to it; "+
					"who announces a finish (chatd_finish_announced, sql/triggers/030_requests.sql) and whom the poll follows "+
					"(longpoll.Poll, step 3) disagree", a.st.Request.Status, took.Round(time.Millisecond), wait)
			}
			if n := reads.n.Load(); n != tc.reads {
				t.Fatalf("the poll read the request %d times (%d before it waited), want %d: it reads what its hub "+
					"knows or was told, or is woken by more than the finish (longpoll.Poll)", n, before, tc.reads)
			}
			if a.st.Receipt == nil || a.st.Request.ReceiptMessageID == nil || *a.st.Request.ReceiptMessageID != a.st.Receipt.ID {
				t.Fatalf("answered %+v without its receipt", a.st)
			}
		})
	}
}

// process is a replica: a listening hub and the store that tells it.
type process struct {
	hub   *notify.Hub
	store *store.Store
}

func newProcess(t *testing.T, pool *pgxpool.Pool) process {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	hub := notify.New(pool, nil)
	var wg sync.WaitGroup
	wg.Go(func() { hub.Run(ctx) })
	t.Cleanup(func() {
		stop()
		wg.Wait()
	})
	<-hub.Ready()
	s := store.New(pool)
	s.Tell(hub.ID(), hub)
	return process{hub: hub, store: s}
}

// countingReader counts the long poll's reads.
type countingReader struct {
	s *store.Store
	n atomic.Int64
}

func (c *countingReader) GetRequest(ctx context.Context, owner, request uuid.UUID) (store.RequestState, error) {
	c.n.Add(1)
	return c.s.GetRequest(ctx, owner, request)
}

func newUser(t *testing.T, s *store.Store) uuid.UUID {
	t.Helper()
	token, err := s.CreateToken(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	user, err := s.Authenticate(t.Context(), token)
	if err != nil {
		t.Fatal(err)
	}
	return user.ID
}

// admit creates a chat with a structured request through s: s's process
// is its admitted_by.
func admit(t *testing.T, s *store.Store, owner uuid.UUID) (chat, request uuid.UUID) {
	t.Helper()
	c, input, err := s.CreateChat(t.Context(), store.NewChat{OwnerID: owner, Model: "m", Content: []jsonb.Part{jsonb.Text("go")},
		Request: &store.RequestSpec{Name: "r", Schema: json.RawMessage(`{"type":"object"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	return c.ID, input.StructuredRequestID.UUID
}

// finish claims the chat and commits the finalizer's step through s, as a
// worker of s's process: s's process is its finished_by.
func finish(t *testing.T, s *store.Store, chat, request uuid.UUID) {
	t.Helper()
	ctx := t.Context()
	worker := uuid.New()
	claim, err := s.ClaimTurn(ctx, store.ClaimParams{Worker: worker, Chat: chat, Lease: time.Minute, CountAttempt: true})
	if err != nil || claim.Turn.Chat.ID != chat {
		t.Fatalf("claim: %+v %v", claim, err)
	}
	attempt := claim.Turn.Chat.GenerationAttempt
	rid := uuid.NullUUID{UUID: request, Valid: true}
	value := json.RawMessage(`{"answer":42}`)
	call := jsonb.Part{Type: jsonb.PartToolCall, ToolCallID: "call_1", ToolName: client.FinalizerName,
		Args: json.RawMessage(`{"output":{"answer":42}}`)}
	commit := store.FinishTurn(store.Ending{
		Messages: []store.NewMessage{
			{Role: client.RoleAssistant, RequestID: rid, FinishReason: "tool-calls", Parts: []jsonb.Part{call}},
			{Role: client.RoleTool, RequestID: rid, Parts: []jsonb.Part{{Type: jsonb.PartToolResult, ToolCallID: "call_1",
				ToolName: client.FinalizerName, Result: json.RawMessage(`"Accepted"`)}}},
		},
		Progress: &store.Progress{RequestID: request, Steps: 1, SetCandidate: true, Candidate: value, CandidateCallID: "call_1"},
		Outcomes: []store.Outcome{{RequestID: request, Status: client.OutputSucceeded, Value: value}},
	})
	commit.Fence = store.Fence{ChatID: chat, WorkerID: worker, HistoryVersion: claim.Turn.Chat.HistoryVersion, Attempt: &attempt}
	res, err := s.Apply(ctx, commit)
	if err != nil || res.Request.Status != client.OutputSucceeded {
		t.Fatalf("finish: %+v %v", res.Request, err)
	}
}
