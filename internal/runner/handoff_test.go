package runner_test

import (
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/testenv"
)

// TestHandOffToAStoppingRunner: a chat claimed in its admission for a
// worker whose runner is stopping is handed back at once (it is runnable
// again for any replica), not left to its lease.
func TestHandOffToAStoppingRunner(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Runner: runner.Options{MaxRunning: 1, Lease: time.Hour}})
	ctx := t.Context()
	seat, ok := env.Slots.Reserve()
	for !ok { // the runner opens its slots; its first look for work holds one briefly
		select {
		case <-ctx.Done():
			t.Fatal("no free slot to reserve")
		case <-time.After(time.Millisecond):
		}
		seat, ok = env.Slots.Reserve()
	}
	stopped := make(chan struct{})
	go func() {
		env.StopRunner() // waits for the reserved slot, released after the hand-off runs
		close(stopped)
	}()

	token, err := env.Store.CreateToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	user, err := env.Store.Authenticate(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	claim := &store.LocalClaim{Worker: seat.Worker, Lease: seat.Lease}
	chat, _, err := env.Store.CreateChat(ctx, store.NewChat{OwnerID: user.ID, Model: env.Models.Default(),
		Content: []jsonb.Part{jsonb.Text("hello")}, Claim: claim})
	if err != nil {
		t.Fatal(err)
	}
	if !chat.WorkerID.Valid || chat.WorkerID.UUID != seat.Worker || chat.GenerationAttempt != 1 {
		t.Fatalf("admitted chat: worker %v (want %s), attempt %d (want 1)", chat.WorkerID, seat.Worker, chat.GenerationAttempt)
	}
	if got := claim.Turn; got.Chat.ID != chat.ID || len(got.Prompt) != 1 {
		t.Fatalf("the claim's turn: chat %s, %d prompt messages", got.Chat.ID, len(got.Prompt))
	}
	seat.Hand(claim.Turn)
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("the runner did not stop")
	}
	after, err := env.Store.LoadChat(ctx, chat.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.WorkerID.Valid || after.Status != client.StatusRunning {
		t.Fatalf("after the stop: worker %v, status %s; want runnable without an owner", after.WorkerID, after.Status)
	}
}
