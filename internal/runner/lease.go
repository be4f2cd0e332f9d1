package runner

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/store"
)

// leases are the claims this runner's workers hold, renewed together: one
// statement every sixth of the lease renews every chat whose lease was set
// a third of it ago or more, so a process with thousands of chats waiting
// on their models writes a few transactions a minute for them, not one per
// chat every third of the lease.
type leases struct {
	mu   sync.Mutex
	held map[uuid.UUID]*lease // by chat
}

// lease is one held chat's claim.
type lease struct {
	worker uuid.UUID
	set    time.Time // when the lease was last set (the claim, a renewal)
	lost   context.CancelCauseFunc
	log    *slog.Logger
}

// hold registers a claimed chat; lost cancels its work when another worker
// owns it. The function returned drops it (the worker is done with it).
func (l *leases) hold(chatID, worker uuid.UUID, lost context.CancelCauseFunc, log *slog.Logger) (drop func()) {
	le := &lease{worker: worker, set: time.Now(), lost: lost, log: log}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[uuid.UUID]*lease{}
	}
	l.held[chatID] = le
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.held[chatID] == le {
			delete(l.held, chatID)
		}
	}
}

// due are the held chats whose lease was set before then.
func (l *leases) due(then time.Time) ([]store.Held, []*lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var held []store.Held
	var les []*lease
	for id, le := range l.held {
		if le.set.Before(then) {
			held = append(held, store.Held{Chat: id, Worker: le.worker})
			les = append(les, le)
		}
	}
	return held, les
}

// holds reports whether le is still chat's claim.
func (l *leases) holds(chat uuid.UUID, le *lease) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[chat] == le
}

// renewLeases renews the held chats' leases every sixth of the lease
// until ctx ends.
func (r *Runner) renewLeases(ctx context.Context) {
	every := r.opts.Lease / 3
	t := time.NewTicker(every / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.renewDue(ctx, every)
	}
}

// renewDue renews, in one statement, the leases set every ago or more;
// each chat it did not renew is renewed alone, which tells a row held by
// the chat's own commit from a chat another worker owns (its work is
// cancelled). Not cancelled with ctx: a renewal in flight completes (a
// cancelled query costs the connection); the bound only matters when the
// database hangs.
func (r *Runner) renewDue(ctx context.Context, every time.Duration) {
	now := time.Now()
	held, les := r.leases.due(now.Add(-every))
	if len(held) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), every)
	defer cancel()
	renewed, err := r.store.RenewLeases(rctx, held, r.opts.Lease)
	if err != nil {
		r.log.Warn("lease renewal failed", slog.Int("chats", len(held)), slog.String("error", err.Error()))
		return
	}
	ok := make(map[uuid.UUID]bool, len(renewed))
	for _, id := range renewed {
		ok[id] = true
	}
	r.leases.mu.Lock()
	for i, h := range held {
		if ok[h.Chat] {
			les[i].set = now
		}
	}
	r.leases.mu.Unlock()
	for i, h := range held {
		if !ok[h.Chat] && r.leases.holds(h.Chat, les[i]) { // not the end of its turn
			r.renewOne(rctx, h, les[i], now)
		}
	}
}

// renewOne renews one chat's lease, waiting for its row.
func (r *Runner) renewOne(ctx context.Context, h store.Held, le *lease, now time.Time) {
	err := r.store.RenewLease(ctx, h.Chat, h.Worker, r.opts.Lease)
	switch {
	case errors.Is(err, store.ErrFenceMiss):
		// Another owner, or no chat at all: a deletion while this process
		// could not hear of it (frozen, or cut off).
		cause := errLeaseLost
		if _, err := r.store.LoadChat(ctx, h.Chat); errors.Is(err, store.ErrNotFound) {
			cause = errChatGone
		}
		le.lost(cause)
	case err != nil:
		le.log.Warn("lease renewal failed", slog.String("error", err.Error()))
	default:
		r.leases.mu.Lock()
		le.set = now
		r.leases.mu.Unlock()
	}
}
