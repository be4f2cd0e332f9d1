// Package longpoll waits for a structured request to finish: the long poll
// behind GET /api/v1/structured-outputs/{id}?wait=. It owns the protocol
// (Poll) so that the API calls it in a few lines.
package longpoll

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/testsignal"
)

// Reader reads a structured request as it stands (store.Store.GetRequest).
type Reader interface {
	GetRequest(ctx context.Context, owner, requestID uuid.UUID) (store.RequestState, error)
}

// Poller opens the long polls of one process: its hub and its store.
type Poller struct {
	Hub         *notify.Hub
	Store       Reader
	TestSignals *TestSignals // nil or zero in production
}

// TestSignals are the points where a long poll tells a test what it does.
type TestSignals struct {
	// Waiting hears the request of each poll that begins to wait for the
	// finish, its reads and follow done: a test answers the turn after it,
	// so that the poll is woken, not told at its first look.
	Waiting testsignal.Signal[uuid.UUID]
}

// Poll is one long poll of a structured request. Open and Wait run its
// protocol, in this order:
//
//  1. Subscribe to the request's finish (notify.Hub.SubscribeRequest)
//     before anything is read: a finish committed after the read is then
//     delivered, not missed.
//  2. Know, or read. A request this process admitted and has not seen
//     finish is pending (notify.Hub.Pending): nothing is read. Any other is
//     read once.
//  3. Follow, then read again, when the read found the request pending and
//     another process admitted it. The trigger rule this relies on
//     (chatd_finish_announced, sql/triggers/030_requests.sql): a finish is
//     announced on chatd_request unless the process that admitted the
//     request (admitted_by) commits it (finished_by) and nobody follows the
//     chat. Following registers this process, so that process announces;
//     the read after it sees a finish committed before.
//  4. Wait until the deadline. A finish this process committed is told with
//     the request as the commit left it (notify.Hub.TellFinished): it is
//     the answer, with no read. An announced finish, or a resync after the
//     listener reconnected, is read. At the deadline a request only known
//     pending is read once, so the answer is always what a read gives.
//
// So a long poll where the request was admitted reads nothing when the
// finish is committed there too, and one elsewhere reads, follows, reads,
// and reads once more when woken. TestAgreesWithTheTrigger counts the reads
// of each case against the trigger in PostgreSQL.
type Poll struct {
	p         Poller
	owner, id uuid.UUID
	wait      time.Duration
	sub       *notify.RequestSub
	unfollow  func()
	st        store.RequestState
	read      bool // st was read; false: the hub knows it pending, unread
}

// Open starts a long poll of owner's request that waits at most wait, and
// learns what the request is now (steps 1 and 2); with wait 0 it only reads
// it. Close the poll when done.
func (p Poller) Open(ctx context.Context, owner, request uuid.UUID, wait time.Duration) (*Poll, error) {
	l := &Poll{p: p, owner: owner, id: request, wait: max(wait, 0)}
	if l.wait > 0 {
		l.sub = p.Hub.SubscribeRequest(request)
		if chat, ok := p.Hub.Pending(request, owner); ok {
			l.st.Request.RequestID, l.st.Request.ChatID, l.st.Request.Status = request, chat, client.OutputPending
			return l, nil
		}
	}
	if err := l.readNow(ctx); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// ChatID is the request's chat.
func (l *Poll) ChatID() uuid.UUID { return l.st.Request.ChatID }

// Wait returns the request once it is finished, or as it stands when the
// wait ends (steps 3 and 4).
func (l *Poll) Wait(ctx context.Context) (store.RequestState, error) {
	if l.wait == 0 || l.st.Request.Status != client.OutputPending {
		return l.st, nil
	}
	if l.mustFollow() {
		unfollow, err := l.p.Hub.Follow(ctx, l.owner, l.st.Request.ChatID)
		if err != nil {
			return l.st, err
		}
		l.unfollow = unfollow
		if err := l.readNow(ctx); err != nil {
			return l.st, err
		}
	}
	return l.await(ctx)
}

// Close ends the subscription and the follow.
func (l *Poll) Close() {
	if l.unfollow != nil {
		l.unfollow()
	}
	if l.sub != nil {
		l.sub.Close()
	}
}

// mustFollow says whether the request was read pending and admitted by
// another process, which announces its finish only to followers. A request
// whose admitting process is unknown (an older binary) is always announced.
func (l *Poll) mustFollow() bool {
	by := l.st.Request.AdmittedBy
	return l.read && l.st.Request.Status == client.OutputPending && by.Valid && by.UUID != l.p.Hub.ID()
}

// await waits until the pending request finishes, or the deadline.
func (l *Poll) await(ctx context.Context) (store.RequestState, error) {
	deadline := time.NewTimer(l.wait)
	defer deadline.Stop()
	if ts := l.p.TestSignals; ts != nil {
		ts.Waiting.Signal(l.id)
	}
	for l.st.Request.Status == client.OutputPending {
		select {
		case <-l.sub.C():
			if e, ok := l.sub.Next(); ok && e.State != nil {
				return *e.State, nil // told: as the commit left it
			}
		case <-deadline.C:
			if !l.read {
				return l.p.Store.GetRequest(ctx, l.owner, l.id)
			}
			return l.st, nil
		case <-ctx.Done():
			return l.st, ctx.Err()
		}
		if err := l.readNow(ctx); err != nil {
			return l.st, err
		}
	}
	return l.st, nil
}

func (l *Poll) readNow(ctx context.Context) error {
	st, err := l.p.Store.GetRequest(ctx, l.owner, l.id)
	if err != nil {
		return err
	}
	l.st, l.read = st, true
	return nil
}
