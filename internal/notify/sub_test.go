package notify_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/store"
)

// TestWatchCallsOnEvents: Watch calls its func for an event already waiting
// and for each one after, not after unwatch; C and Next still deliver.
func TestWatchCallsOnEvents(t *testing.T) {
	t.Parallel()
	hub := notify.New(nil, nil) // nothing here reads the database
	chat, owner := uuid.New(), uuid.New()
	s := hub.Subscribe(chat)
	defer s.Close()
	hub.TellChanged(chat, owner, 1)
	var calls atomic.Int64
	unwatch := s.Watch(func() { calls.Add(1) })
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d calls for the event waiting when Watch began, want 1", n)
	}
	hub.TellChanged(chat, owner, 2)
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls after the next event, want 2", n)
	}
	unwatch()
	hub.TellChanged(chat, owner, 3)
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls after unwatch, want 2", n)
	}
	select {
	case <-s.C():
	default:
		t.Fatal("C did not fire")
	}
	if e, ok := s.Next(); !ok || e.Snapshot != 3 {
		t.Fatalf("Next: %+v %v", e, ok)
	}
}

// TestRequestSubKeepsTheToldFinish: a finish told with the request as its
// commit left it is kept over an announcement of the same finish that
// arrives before the subscriber looks, so the subscriber need not read.
func TestRequestSubKeepsTheToldFinish(t *testing.T) {
	t.Parallel()
	hub := notify.New(nil, nil) // nothing here reads the database
	req := uuid.New()
	s := hub.SubscribeRequest(req)
	defer s.Close()
	hub.PublishRequest(req)
	if e, ok := s.Next(); !ok || e.RequestID != req || e.State != nil || e.Resync {
		t.Fatalf("announced: %+v %v, want the request's finish without its state", e, ok)
	}
	hub.TellFinished(store.RequestState{Request: store.Request{RequestID: req, Status: client.OutputSucceeded}})
	hub.PublishRequest(req)
	<-s.C()
	if e, ok := s.Next(); !ok || e.State == nil || e.State.Request.Status != client.OutputSucceeded {
		t.Fatalf("told, then announced: %+v %v, want the told state", e, ok)
	}
	if e, ok := s.Next(); ok {
		t.Fatalf("a second event %+v after the coalesced one", e)
	}
}

// TestAdmittedUntilFinished: a request this process admits is known
// pending once the listener is up, until its finish is told or announced,
// its admission failed, the listener dropped or the record is too old;
// with the listener down nothing is recorded.
func TestAdmittedUntilFinished(t *testing.T) {
	t.Parallel()
	owner, chat := uuid.New(), uuid.New()
	down := notify.New(nil, nil) // never listening
	down.Admitting(uuid.New(), owner, chat)
	req := uuid.New()
	down.Admitting(req, owner, chat)
	if _, ok := down.Pending(req, owner); ok {
		t.Error("recorded while the listener is down")
	}

	ctx := t.Context()
	pool := dbtest.New(t)
	hub, stale := notify.New(pool, nil), notify.New(pool, nil)
	stale.TrustAdmissionsFor(-1) // every record is past its time
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	wg.Go(func() { hub.Run(ctx) })
	wg.Go(func() { stale.Run(ctx) })
	<-hub.Ready()
	<-stale.Ready()
	old := uuid.New()
	stale.Admitting(old, owner, chat)
	if _, ok := stale.Pending(old, owner); ok {
		t.Error("an admission past its time is trusted")
	}
	told, announced, failed := uuid.New(), uuid.New(), uuid.New()
	hub.Admitting(told, owner, chat)
	hub.Admitting(announced, owner, chat)
	hub.Admitting(failed, owner, chat)()
	if got, ok := hub.Pending(told, owner); !ok || got != chat {
		t.Fatalf("Pending: %v %v, want %v", got, ok, chat)
	}
	if _, ok := hub.Pending(told, uuid.New()); ok {
		t.Error("pending for another owner")
	}
	if _, ok := hub.Pending(failed, owner); ok {
		t.Error("pending after the admission failed")
	}
	hub.TellFinished(store.RequestState{Request: store.Request{RequestID: told}})
	if _, ok := hub.Pending(told, owner); ok {
		t.Error("pending after its finish was told")
	}
	sub := hub.SubscribeRequest(announced)
	defer sub.Close()
	if _, err := pool.Exec(ctx, "SELECT pg_notify('chatd_request', $1)", announced.String()); err != nil {
		t.Fatal(err)
	}
	<-sub.C()
	if _, ok := hub.Pending(announced, owner); ok {
		t.Error("pending after its finish was announced")
	}
	// The listener's connection lost: what was recorded may miss its
	// announcement, so it is dropped; the reconnect's resync wakes the
	// subscribers.
	lost := uuid.New()
	hub.Admitting(lost, owner, chat)
	resync := hub.SubscribeRequest(lost)
	defer resync.Close()
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	<-resync.C()
	if e, _ := resync.Next(); !e.Resync || e.RequestID != lost {
		t.Fatalf("event %+v, want the resync", e)
	}
	if _, ok := hub.Pending(lost, owner); ok {
		t.Error("pending after the listener reconnected")
	}
}
