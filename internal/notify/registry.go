package notify

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/store"
)

// The follower registry (table chat_followers). A change of a chat is
// announced on chatd_chat only to whoever may need it: its worker, or a
// follower registered here before its first read (chatd_followed in
// sql/triggers/005_followers.sql explains why that is exact). Every
// listening replica pays a transaction per notifying commit, so a turn that
// nobody follows is announced once, at its end, not also at its admission.
//
// A process registers a key (owner, chat) once however many of its streams
// follow it, refreshes the row every registryRefresh while any does, and
// forgets the key when the last one stops; the row is swept registryTTL
// after its last refresh. Until then it costs announcements, never a missed
// one.
const (
	registryRefresh = 20 * time.Second
	registryTTL     = 6 * registryRefresh
)

// followKey is what a process follows: one chat of owner, or with chat
// uuid.Nil every chat of owner (a watch).
type followKey = store.FollowKey

type following struct {
	n     int           // followers in this process
	ready chan struct{} // closed when the registration committed or failed
	err   error
}

// Follow registers this process as a follower of owner's chat (of all of
// owner's chats when chat is uuid.Nil) and returns once that is committed:
// a read made after it misses no announced change. A caller subscribes,
// follows, then reads. unfollow ends the follow.
func (h *Hub) Follow(ctx context.Context, owner, chat uuid.UUID) (unfollow func(), err error) {
	k := followKey{Owner: owner, Chat: chat}
	h.mu.Lock()
	f := h.following[k]
	first := f == nil
	if first {
		f = &following{ready: make(chan struct{})}
		h.following[k] = f
	}
	f.n++
	h.mu.Unlock()
	if first {
		f.err = h.register(ctx, k)
		if f.err != nil { // the next follower tries again
			h.mu.Lock()
			if h.following[k] == f {
				delete(h.following, k)
			}
			h.mu.Unlock()
		}
		close(f.ready)
	}
	select {
	case <-f.ready:
	case <-ctx.Done():
		h.unfollow(k, f)
		return nil, ctx.Err()
	}
	if f.err != nil {
		h.unfollow(k, f)
		return nil, f.err
	}
	return sync.OnceFunc(func() { h.unfollow(k, f) }), nil
}

func (h *Hub) unfollow(k followKey, f *following) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if f.n--; f.n == 0 && h.following[k] == f {
		delete(h.following, k)
	}
}

// register registers k under the owner's follow lock, taken exclusively
// (ChatFollowerRegister): it waits for the writers that checked for
// followers without seeing this one to commit.
func (h *Hub) register(ctx context.Context, k followKey) error {
	return h.store.FollowerRegister(ctx, h.id, k)
}

// runRegistry refreshes this process's rows and sweeps stale ones until ctx
// ends, then deletes this process's rows.
func (h *Hub) runRegistry(ctx context.Context) {
	t := time.NewTicker(registryRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := h.store.FollowerForget(dctx, h.id); err != nil {
				h.logger.Debug("unregistering followers failed", slog.String("error", err.Error()))
			}
			return
		case <-t.C:
			if err := h.refreshRegistry(context.WithoutCancel(ctx)); err != nil {
				h.logger.Warn("refreshing followers failed", slog.String("error", err.Error()))
			}
		}
	}
}

// refreshRegistry keeps the rows of what this process follows and sweeps
// the rows nobody refreshed for registryTTL. A row of this process's that
// was swept all the same (the refreshes failed that long) is registered
// again, and its followers re-read: announcements may have been skipped.
func (h *Hub) refreshRegistry(ctx context.Context) error {
	h.mu.Lock()
	var keys []followKey
	for k, f := range h.following {
		select {
		case <-f.ready:
			if f.err == nil {
				keys = append(keys, k)
			}
		default: // being registered
		}
	}
	h.mu.Unlock()
	if len(keys) > 0 {
		kept, err := h.store.FollowerRefresh(ctx, h.id, keys)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if !kept[k] {
				if err := h.register(ctx, k); err != nil {
					return err
				}
				h.resyncKey(k)
			}
		}
	}
	return h.store.FollowerSweep(ctx, registryTTL)
}

// resyncKey tells the subscribers of what k follows to re-read.
func (h *Hub) resyncKey(k followKey) {
	kind, key := subChat, k.Chat
	if k.Chat == uuid.Nil {
		kind, key = subOwner, k.Owner
	}
	for _, s := range h.subsOf(kind, key) {
		s.deliver(Event{ChatID: s.key, Snapshot: SnapshotResync})
	}
}
