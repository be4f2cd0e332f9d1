package notify

import (
	"sync"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/store"
)

// RequestFinished says a structured request finished, or may have.
type RequestFinished struct {
	RequestID uuid.UUID
	// State, when this process committed the finish (TellFinished), is the
	// request as that commit left it: the data, not a hint, so the waiter
	// need not read it. Nil when the finish was announced (chatd_request)
	// or may have been missed (Resync): read the request.
	State *store.RequestState
	// Resync: the listener reconnected, and a finish announced meanwhile
	// was lost.
	Resync bool
}

// RequestSub receives the finish of one structured request. Events
// coalesce, and a finish told with its State is kept over any other: a
// finished request never changes again.
type RequestSub struct {
	hub   *Hub
	id    uuid.UUID
	ch    chan struct{}
	mu    sync.Mutex
	last  RequestFinished
	valid bool
}

// C fires when at least one event arrived since the last Next.
func (s *RequestSub) C() <-chan struct{} { return s.ch }

// Next returns the event delivered (and whether there was one).
func (s *RequestSub) Next() (RequestFinished, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.last, s.valid
	s.valid = false
	return e, ok
}

// Close unsubscribes.
func (s *RequestSub) Close() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.requests[s.id], s)
	if len(h.requests[s.id]) == 0 {
		delete(h.requests, s.id)
	}
}

func (s *RequestSub) deliver(e RequestFinished) {
	s.mu.Lock()
	if !s.valid || s.last.State == nil {
		s.last = e
	}
	s.valid = true
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// SubscribeRequest delivers the finish of a structured request: told
// (TellFinished) or announced (chatd_request), and a resync after the
// listener reconnected.
func (h *Hub) SubscribeRequest(requestID uuid.UUID) *RequestSub {
	s := &RequestSub{hub: h, id: requestID, ch: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.requests[requestID] == nil {
		h.requests[requestID] = map[*RequestSub]struct{}{}
	}
	h.requests[requestID][s] = struct{}{}
	h.mu.Unlock()
	return s
}

// TellFinished delivers the finish of a request this process committed to
// the process's own long polls, with state, the request as the commit left
// it. It stands in for the chatd_request notification, which is not sent
// when this process admitted the request and nobody follows its chat. The
// hub is wired with store.Tell(h.ID(), h).
func (h *Hub) TellFinished(state store.RequestState) {
	id := state.Request.RequestID
	h.forget(id)
	for _, s := range h.requestSubs(id) {
		s.deliver(RequestFinished{RequestID: id, State: &state})
	}
	h.noteFinished()
}

// publishRequest delivers an announced finish.
func (h *Hub) publishRequest(id uuid.UUID) {
	h.forget(id)
	for _, s := range h.requestSubs(id) {
		s.deliver(RequestFinished{RequestID: id})
	}
}

// requestSubs returns the subscribers of a request, copied under the lock
// so that delivering to them does not hold it.
func (h *Hub) requestSubs(id uuid.UUID) []*RequestSub {
	h.mu.Lock()
	defer h.mu.Unlock()
	targets := make([]*RequestSub, 0, len(h.requests[id]))
	for s := range h.requests[id] {
		targets = append(targets, s)
	}
	return targets
}

// resyncRequests tells every request's subscribers that its finish may
// have been missed.
func (h *Hub) resyncRequests() {
	h.mu.Lock()
	var targets []*RequestSub
	for _, subs := range h.requests {
		for s := range subs {
			targets = append(targets, s)
		}
	}
	h.mu.Unlock()
	for _, s := range targets {
		s.deliver(RequestFinished{RequestID: s.id, Resync: true})
	}
}
