package notify

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Delta is one preview fragment of a step being generated. It is keyed by
// the history version and attempt it belongs to, and numbered from 1 within
// them. Deltas are never results: only committed messages are.
type Delta struct {
	HistoryVersion int64  `json:"history_version"`
	Attempt        int32  `json:"generation_attempt"`
	Seq            int64  `json:"seq"`
	Kind           string `json:"kind"` // text, reasoning, tool-input
	ToolCallID     string `json:"tool_call_id,omitempty"`
	ToolName       string `json:"tool_name,omitempty"`
	Text           string `json:"text,omitempty"`
	// RequestID marks the tool-input deltas of the finalizer call: the
	// structured request that governs the step. Streams parse them into
	// structured_output_partial previews.
	RequestID uuid.UUID `json:"request_id,omitzero"`
}

// DeltaBatch carries deltas of one chat, in order.
type DeltaBatch struct {
	ChatID uuid.UUID `json:"chat_id"`
	Deltas []Delta   `json:"deltas"`
}

// maxPayload stays under PostgreSQL's 8000-byte NOTIFY limit.
const maxPayload = 7000

// Relay publishes the deltas of steps in flight with pg_notify on
// chatd_delta, batched every FlushEvery, so that a stream served by any
// replica sees the preview of a turn run by another. Deltas of a chat no
// stream follows (Hub.Followed) are dropped: nobody would read them.
type Relay struct {
	pool       *pgxpool.Pool
	hub        *Hub
	log        *slog.Logger
	flushEvery time.Duration

	mu      sync.Mutex
	pending map[uuid.UUID][]Delta
	order   []uuid.UUID
	waiters []chan struct{} // Flush calls waiting for the next publish
	busy    bool            // a publish is under way
	kick    chan struct{}
	stopped chan struct{} // closed when Run returns
}

// NewRelay returns a relay that publishes for the streams hub knows of;
// Run publishes.
func NewRelay(pool *pgxpool.Pool, hub *Hub, logger *slog.Logger) *Relay {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Relay{pool: pool, hub: hub, log: logger, flushEvery: 25 * time.Millisecond,
		pending: map[uuid.UUID][]Delta{}, kick: make(chan struct{}, 1), stopped: make(chan struct{})}
}

// Delta queues a delta of chatID for publication, if a stream follows the
// chat.
func (r *Relay) Delta(chatID uuid.UUID, d Delta) {
	if !r.hub.Followed(chatID) {
		return
	}
	r.mu.Lock()
	if _, ok := r.pending[chatID]; !ok {
		r.order = append(r.order, chatID)
	}
	r.pending[chatID] = append(r.pending[chatID], d)
	r.mu.Unlock()
}

// flushWait bounds how long Flush waits for the publication.
const flushWait = time.Second

// Flush publishes the queued deltas now (a step ended) and returns once
// they are published (at most flushWait): the step commits after its last
// fragments were announced, so a stream sees them, and the last
// structured_output_partial, before the receipt (NOTIFYs are delivered in
// commit order).
func (r *Relay) Flush() {
	r.mu.Lock()
	if len(r.order) == 0 && !r.busy {
		r.mu.Unlock()
		return
	}
	// Publishes run one after the other: the next one ends after the one
	// under way, which may hold this step's deltas.
	done := make(chan struct{})
	r.waiters = append(r.waiters, done)
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
	t := time.NewTimer(flushWait)
	defer t.Stop()
	select {
	case <-done:
	case <-r.stopped:
	case <-t.C:
	}
}

// Run publishes until ctx ends.
func (r *Relay) Run(ctx context.Context) {
	defer close(r.stopped)
	t := time.NewTicker(r.flushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.publish(context.WithoutCancel(ctx))
			return
		case <-t.C:
		case <-r.kick:
		}
		r.publish(ctx)
	}
}

