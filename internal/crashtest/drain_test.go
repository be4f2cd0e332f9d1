package crashtest

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mockllm"
)

// drainRig is a database, a mock that holds the provider calls of the
// process named "draining" until released, an API-only server that stays up,
// and the draining server itself (started by the scenario).
type drainRig struct {
	t       *testing.T
	db      string
	pool    *pgxpool.Pool
	mock    *mockllm.Server
	mockURL string
	api     *client.Client
	token   string

	release chan struct{}
	entered chan string // the tag of each held call
}

func newDrainRig(t *testing.T) *drainRig {
	r := &drainRig{t: t, db: dbtest.NewURL(t), release: make(chan struct{}), entered: make(chan string, 8)}
	r.pool = openPool(t, r.db)
	r.mock = mockllm.New(mockllm.Options{BeforeRespond: func(ctx context.Context, req *mockllm.Request) error {
		if req.Header.Get(procHeader) != "draining" {
			return nil
		}
		r.entered <- tagOf(req)
		select {
		case <-r.release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	srv := httptest.NewServer(r.mock)
	t.Cleanup(srv.Close)
	r.mockURL = srv.URL
	// Serves the API throughout; runs no turns.
	api := startServer(t, serverOpts{Name: "api", DB: r.db, Config: writeConfig(t, r.mockURL, "", "api"), Workers: 0})
	r.token = newToken(t, r.db, "alice")
	r.api = api.client(r.token)
	return r
}

func tagOf(req *mockllm.Request) string {
	for _, m := range req.Messages {
		if m.Role == "user" {
			if tag := tagRE.FindString(m.Content); tag != "" {
				return tag
			}
		}
	}
	return ""
}

func (r *drainRig) create(ctx context.Context, tag string) (uuid.UUID, uuid.UUID) {
	r.t.Helper()
	res, err := r.api.CreateChat(ctx, client.CreateChatRequest{Content: text(tag + " Report."), ResponseFormat: structured()})
	if err != nil {
		r.t.Fatal(err)
	}
	return res.Chat.ID, *res.Messages[0].StructuredOutputRequestID
}

// chatState is what the scenarios look at: the owner, the snapshot, and
// the request's committed steps.
func (r *drainRig) chatState(ctx context.Context, chat, req uuid.UUID) (owned bool, snapshot int64, steps int) {
	r.t.Helper()
	err := r.pool.QueryRow(ctx, `SELECT c.worker_id IS NOT NULL, c.snapshot_version, s.steps
		FROM chats c JOIN structured_requests s ON s.chat_id = c.id WHERE c.id = $1 AND s.request_id = $2`, chat, req).
		Scan(&owned, &snapshot, &steps)
	if err != nil {
		r.t.Fatal(err)
	}
	return
}

func (r *drainRig) callsFor(tag string) int {
	n := 0
	for _, req := range r.mock.Requests() {
		if tagOf(&req) == tag {
			n++
		}
	}
	return n
}

// TestSigtermDrains: on SIGTERM a server stops claiming, lets its in-flight
// step finish within --drain-timeout (or cuts it off at the timeout), hands
// its chats back, and exits 0 within that bound; another server then
// completes the work without waiting for a lease to expire.
func TestSigtermDrains(t *testing.T) {
	t.Parallel()
	t.Run("step finishes", func(t *testing.T) {
		t.Parallel()
		r := newDrainRig(t)
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		const drain = 30 * time.Second
		// A long lease: only an explicit release lets the next server in
		// at once.
		srv := startServer(t, serverOpts{Name: "draining", DB: r.db, Config: writeConfig(t, r.mockURL, "", "draining"),
			Workers: 2, Lease: time.Minute, Drain: drain})
		chat1, req1 := r.create(ctx, "[c1 m1]")
		if tag := <-r.entered; tag != "[c1 m1]" {
			t.Fatalf("held call for %s", tag)
		}
		sent := time.Now()
		srv.signal(syscall.SIGTERM)
		// The server closes its listener after it told its workers to stop
		// claiming; from then on it must take no new chat, although it has
		// an idle worker.
		poll(t, 30*time.Second, "the draining server to close its listener", func() bool {
			_, err := srv.client("").Health(ctx)
			return errors.Is(err, syscall.ECONNREFUSED)
		})
		chat2, req2 := r.create(ctx, "[c2 m1]")
		_, snap2, _ := r.chatState(ctx, chat2, req2)
		close(r.release)
		code, exited := srv.wait(drain + 10*time.Second)
		took := time.Since(sent)
		if !exited || code != 0 || took > drain {
			t.Fatalf("exit %d (exited %v) after %s; want 0 within %s", code, exited, took, drain)
		}
		// The step in flight was committed (its finalizer call runs next)
		// and the chat handed back; the new chat was never claimed.
		if owned, _, steps := r.chatState(ctx, chat1, req1); owned || steps != 1 {
			t.Fatalf("chat 1 after the drain: owned %v, steps %d", owned, steps)
		}
		if owned, snap, steps := r.chatState(ctx, chat2, req2); owned || snap != snap2 || steps != 0 || r.callsFor("[c2 m1]") != 0 {
			t.Fatalf("chat 2 was touched while draining: owned %v, snapshot %d -> %d, steps %d", owned, snap2, snap, steps)
		}
		// The next server finishes both; chat 1 from its candidate, without
		// asking the provider again.
		startServer(t, serverOpts{Name: "next", DB: r.db, Config: writeConfig(t, r.mockURL, "", "next"), Workers: 2})
		for _, req := range []uuid.UUID{req1, req2} {
			res, err := r.api.WaitStructuredOutput(ctx, req)
			if err != nil || res.Status != client.OutputSucceeded {
				t.Fatalf("request %s: %+v %v", req, res, err)
			}
		}
		if n := r.callsFor("[c1 m1]"); n != 1 {
			t.Fatalf("%d provider calls for chat 1; the drained step was redone", n)
		}
		auditRequests(t, r.pool, []uuid.UUID{req1, req2})
	})
	t.Run("step cut at the timeout", func(t *testing.T) {
		t.Parallel()
		r := newDrainRig(t)
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		const drain = 1500 * time.Millisecond
		srv := startServer(t, serverOpts{Name: "draining", DB: r.db, Config: writeConfig(t, r.mockURL, "", "draining"),
			Workers: 1, Lease: time.Minute, Drain: drain})
		chat, req := r.create(ctx, "[c1 m1]")
		<-r.entered
		sent := time.Now()
		srv.signal(syscall.SIGTERM)
		// The provider never answers: the drain timeout cuts the step.
		code, exited := srv.wait(drain + 15*time.Second)
		took := time.Since(sent)
		if !exited || code != 0 || took < drain || took > drain+10*time.Second {
			t.Fatalf("exit %d (exited %v) after %s; want 0 after the %s drain", code, exited, took, drain)
		}
		if owned, _, steps := r.chatState(ctx, chat, req); owned || steps != 0 {
			t.Fatalf("after the cut: owned %v, steps %d", owned, steps)
		}
		if log := tailFile(srv.LogPath, 50); !strings.Contains(log, `"msg":"stopped"`) {
			t.Fatalf("no clean stop logged:\n%s", log)
		}
		close(r.release)
		startServer(t, serverOpts{Name: "next", DB: r.db, Config: writeConfig(t, r.mockURL, "", "next"), Workers: 1})
		res, err := r.api.WaitStructuredOutput(ctx, req)
		if err != nil || res.Status != client.OutputSucceeded {
			t.Fatalf("request: %+v %v", res, err)
		}
		if n := r.callsFor("[c1 m1]"); n != 2 {
			t.Fatalf("%d provider calls, want the cut one and the next server's", n)
		}
		auditRequests(t, r.pool, []uuid.UUID{req})
	})
}
