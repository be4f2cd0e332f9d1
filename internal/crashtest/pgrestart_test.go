package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/pglocal"
)

// ownCluster is a PostgreSQL cluster of the test's own, so it can be
// stopped and started again on the same directory.
type ownCluster struct {
	t   *testing.T
	dir string
	mu  sync.Mutex
	c   *pglocal.Cluster
}

// clusterSettings: no fsync (the data only has to survive the postmaster,
// not the machine), but synchronous commits, so that a commit the server
// acknowledged survives the immediate shutdown.
var clusterSettings = map[string]string{"fsync": "off", "max_connections": "100"}

func startOwnCluster(t *testing.T) *ownCluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "chatd-crashtest-pg-")
	if err != nil {
		t.Fatal(err)
	}
	oc := &ownCluster{t: t, dir: dir}
	t.Cleanup(func() {
		oc.stop(false)
		_ = os.RemoveAll(dir)
	})
	oc.start()
	return oc
}

func (oc *ownCluster) start() {
	oc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := pglocal.Start(ctx, pglocal.Options{Dir: oc.dir, Settings: clusterSettings})
	if err != nil {
		oc.t.Fatal(err)
	}
	oc.mu.Lock()
	oc.c = c
	oc.mu.Unlock()
}

// stop shuts the postmaster down: fast (sessions are disconnected, a
// checkpoint is written) or immediate (SIGQUIT, like a crash: the next
// start recovers from the WAL).
func (oc *ownCluster) stop(immediate bool) {
	oc.mu.Lock()
	c := oc.c
	oc.c = nil
	oc.mu.Unlock()
	if c == nil {
		return
	}
	ctx := context.Background()
	if immediate {
		cancelled, cancel := context.WithCancel(ctx)
		cancel() // Stop sends SIGINT, then SIGQUIT at once when its context is done
		ctx = cancelled
	}
	_ = c.Stop(ctx)
}

func (oc *ownCluster) url(t *testing.T, db string) string {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if err := oc.c.EnsureDatabase(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return oc.c.URL(db)
}

// TestPostgresRestartUnderLoad stops PostgreSQL under a running chatd —
// once with a fast shutdown, once immediately (a crash) — and starts it
// again on the same directory, while clients send structured requests and
// one of them follows its chat with a stream. The server recovers on its
// own: /readyz comes back, requests keep finishing, the stream delivers
// every message of its chat, and at the end no request is stranded and the
// checker is clean.
func TestPostgresRestartUnderLoad(t *testing.T) {
	t.Parallel()
	seed := seedFor(t)
	oc := startOwnCluster(t)
	db := oc.url(t, "chatd")
	pool := openPool(t, db)

	mock := mockllm.New(mockllm.Options{Latency: 15 * time.Millisecond, ChunkDelay: 3 * time.Millisecond, StepFor: chaosStep(seed)})
	mockSrv := httptest.NewServer(mock)
	t.Cleanup(mockSrv.Close)
	c := &cluster{t: t, db: db, mockURL: mockSrv.URL, ws: workspace(t), workers: 3, procs: map[string]int{}}
	c.start(0)
	c.token = newToken(t, db, "alice")
	srv := c.server(0)

	sent := &journal{}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	for id := range 5 {
		wg.Go(func() { c.drive(ctx, id, seed, sent.record) })
	}

	// The followed chat: a stream on it, and a message whenever it is idle.
	followRNG := rand.New(rand.NewPCG(seed, 99))
	fol := follow(t, ctx, &wg, srv.client(c.token), 99, func(ctx context.Context, chat uuid.UUID) bool {
		return c.waitIdle(ctx, chat, followRNG)
	}, sent.record)

	finished := func() int {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM structured_requests WHERE status <> 'pending'`).Scan(&n); err != nil {
			return -1
		}
		return n
	}
	// progress waits until a few more requests finish: the server works.
	progress := func(what string) {
		t.Helper()
		base := -1
		poll(t, 60*time.Second, "the first finished requests "+what, func() bool { base = finished(); return base >= 0 })
		poll(t, 90*time.Second, "five more finished requests "+what, func() bool { return finished() >= base+5 })
	}
	progress("before the restarts")
	for _, immediate := range []bool{false, true} {
		oc.stop(immediate)
		poll(t, 30*time.Second, "/readyz to report the database gone", func() bool { return !srv.ready(context.Background()) })
		oc.start()
		poll(t, 60*time.Second, "/readyz to come back", func() bool { return srv.ready(context.Background()) })
		progress(fmt.Sprintf("after the restart (immediate: %v)", immediate))
	}
	stop()
	wg.Wait()
	answerRNG := rand.New(rand.NewPCG(seed, 98))
	settle(t, pool, 120*time.Second, func(chat uuid.UUID) { c.answer(context.Background(), chat, answerRNG) })

	if _, exited := srv.wait(0); exited {
		t.Fatal("the server exited")
	}
	seen := sent.requests()
	outcomes := auditRequests(t, pool, seen)
	auditInputs(t, pool, sent.inputs)

	fol.verify()
	// An outage is a 503 (Retry-After), never a 500.
	if failed := logErrors(srv.LogPath, "request failed"); len(failed) > 0 {
		t.Errorf("%d requests answered 500 around the restarts, first: %s", len(failed), failed[0])
	}
	if testing.Verbose() {
		t.Logf("server warnings and errors:\n%s", logSummary(srv.LogPath))
	}
	t.Logf("%d messages sent, %d requests: %s", len(sent.inputs), len(seen), outcomeSummary(outcomes))
}
