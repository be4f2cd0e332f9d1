package store_test

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/store"
)

// told collects what a store tells its process (store.Tell).
type told struct {
	mu     sync.Mutex
	states map[uuid.UUID]store.RequestState
}

func (t *told) TellFinished(state store.RequestState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.states == nil {
		t.states = map[uuid.UUID]store.RequestState{}
	}
	t.states[state.Request.RequestID] = state
}

func (t *told) TellChanged(uuid.UUID, uuid.UUID, int64) {}

func (t *told) Admitting(uuid.UUID, uuid.UUID, uuid.UUID) func() { return func() {} }

func (t *told) has(id uuid.UUID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.states[id]
	return ok
}

func (t *told) state(id uuid.UUID) store.RequestState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.states[id]
}

// TestFinishAnnouncedOnlyWhenAnotherProcessMayWait: a request's finish is
// announced on chatd_request unless the process that admitted it commits
// it and nobody follows the chat; the committing process is told either
// way.
func TestFinishAnnouncedOnlyWhenAnotherProcessMayWait(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	hubX, hubY := uuid.New(), uuid.New()
	var toldX, toldY told
	x := store.New(pool) // this process
	x.Tell(hubX, &toldX)
	y := store.New(pool) // another replica
	y.Tell(hubY, &toldY)
	old := store.New(pool) // an older binary: names no process
	user := newUser(t, x, "alice")
	for _, tc := range []struct {
		name              string
		admit, finish     *store.Store
		followed          bool
		announced, toldMe bool
	}{
		{name: "admitted and finished here, not followed", admit: x, finish: x, announced: false, toldMe: true},
		{name: "admitted and finished here, followed", admit: x, finish: x, followed: true, announced: true, toldMe: true},
		{name: "admitted by another process", admit: y, finish: x, announced: true, toldMe: true},
		{name: "admitted by an older binary", admit: old, finish: x, announced: true, toldMe: true},
		{name: "finished by an older binary", admit: x, finish: old, announced: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			listener, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig)
			if err != nil {
				t.Fatal(err)
			}
			defer listener.Close(context.Background())
			if _, err := listener.Exec(ctx, "LISTEN chatd_request"); err != nil {
				t.Fatal(err)
			}
			chat, input, err := tc.admit.CreateChat(ctx, store.NewChat{OwnerID: user.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")},
				Request: &store.RequestSpec{Name: "r", Schema: json.RawMessage(`{"type":"object"}`)}})
			if err != nil {
				t.Fatal(err)
			}
			req := input.StructuredRequestID.UUID
			if tc.followed {
				if _, err := pool.Exec(ctx, `INSERT INTO chat_followers (owner_id, chat_id, hub_id) VALUES ($1, $2, $3)`,
					user.ID, chat.ID, uuid.New()); err != nil {
					t.Fatal(err)
				}
			}
			worker := uuid.New()
			claim, err := tc.finish.ClaimTurn(ctx, store.ClaimParams{Worker: worker, Chat: chat.ID, Lease: time.Minute, CountAttempt: true})
			if err != nil || claim.Turn.Chat.ID != chat.ID {
				t.Fatalf("claim: %v", err)
			}
			c := finalizerCommit(store.Fence{ChatID: chat.ID, WorkerID: worker, HistoryVersion: claim.Turn.Chat.HistoryVersion},
				req, claim.Turn.Chat.GenerationAttempt)
			if res, err := tc.finish.Apply(ctx, c); err != nil || res.Request.Status != client.OutputSucceeded {
				t.Fatalf("apply: %v", err)
			}
			// Committed after the finish, so heard after its announcement,
			// if any.
			sentinel := uuid.NewString()
			if _, err := pool.Exec(ctx, `SELECT pg_notify('chatd_request', $1)`, sentinel); err != nil {
				t.Fatal(err)
			}
			announced := false
			for {
				n, err := listener.WaitForNotification(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if n.Payload == req.String() {
					announced = true
				}
				if n.Payload == sentinel {
					break
				}
			}
			if announced != tc.announced {
				t.Errorf("announced %v, want %v", announced, tc.announced)
			}
			if toldX.has(req) != tc.toldMe {
				t.Errorf("this process told %v, want %v", toldX.has(req), tc.toldMe)
			}
			if tc.toldMe {
				sameAsRead(t, x, user.ID, req, toldX.state(req))
			}
		})
	}
}

// sameAsRead: the state told in-process is what a read of the request
// after the commit returns (the long poll answers with it instead).
func sameAsRead(t *testing.T, s *store.Store, owner, req uuid.UUID, fin store.RequestState) {
	t.Helper()
	if fin.Receipt == nil {
		t.Fatalf("told %#v, want the request with its receipt", fin)
	}
	read, err := s.GetRequest(t.Context(), owner, req)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fin.Request, read.Request) {
		t.Errorf("told request\n%+v\nread\n%+v", fin.Request, read.Request)
	}
	r, f := read.Receipt, fin.Receipt
	if r == nil || f.ID != r.ID || f.Role != r.Role || f.Kind != r.Kind || !f.CreatedAt.Equal(r.CreatedAt) ||
		f.Visibility != r.Visibility || string(f.Content) != string(r.Content) {
		t.Errorf("told receipt\n%+v\nread\n%+v", f, r)
	}
}
