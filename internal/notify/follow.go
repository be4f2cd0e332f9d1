package notify

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Followers. A worker publishes a step's preview deltas (a pg_notify each
// flush, a writing commit) only while some stream, on any replica, follows
// the chat. Each hub announces the chats its streams follow on chatd_follow:
// a chat's first stream at once, then all of them every followEvery; every
// hub remembers the announcements for followTTL. A hub that (re)connects
// asks the others to announce again ("?"), since announcements sent while
// it was not listening are lost. A stream that joins in the middle of a
// step gets the fragments sent before (and while its announcement
// travelled) from a catch-up (catchup.go), which announces the chat too.
const (
	followEvery = 20 * time.Second
	followTTL   = 3 * followEvery
)

// followPayload packs chat ids into NOTIFY payloads under maxPayload.
func followPayloads(ids []uuid.UUID) []string {
	var out []string
	var b strings.Builder
	for _, id := range ids {
		if b.Len()+37 > maxPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(id.String())
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// Followed reports whether a stream follows the chat: one of this
// process's, or one another replica announced within followTTL.
func (h *Hub) Followed(chatID uuid.UUID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.deltas[chatID]) > 0 {
		return true
	}
	t, ok := h.followed[chatID]
	return ok && time.Since(t) < followTTL
}

// noteFollowed records an announcement (or, for "?", a request to
// announce). A catch-up request (catchup.go) announces its chats too, and
// is answered by this process's relay for the steps it has.
func (h *Hub) noteFollowed(payload string) {
	if payload == "?" {
		h.announceAll()
		return
	}
	now := time.Now()
	h.mu.Lock()
	for _, f := range strings.Fields(payload) {
		if id, err := uuid.Parse(f); err == nil {
			h.followed[id] = now
		}
	}
	if len(h.followed) > 4*maxPayload { // forget the stale ones now and then
		for id, t := range h.followed {
			if now.Sub(t) >= followTTL {
				delete(h.followed, id)
			}
		}
	}
	r := h.relay
	h.mu.Unlock()
	if r != nil {
		// After the chats are marked followed: a fragment is either in the
		// answer's snapshot or published after it (Relay.Delta).
		for _, id := range askedFor(payload) {
			r.ask(id)
		}
	}
}

// announce queues chat ids (or "?") for the announcer.
func (h *Hub) announce(what string) {
	h.mu.Lock()
	h.toAnnounce = append(h.toAnnounce, what)
	h.mu.Unlock()
	select {
	case h.announceKick <- struct{}{}:
	default:
	}
}

// announceAll queues every chat this process's streams follow.
func (h *Hub) announceAll() {
	h.mu.Lock()
	for id := range h.deltas {
		h.toAnnounce = append(h.toAnnounce, id.String())
	}
	h.mu.Unlock()
	select {
	case h.announceKick <- struct{}{}:
	default:
	}
}

// runAnnouncer sends queued announcements, and all of them every
// followEvery, until ctx ends. Announcements are best effort: a lost one
// costs a stream some preview fragments, never a committed message.
func (h *Hub) runAnnouncer(ctx context.Context) {
	t := time.NewTicker(followEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.announceAll()
		case <-h.announceKick:
		}
		h.mu.Lock()
		queued := h.toAnnounce
		h.toAnnounce = nil
		h.mu.Unlock()
		var ids, asks []uuid.UUID
		for _, q := range queued {
			switch {
			case q == "?":
				h.sendFollow(ctx, "?")
			case strings.HasPrefix(q, catchUpPrefix):
				for _, id := range askedFor(q) {
					if !slices.Contains(asks, id) { // streams that join together share an answer
						asks = append(asks, id)
					}
				}
			default:
				if id, err := uuid.Parse(q); err == nil {
					ids = append(ids, id)
				}
			}
		}
		for _, p := range followPayloads(asks) {
			h.sendFollow(ctx, catchUpPrefix+p)
		}
		for _, p := range followPayloads(ids) {
			h.sendFollow(ctx, p)
		}
	}
}

func (h *Hub) sendFollow(ctx context.Context, payload string) {
	// Not cancelled mid-flight: only ctx's end (shutdown) stops the loop.
	if _, err := h.pool.Exec(context.WithoutCancel(ctx), "SELECT pg_notify('chatd_follow', $1)", payload); err != nil {
		h.logger.Debug("announcing followed chats failed", slog.String("error", err.Error()))
	}
}
