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
	// From, on a catch-up's coalesced fragments of one part, is the first
	// fragment they cover (Seq is the last); Lens are their lengths in
	// bytes of Text, in order.
	From int64   `json:"from_seq,omitempty"`
	Lens []int32 `json:"lens,omitempty"`
	// Off and More mark a piece of a fragment too long for one payload:
	// its offset in the fragment's text, and that more pieces follow. The
	// hub joins the pieces: subscribers get whole fragments.
	Off  int  `json:"off,omitempty"`
	More bool `json:"more,omitempty"`
}

// First is the first fragment d covers.
func (d *Delta) First() int64 {
	if d.From > 0 {
		return d.From
	}
	return d.Seq
}

// lens are the lengths of the fragments d covers.
func (d *Delta) lens() []int32 {
	if d.Lens != nil {
		return d.Lens
	}
	return []int32{int32(len(d.Text))}
}

// After returns the fragments of d after fragment seq (d.First() <= seq <
// d.Seq): the part of a coalesced catch-up a stream has not sent.
func (d Delta) After(seq int64) Delta {
	n := int(seq - d.First() + 1)
	cut := 0
	for _, l := range d.Lens[:n] {
		cut += int(l)
	}
	d.Text, d.Lens, d.From = d.Text[cut:], d.Lens[n:], seq+1
	if d.From == d.Seq {
		d.From, d.Lens = 0, nil
	}
	return d
}

// Upto returns the fragments of d up to fragment seq (d.First() <= seq <
// d.Seq).
func (d Delta) Upto(seq int64) Delta {
	n := int(seq - d.First() + 1)
	cut := 0
	for _, l := range d.Lens[:n] {
		cut += int(l)
	}
	d.Text, d.Lens, d.Seq = d.Text[:cut], d.Lens[:n], seq
	if d.From == d.Seq {
		d.From, d.Lens = 0, nil
	}
	return d
}

// DeltaBatch carries deltas of one chat, in order: a publication of live
// fragments on chatd_delta, or one payload of a catch-up on chatd_catchup.
type DeltaBatch struct {
	ChatID  uuid.UUID      `json:"chat_id"`
	Deltas  []Delta        `json:"deltas"`
	CatchUp *catchUpHeader `json:"catch_up,omitempty"`
}

// maxPayload stays under PostgreSQL's 8000-byte NOTIFY limit.
const maxPayload = 7000

// maxText is the most text one delta of a payload carries: JSON escaping
// can grow text up to 6x.
const maxText = maxPayload / 8

// Relay publishes the deltas of steps in flight with pg_notify on
// chatd_delta, batched every FlushEvery, so that a stream served by any
// replica sees the preview of a turn run by another. Deltas of a chat no
// stream follows (Hub.Followed) are not published: nobody would read
// them. Every step's deltas are kept (preview.go) for the streams that
// join later: the relay answers their catch-up requests (catchup.go).
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
	steps   map[uuid.UUID]*stepPreview
	asked   map[uuid.UUID]struct{} // catch-ups to publish
	swept   time.Time
}

// NewRelay returns a relay that publishes for the streams hub knows of,
// and answers its catch-up requests; Run publishes.
func NewRelay(pool *pgxpool.Pool, hub *Hub, logger *slog.Logger) *Relay {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Relay{pool: pool, hub: hub, log: logger, flushEvery: 25 * time.Millisecond,
		pending: map[uuid.UUID][]Delta{}, kick: make(chan struct{}, 1), stopped: make(chan struct{}),
		steps: map[uuid.UUID]*stepPreview{}, asked: map[uuid.UUID]struct{}{}, swept: time.Now()}
	hub.setRelay(r)
	return r
}

// Delta keeps a delta of chatID's step, and queues it for publication if
// a stream follows the chat. Whether it does is read under the relay's
// lock, after which a catch-up's snapshot is taken: a delta is either in
// the snapshot or published after it.
func (r *Relay) Delta(chatID uuid.UUID, d Delta) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.steps[chatID]
	if p == nil {
		p = &stepPreview{}
		r.steps[chatID] = p
	}
	p.add(&d, time.Now())
	if !r.hub.Followed(chatID) {
		return
	}
	if _, ok := r.pending[chatID]; !ok {
		r.order = append(r.order, chatID)
	}
	r.pending[chatID] = append(r.pending[chatID], d)
}

// committed drops chat's step buffer: the worker committed the chat.
func (r *Relay) committed(chat uuid.UUID) {
	r.mu.Lock()
	delete(r.steps, chat)
	r.mu.Unlock()
}

// catchUp returns the preview so far of chat's step, if this relay has
// one.
func (r *Relay) catchUp(chat uuid.UUID) *CatchUp {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.steps[chat]; p != nil {
		return p.catchUp(chat)
	}
	return nil
}

