package notify_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/notify"
)

// TestProbe: on a session the probe's notification comes back (with the
// pool's configuration, or another of the same database); when the
// listener is on another database than the pool, as behind a transaction
// pooler, it never does, and the probe says so within its wait.
func TestProbe(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, other := dbtest.New(t), dbtest.New(t)
	start := time.Now()
	if err := notify.Probe(ctx, pool, nil, 5*time.Second); err != nil {
		t.Fatalf("the pool's own configuration: %v", err)
	}
	t.Logf("probe took %s", time.Since(start))
	same := pool.Config().ConnConfig
	same.RuntimeParams = map[string]string{"application_name": "direct"}
	if err := notify.Probe(ctx, pool, same, 5*time.Second); err != nil {
		t.Fatalf("another session on the same database: %v", err)
	}
	start = time.Now()
	err := notify.Probe(ctx, pool, other.Config().ConnConfig, 300*time.Millisecond)
	if !errors.Is(err, notify.ErrNotDelivered) {
		t.Fatalf("listening on another database: %v, want ErrNotDelivered", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the failed probe took %s, its wait is 300ms", took)
	}
	unreachable := pool.Config().ConnConfig
	unreachable.Database = "chatd_no_such_database"
	if err := notify.Probe(ctx, pool, unreachable, 5*time.Second); err == nil || errors.Is(err, notify.ErrNotDelivered) {
		t.Fatalf("a listener that cannot connect: %v, want the connection's error", err)
	}
}

// TestProbeSlowConnect: the probe's wait is for the notification, not for
// its own connection: on a loaded machine a connect slower than the wait
// is not a pooler that drops notifications.
func TestProbeSlowConnect(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	slow := pool.Config().ConnConfig.Copy()
	dial := slow.DialFunc
	slow.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		time.Sleep(time.Second) // a connect on a loaded machine, not synchronisation
		return dial(ctx, network, addr)
	}
	if err := notify.Probe(t.Context(), pool, slow, 300*time.Millisecond); err != nil {
		t.Fatalf("a slow connect to the same database: %v", err)
	}
}

// TestListenOn: a hub listens with the configuration ListenOn gives it,
// not the pool's: it hears a notification committed on that database and
// not one committed through its pool.
func TestListenOn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, direct := dbtest.New(t), dbtest.New(t)
	hub := notify.New(pool, nil)
	hub.ListenOn(direct.Config().ConnConfig)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	runCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	wg.Go(func() { hub.Run(runCtx) })
	<-hub.Ready()
	viaPool, viaDirect := uuid.New(), uuid.New()
	subPool, subDirect := hub.SubscribeRequest(viaPool), hub.SubscribeRequest(viaDirect)
	defer subPool.Close()
	defer subDirect.Close()
	if _, err := pool.Exec(ctx, "SELECT pg_notify('chatd_request', $1)", viaPool.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Exec(ctx, "SELECT pg_notify('chatd_request', $1)", viaDirect.String()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-subDirect.C():
	case <-subPool.C():
		t.Fatal("the hub heard a notification on its pool's database, not on ListenOn's")
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10s")
	}
}
