package runner_test

import (
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

// TestLeaseRenewedThroughALongStep: a step that outlasts the lease several
// times keeps the chat, its lease renewed every third of its length, and
// the turn ends in one provider call.
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
	// At least every third of the lease while the step ran (6 in 2s),
	// with room for a slow machine.
	if st := got["ChatRenewLeaseIfOwned"]; st.Commits < 4 {
		t.Errorf("lease renewals: %+v in a %s step with a %s lease, want at least 4 (%v)", st, step, lease, got)
	}
	if n := len(env.Mock.Requests()); n != 1 {
		t.Errorf("%d provider calls, want 1: the chat changed hands", n)
	}
}
