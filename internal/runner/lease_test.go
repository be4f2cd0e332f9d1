package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

// TestLeaseRenewedThroughALongStep: a step that outlasts the lease several
// times keeps the chat, its lease renewed every third of its length or
// so, and the turn ends in one provider call.
func TestLeaseRenewedThroughALongStep(t *testing.T) {
	t.Parallel()
	const lease, step = 600 * time.Millisecond, 2 * time.Second
	env, txs := tracedEnv(t, testenv.Options{Mock: mockllm.Options{Latency: step},
		Runner: runner.Options{MaxRunning: 2, Lease: lease}})
	c := env.Client("alice")
	before := txs.Snapshot()
	_, req := create(t, c, reportSchema)
	if res := wait(t, c, req); res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v", res)
	}
	got := txDelta(txs.Snapshot(), before)
	// A renewal every third to half of the lease while the step ran (4 to
	// 6 in 2s), with room for a slow machine.
	if st := got["renew_leases"]; st.Commits < 3 {
		t.Errorf("lease renewals: %+v in a %s step with a %s lease, want at least 3 (%v)", st, step, lease, got)
	}
	if n := len(env.Mock.Requests()); n != 1 {
		t.Errorf("%d provider calls, want 1: the chat changed hands", n)
	}
}

// TestLeasesRenewedTogether: 30 chats whose steps outlast the lease several
// times are renewed by one statement per round, not one each: the
// renewals' transactions are as many as the rounds, whatever the number of
// chats, and no chat changes hands.
func TestLeasesRenewedTogether(t *testing.T) {
	t.Parallel()
	const chats, lease, step = 30, 600 * time.Millisecond, 2 * time.Second
	env, txs := tracedEnv(t, testenv.Options{Mock: mockllm.Options{Latency: step},
		Runner: runner.Options{MaxRunning: 64, Lease: lease}})
	c := env.Client("alice")
	before := txs.Snapshot()
	var reqs []uuid.UUID
	for range chats {
		_, req := create(t, c, reportSchema)
		reqs = append(reqs, req)
	}
	for _, req := range reqs {
		if res := wait(t, c, req); res.Status != client.OutputSucceeded {
			t.Fatalf("result %+v", res)
		}
	}
	got := txDelta(txs.Snapshot(), before)
	// A round every sixth of the lease: about 20 over the steps' 2 s and
	// the creates' spread; 30 chats renewed alone would take 120 or more.
	if st := got["renew_leases"]; st.Commits < 3 || st.Commits > 40 {
		t.Errorf("%d renewal transactions for %d chats over a %s step with a %s lease, want 3 to 40 (%v)", st.Commits, chats, step, lease, got)
	}
	if st := got["ChatRenewLeaseIfOwned"]; st.Commits > chats/3 {
		t.Errorf("%d chats renewed alone (their rows held by a commit), want few (%v)", st.Commits, got)
	}
	if n := len(env.Mock.Requests()); n != chats {
		t.Errorf("%d provider calls for %d chats: some changed hands", n, chats)
	}
	t.Logf("renewals: %+v together, %+v alone", got["renew_leases"], got["ChatRenewLeaseIfOwned"])
}

// TestLostLeaseCutsTheStep: when another worker owns the chat (its claim
// rewritten under the runner), the next renewal finds it and the step's
// provider call is cancelled.
func TestLostLeaseCutsTheStep(t *testing.T) {
	t.Parallel()
	var cut atomic.Bool
	started, done := make(chan struct{}), make(chan struct{})
	env := testenv.New(t, testenv.Options{Runner: runner.Options{MaxRunning: 2, Lease: 600 * time.Millisecond},
		Mock: mockllm.Options{BeforeRespond: func(ctx context.Context, _ *mockllm.Request) error {
			close(started)
			defer close(done)
			select {
			case <-ctx.Done():
				cut.Store(true)
			case <-time.After(time.Minute):
			}
			return ctx.Err()
		}}})
	c := env.Client("alice")
	chat, _ := create(t, c, reportSchema)
	ctx := t.Context()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if _, err := env.Pool.Exec(ctx, `UPDATE chats SET worker_id = gen_random_uuid(), lease_expires_at = now() + interval '1 hour' WHERE id = $1`, chat); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if !cut.Load() {
		t.Fatal("the step ran to its end on a chat another worker owns")
	}
	t.Logf("the step was cut %s after the chat changed hands", time.Since(begin))
}
