package notify_test

import (
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/notify"
)

// TestWatchCallsOnEvents: Watch calls its func for an event already waiting
// and for each one after, not after unwatch; C and Next still deliver.
func TestWatchCallsOnEvents(t *testing.T) {
	t.Parallel()
	hub := notify.New(nil, nil) // nothing here reads the database
	req := uuid.New()
	s := hub.SubscribeRequest(req)
	defer s.Close()
	hub.TellFinished(req, "waiting")
	var calls atomic.Int64
	unwatch := s.Watch(func() { calls.Add(1) })
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d calls for the event waiting when Watch began, want 1", n)
	}
	hub.TellFinished(req, "next")
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls after the next event, want 2", n)
	}
	unwatch()
	hub.TellFinished(req, "unwatched")
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls after unwatch, want 2", n)
	}
	select {
	case <-s.C():
	default:
		t.Fatal("C did not fire")
	}
	if e, ok := s.Next(); !ok || e.Value != "unwatched" {
		t.Fatalf("Next: %+v %v", e, ok)
	}
}