// ask queues the publication of chat's catch-up, if this relay has its
// step. The snapshot is taken when it is published.
func (r *Relay) ask(chat uuid.UUID) {
	r.mu.Lock()
	_, ok := r.steps[chat]
	if ok {
		r.asked[chat] = struct{}{}
	}
	r.mu.Unlock()
	if ok {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
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
	var catchUps []*CatchUp
	for chat := range r.asked {
		if p := r.steps[chat]; p != nil {
			catchUps = append(catchUps, p.catchUp(chat))
		}
	}
	clear(r.asked)
	r.sweep()
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
	// Not cancelled mid-flight (a cancelled query costs the connection);
	// ctx only says whether to keep publishing.
	ctx = context.WithoutCancel(ctx)
	// A catch-up goes out before the deltas that followed its snapshot:
	// a stream that gets it gets every later one.
	for _, cu := range catchUps {
		if _, err := r.pool.Exec(ctx, "SELECT pg_notify('chatd_catchup', p) FROM unnest($1::text[]) AS p", cu.payloads()); err != nil {
			r.log.Debug("publishing a preview catch-up failed", slog.String("error", err.Error()))
			return
		}
	}
	for _, id := range order {
		for _, payload := range payloads(id, pending[id]) {
			if _, err := r.pool.Exec(ctx, "SELECT pg_notify('chatd_delta', $1)", payload); err != nil {
				// Previews are best effort; committed messages are not affected.
				r.log.Debug("publishing preview deltas failed", slog.String("error", err.Error()))
				return
			}
		}
	}
}

// sweep drops the buffers of steps idle for previewIdle (checked once a
// minute); the caller holds r.mu.
func (r *Relay) sweep() {
	now := time.Now()
	if now.Sub(r.swept) < time.Minute {
		return
	}
	r.swept = now
	for chat, p := range r.steps {
		if now.Sub(p.touched) > previewIdle {
			delete(r.steps, chat)
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
// the delta's sequence number, its offset in the delta's text (Off) and
// whether more follow (More): the hub joins them again.
func split(d Delta) []Delta {
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
		p.Text, p.Off, p.More = text[:n], d.Off+len(d.Text)-len(text), n < len(text)
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
	ch   chan Deltas
	mu   sync.Mutex
	lost bool
}

// Deltas is what a DeltaSub receives: whole live fragments in order, or a
// catch-up (catchup.go).
type Deltas struct {
	Live    []Delta
	CatchUp *CatchUp
}

// C delivers batches in order.
func (s *DeltaSub) C() <-chan Deltas { return s.ch }

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
	s := &DeltaSub{hub: h, chat: chatID, ch: make(chan Deltas, 64)}
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

// deltaSubs returns chat's delta subscribers.
func (h *Hub) deltaSubs(chat uuid.UUID) []*DeltaSub {
	h.mu.Lock()
	defer h.mu.Unlock()
	var targets []*DeltaSub
	for s := range h.deltas[chat] {
		targets = append(targets, s)
	}
	return targets
}

func deliverDeltas(targets []*DeltaSub, ds Deltas) {
	for _, s := range targets {
		select {
		case s.ch <- ds:
		default:
			s.mu.Lock()
			s.lost = true
			s.mu.Unlock()
		}
	}
}

// publishDeltas hands a chatd_delta payload to the chat's subscribers
// (listener goroutine).
func (h *Hub) publishDeltas(payload string) {
	var b DeltaBatch
	if err := json.Unmarshal([]byte(payload), &b); err != nil {
		return
	}
	targets := h.deltaSubs(b.ChatID)
	if len(targets) == 0 {
		delete(h.pieces, b.ChatID)
		return
	}
	if live := h.join(b.ChatID, b.Deltas); len(live) > 0 {
		deliverDeltas(targets, Deltas{Live: live})
	}
}

// join returns the whole fragments of ds, joining the pieces of a split
// one (split). A piece whose predecessor was not seen is dropped: the
// subscriber sees a gap in the numbering, and catches up. Listener
// goroutine only.
func (h *Hub) join(chat uuid.UUID, ds []Delta) []Delta {
	out := ds[:0]
	for _, d := range ds {
		if d.Off == 0 && !d.More {
			out = append(out, d)
			continue
		}
		p, ok := h.pieces[chat]
		switch {
		case d.Off == 0:
			h.pieces[chat] = d
			continue
		case !ok || p.Seq != d.Seq || p.HistoryVersion != d.HistoryVersion || p.Attempt != d.Attempt || len(p.Text) != d.Off:
			delete(h.pieces, chat)
			continue
		}
		p.Text += d.Text
		if d.More {
			h.pieces[chat] = p
			continue
		}
		delete(h.pieces, chat)
		p.Off, p.More = 0, false
		out = append(out, p)
	}
	return out
}
