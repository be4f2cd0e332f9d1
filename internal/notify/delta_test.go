package notify_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/notify"
)

// TestFlushPublishesBeforeReturning: a step commits right after Flush, and
// a stream must see the step's last fragments before the commit's
// notification (so the last structured_output_partial precedes the
// receipt). Flush returns once the deltas' NOTIFY is committed, so a
// notification sent after it reaches the listener later.
func TestFlushPublishesBeforeReturning(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.New(t)
	hub := notify.New(pool, nil)
	relay := notify.NewRelay(pool, hub, nil)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	wg.Go(func() { hub.Run(ctx) }) // ctx ends before the cleanups run
	wg.Go(func() { relay.Run(ctx) })
	<-hub.Ready()

	chat, owner := uuid.New(), uuid.New()
	deltas := hub.SubscribeDeltas(chat)
	defer deltas.Close()
	events := hub.Subscribe(chat)
	defer events.Close()
	for round := range 20 {
		relay.Delta(chat, notify.Delta{HistoryVersion: 1, Attempt: 1, Seq: int64(round + 1), Kind: "text", Text: "x"})
		relay.Flush()
		if _, err := pool.Exec(ctx, "SELECT pg_notify('chatd_chat', $1)", fmt.Sprintf("%s %d %s", chat, round+1, owner)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-events.C():
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		select {
		case batch := <-deltas.C():
			if len(batch.Live) != 1 || batch.Live[0].Seq != int64(round+1) {
				t.Fatalf("round %d: batch %+v", round, batch)
			}
		default:
			t.Fatalf("round %d: the chat's notification came before the deltas flushed ahead of it", round)
		}
	}
}