func (r *Relay) publish(ctx context.Context) {
	r.mu.Lock()
	pending, order, waiters := r.pending, r.order, r.waiters
	r.pending, r.order, r.waiters = map[uuid.UUID][]Delta{}, nil, nil
	r.busy = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.busy = false
		r.mu.Unlock()
		for _, w := range waiters {
			close(w)
		}
	}()
	for _, id := range order {
		for _, payload := range payloads(id, pending[id]) {
			// Not cancelled mid-flight (a cancelled query costs the
			// connection); ctx only says whether to keep publishing.
			if _, err := r.pool.Exec(context.WithoutCancel(ctx), "SELECT pg_notify('chatd_delta', $1)", payload); err != nil {
				// Previews are best effort; committed messages are not affected.
				r.log.Debug("publishing preview deltas failed", slog.String("error", err.Error()))
				return
			}
		}
	}
}

// payloads packs deltas into NOTIFY payloads under maxPayload, splitting the
// text of an oversized delta.
func payloads(chatID uuid.UUID, deltas []Delta) []string {
	var out []string
	batch := DeltaBatch{ChatID: chatID}
	size := 64
	emit := func() {
		if len(batch.Deltas) > 0 {
			b, _ := json.Marshal(batch)
			out = append(out, string(b))
		}
		batch.Deltas, size = nil, 64
	}
	for _, d := range deltas {
		for _, piece := range split(d) {
			b, _ := json.Marshal(piece)
			if size+len(b) > maxPayload {
				emit()
			}
			batch.Deltas = append(batch.Deltas, piece)
			size += len(b) + 1
		}
	}
	emit()
	return out
}

// split cuts a delta whose JSON would not fit one payload. Every piece keeps
// the delta's sequence number: streams treat the pieces as one fragment.
func split(d Delta) []Delta {
	const maxText = maxPayload / 8 // JSON escaping can grow text up to 6x
	if len(d.Text) <= maxText {
		return []Delta{d}
	}
	var out []Delta
	text := d.Text
	for len(text) > 0 {
		n := min(len(text), maxText)
		for n < len(text) && !utf8.RuneStart(text[n]) {
			n--
		}
		p := d
		p.Text = text[:n]
		out = append(out, p)
		text = text[n:]
	}
	return out
}

// DeltaSub receives preview deltas of one chat. A reader that falls behind
// loses batches and is told so (Lost), never blocks the hub.
type DeltaSub struct {
	hub  *Hub
	chat uuid.UUID
	ch   chan []Delta
	mu   sync.Mutex
	lost bool
}

// C delivers batches in order.
func (s *DeltaSub) C() <-chan []Delta { return s.ch }

// Lost reports (and clears) that batches were dropped since the last call.
func (s *DeltaSub) Lost() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lost
	s.lost = false
	return l
}

// Close unsubscribes.
func (s *DeltaSub) Close() {
	s.hub.mu.Lock()
	delete(s.hub.deltas[s.chat], s)
	if len(s.hub.deltas[s.chat]) == 0 {
		delete(s.hub.deltas, s.chat)
	}
	s.hub.mu.Unlock()
}

// SubscribeDeltas delivers the preview deltas of one chat. The chat's
// first subscriber on this process announces that it is followed
// (follow.go).
func (h *Hub) SubscribeDeltas(chatID uuid.UUID) *DeltaSub {
	s := &DeltaSub{hub: h, chat: chatID, ch: make(chan []Delta, 64)}
	h.mu.Lock()
	first := h.deltas[chatID] == nil
	if first {
		h.deltas[chatID] = map[*DeltaSub]struct{}{}
	}
	h.deltas[chatID][s] = struct{}{}
	h.mu.Unlock()
	if first {
		h.announce(chatID.String())
	}
	return s
}

func (h *Hub) publishDeltas(payload string) {
	var b DeltaBatch
	if err := json.Unmarshal([]byte(payload), &b); err != nil {
		return
	}
	h.mu.Lock()
	var targets []*DeltaSub
	for s := range h.deltas[b.ChatID] {
		targets = append(targets, s)
	}
	h.mu.Unlock()
	for _, s := range targets {
		select {
		case s.ch <- b.Deltas:
		default:
			s.mu.Lock()
			s.lost = true
			s.mu.Unlock()
		}
	}
}
