package notify

import (
	"time"

	"github.com/google/uuid"
)

// admittedFor bounds how long an admission is trusted: a finish that is
// neither told nor announced (a COMMIT whose answer was lost, so its
// process never learned it committed) must not leave a long poll waiting
// out its wait for ever after, nor the entry in memory. Past it a long poll
// reads, as it would without the record.
const admittedFor = 10 * time.Minute

// admission is a structured request this process admitted and has not
// seen finish: its owner, its chat, and when it was recorded.
type admission struct {
	owner, chat uuid.UUID
	at          time.Time
}

// Admitting records that this process is admitting request, owner's, in
// chat: until its finish is told (TellFinished) or announced
// (chatd_request), a long poll of it knows it is pending without reading
// it. Call it before the admission commits (no finish can come before),
// and failed when it did not commit. Nothing is recorded while the
// listener is down: a finish announced then would be missed.
func (h *Hub) Admitting(request, owner, chat uuid.UUID) (failed func()) {
	now := time.Now()
	h.mu.Lock()
	if h.listening {
		h.admitted[request] = admission{owner: owner, chat: chat, at: now}
		if len(h.admitted) > h.sweepAt { // now and then, drop the stale
			for id, a := range h.admitted {
				if now.Sub(a.at) > h.admittedFor {
					delete(h.admitted, id)
				}
			}
			h.sweepAt = max(1024, 2*len(h.admitted))
		}
	}
	h.mu.Unlock()
	return func() { h.forget(request) }
}

// Pending reports whether request is owner's and still pending as far as
// this process knows without a read, and its chat. Subscribe
// (SubscribeRequest) first: a finish after Pending is then delivered.
func (h *Hub) Pending(request, owner uuid.UUID) (chat uuid.UUID, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.admitted[request]
	if !ok || a.owner != owner || time.Since(a.at) > h.admittedFor {
		return uuid.Nil, false
	}
	return a.chat, true
}

// forget drops request: it finished (before its subscribers are told).
func (h *Hub) forget(request uuid.UUID) {
	h.mu.Lock()
	delete(h.admitted, request)
	h.mu.Unlock()
}

// setListening records whether the listener is up; going down, what was
// recorded is dropped (announcements may be missed until the reconnect's
// resync).
func (h *Hub) setListening(up bool) {
	h.mu.Lock()
	h.listening = up
	if !up {
		clear(h.admitted)
	}
	h.mu.Unlock()
}

// isListening says whether the listener is up.
func (h *Hub) isListening() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.listening
}
