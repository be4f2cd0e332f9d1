// Package notify fans PostgreSQL notifications out inside one process: one
// connection LISTENs on the channels the triggers in sql/triggers/040_notify.sql
// write to, and subscribers (streams, long polls, workers) wait on Go
// channels. A notification is a hint to re-read, never the data itself (a
// finish this process committed is told with its data: TellFinished,
// RequestFinished); after
// a reconnect every subscriber is told to re-read, since notifications sent
// while disconnected are lost.
package notify

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/prom"
	"github.com/chatd/chatd/internal/store"
)

// Event says a chat changed. Snapshot is the chat's new snapshot_version,
// SnapshotDeleted when the chat was deleted, and SnapshotResync for
// "re-read: notifications may have been lost".
type Event struct {
	ChatID   uuid.UUID
	Snapshot int64
	OwnerID  uuid.UUID
}

// Sub receives events for one chat, or for all chats of one owner (a
// structured request's finish has its own: RequestSub). Events coalesce: a
// slow reader sees the latest, never a backlog.
type Sub struct {
	hub   *Hub
	key   uuid.UUID
	kind  subKind
	ch    chan struct{}
	mu    sync.Mutex
	last  Event
	valid bool
	watch func() // Watch's
}

// C fires when at least one event arrived since the last Next.
func (s *Sub) C() <-chan struct{} { return s.ch }

// Next returns the latest event delivered (and whether there was one).
func (s *Sub) Next() (Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.last, s.valid
	s.valid = false
	return e, ok
}

func (s *Sub) deliver(e Event) {
	s.mu.Lock()
	// Keep a resync request (-1) over an ordinary event.
	if !s.valid || s.last.Snapshot != -1 {
		s.last = e
	}
	s.valid = true
	w := s.watch
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
	if w != nil {
		w()
	}
}

// Watch calls f when an event arrives (and at once when one is waiting)
// until unwatch is called; f may still run once as unwatch returns. f runs
// on the delivering goroutine and must not block. It spares a goroutine
// waiting on C for events that rarely come.
func (s *Sub) Watch(f func()) (unwatch func()) {
	s.mu.Lock()
	s.watch = f
	waiting := s.valid
	s.mu.Unlock()
	if waiting {
		f()
	}
	return func() {
		s.mu.Lock()
		s.watch = nil
		s.mu.Unlock()
	}
}

// Close unsubscribes.
func (s *Sub) Close() { s.hub.unsubscribe(s) }

// subKind says what a Sub's key is.
type subKind int

const (
	subChat  subKind = iota // a chat id: chatd_chat
	subOwner                // a user id: chatd_chat of their chats
)

// Hub owns the listening connection.
type Hub struct {
	pool      *pgxpool.Pool
	store     *store.Store    // the follower registry's statements (registry.go)
	listenCfg *pgx.ConnConfig // the listener's connection; nil: the pool's
	logger    *slog.Logger

	mu       sync.Mutex
	subs     [2]map[uuid.UUID]map[*Sub]struct{}     // by subKind, then key
	requests map[uuid.UUID]map[*RequestSub]struct{} // by request id (request.go)
	deltas   map[uuid.UUID]map[*DeltaSub]struct{}
	work     chan uuid.UUID // wake-ups for workers, one receive each (Work)
	finish   chan struct{}  // some request finished (Finished)
	ready    chan struct{}  // closed once the first LISTEN is in place

	id        uuid.UUID                // this process's rows in chat_followers (registry.go)
	following map[followKey]*following // what this process's streams and watches follow

	listening   bool                    // the listener is up (admitted.go)
	admitted    map[uuid.UUID]admission // requests admitted here, not yet seen finished
	admittedFor time.Duration           // how long an admission is trusted
	sweepAt     int                     // admitted's size that triggers a sweep

	followed     map[uuid.UUID]time.Time // chats other replicas' streams follow (follow.go)
	toAnnounce   []string
	announceKick chan struct{}

	relay *Relay // this process's, answering catch-ups (catchup.go)

	m struct { // Instrument's; nil without it
		reconnects *prometheus.CounterVec
		outage     *prometheus.HistogramVec
	}

	// The listener goroutine's own: pieces of split fragments and
	// catch-ups being received, by chat.
	pieces     map[uuid.UUID]Delta
	assembling map[uuid.UUID]*assembly
}

// New returns a hub; call Run to start listening.
func New(pool *pgxpool.Pool, logger *slog.Logger) *Hub {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &Hub{
		pool: pool, store: store.New(pool), logger: logger,
		deltas: map[uuid.UUID]map[*DeltaSub]struct{}{}, requests: map[uuid.UUID]map[*RequestSub]struct{}{},
		work: make(chan uuid.UUID, workBacklog), ready: make(chan struct{}), finish: make(chan struct{}, 1),
		followed: map[uuid.UUID]time.Time{}, announceKick: make(chan struct{}, 1),
		id: uuid.New(), following: map[followKey]*following{}, admitted: map[uuid.UUID]admission{},
		admittedFor: admittedFor, sweepAt: 1024,
	}
	for k := range h.subs {
		h.subs[k] = map[uuid.UUID]map[*Sub]struct{}{}
	}
	return h
}

// ListenOn makes the hub listen on connections made with cfg instead of
// the pool's. Behind a transaction pooler the pool's connections are not
// sessions, and a LISTEN must be made on one (--direct-database-url). Call
// it before Run.
func (h *Hub) ListenOn(cfg *pgx.ConnConfig) { h.listenCfg = cfg }

// Ready is closed once the hub listens (tests wait on it before committing).
func (h *Hub) Ready() <-chan struct{} { return h.ready }

// Subscribe delivers events for one chat. A change is announced only to the
// chat's worker and to registered followers: a stream also calls Follow.
func (h *Hub) Subscribe(chatID uuid.UUID) *Sub { return h.subscribe(chatID, subChat) }

// SubscribeOwner delivers events for every chat of one owner (who must be
// followed: Follow with uuid.Nil).
func (h *Hub) SubscribeOwner(owner uuid.UUID) *Sub { return h.subscribe(owner, subOwner) }

func (h *Hub) subscribe(key uuid.UUID, kind subKind) *Sub {
	s := &Sub{hub: h, key: key, kind: kind, ch: make(chan struct{}, 1)}
	h.mu.Lock()
	m := h.subs[kind]
	if m[key] == nil {
		m[key] = map[*Sub]struct{}{}
	}
	m[key][s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *Hub) unsubscribe(s *Sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.subs[s.kind]
	delete(m[s.key], s)
	if len(m[s.key]) == 0 {
		delete(m, s.key)
	}
}

// workBacklog bounds the wake-ups waiting for a worker. Past it they are
// dropped: the workers' idle poll finds those chats.
const workBacklog = 1024

// Work delivers wake-ups for workers: the id of a chat that became
// runnable without an owner, or uuid.Nil for "look for work" (after the
// listener reconnected, when wake-ups may have been lost). One receive
// wakes one worker, so a wake-up costs one claim, not one per idle worker.
func (h *Hub) Work() <-chan uuid.UUID { return h.work }

// Finished fires (coalesced) when this process finished structured
// requests (TellFinished), and after the listener reconnected: the webhook
// deliverer's wake-up, since a request's finish writes its outbox rows.
// Finishes committed by other processes wake their own deliverers.
func (h *Hub) Finished() <-chan struct{} { return h.finish }

func (h *Hub) noteFinished() {
	select {
	case h.finish <- struct{}{}:
	default:
	}
}

// wake queues a wake-up for one worker; it is dropped when the backlog
// is full.
func (h *Hub) wake(chatID uuid.UUID) {
	select {
	case h.work <- chatID:
	default:
	}
}

// subsOf returns the subscribers of kind and key, copied under the lock
// so that delivering to them does not hold it.
func (h *Hub) subsOf(kind subKind, key uuid.UUID) []*Sub {
	h.mu.Lock()
	defer h.mu.Unlock()
	targets := make([]*Sub, 0, len(h.subs[kind][key]))
	for s := range h.subs[kind][key] {
		targets = append(targets, s)
	}
	return targets
}

func (h *Hub) publish(e Event) {
	for _, s := range append(h.subsOf(subChat, e.ChatID), h.subsOf(subOwner, e.OwnerID)...) {
		s.deliver(e)
	}
}

// ID is this process's id: its rows in chat_followers, and the admitted_by
// and finished_by of the structured requests it admits and finishes
// (store.Tell).
func (h *Hub) ID() uuid.UUID { return h.id }

// TellChanged delivers, in this process, a change of a chat that a worker
// of this process committed: what chatd_chat would deliver (a worker's own
// commit is announced only to the chat's followers).
func (h *Hub) TellChanged(chat, owner uuid.UUID, snapshot int64) {
	if r := h.relayOf(); r != nil {
		r.committed(chat) // the step's preview is in the commit now
	}
	h.publish(Event{ChatID: chat, Snapshot: snapshot, OwnerID: owner})
}

// resyncAll tells every subscriber and worker to re-read.
func (h *Hub) resyncAll() {
	h.mu.Lock()
	var targets []*Sub
	for _, byKey := range h.subs {
		for _, subs := range byKey {
			for s := range subs {
				targets = append(targets, s)
			}
		}
	}
	h.mu.Unlock()
	for _, s := range targets {
		s.deliver(Event{ChatID: s.key, Snapshot: SnapshotResync})
	}
	h.resyncRequests()
	h.wake(uuid.Nil)
	h.noteFinished()
}

// Run listens until ctx ends, reconnecting with backoff.
func (h *Hub) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { h.runAnnouncer(ctx) })
	wg.Go(func() { h.runRegistry(ctx) })
	backoff := 100 * time.Millisecond
	first := true
	var down time.Time // when the listener lost its connection
	tries := 0
	for ctx.Err() == nil {
		err := h.listen(ctx, func() {
			h.setListening(true)
			if first {
				close(h.ready)
				first = false
			} else {
				h.resyncAll()
				h.reconnected(time.Since(down), tries)
			}
			h.announce("?") // others' announcements may have been missed
			backoff, tries = 100*time.Millisecond, 0
		})
		if h.setListening(false); ctx.Err() != nil {
			return
		}
		if tries++; tries == 1 {
			down = time.Now()
		}
		h.logger.Warn("notification listener disconnected", slog.String("error", err.Error()), slog.Duration("retry_in", backoff))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (h *Hub) listen(ctx context.Context, connected func()) error {
	cfg := h.listenCfg
	if cfg == nil {
		cfg = h.pool.Config().ConnConfig
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	h.pieces, h.assembling = map[uuid.UUID]Delta{}, map[uuid.UUID]*assembly{} // what was being received is lost
	for _, ch := range []string{"chatd_chat", "chatd_work", "chatd_request", "chatd_delta", "chatd_catchup", "chatd_follow"} {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			return err
		}
	}
	connected()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch n.Channel {
		case "chatd_work":
			id, _ := uuid.Parse(n.Payload) // an empty payload (older triggers): look for work
			h.wake(id)
		case "chatd_chat":
			if e, ok := parseChatPayload(n.Payload); ok {
				h.publish(e)
			}
		case "chatd_request":
			if id, err := uuid.Parse(n.Payload); err == nil {
				h.publishRequest(id)
			}
		case "chatd_delta":
			h.publishDeltas(n.Payload)
		case "chatd_catchup":
			h.publishCatchUp(n.Payload)
		case "chatd_follow":
			h.noteFollowed(n.Payload)
		}
	}
}

// Instrument registers the listener's metrics on reg: its reconnections
// and how long each outage lasted, the time without a primary as this
// process saw it.
func (h *Hub) Instrument(reg *prometheus.Registry) {
	h.m.reconnects = prom.Counter(reg, "chatd_listener_reconnects_total",
		"Times the notification listener connected again after losing its connection (the database restarted or failed over).")
	h.m.outage = prom.Histogram(reg, "chatd_listener_outage_seconds",
		"How long the notification listener was without a connection, from losing it to listening again, per outage.",
		[]float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300})
	prom.GaugeFunc(reg, "chatd_listener_up", "1 while the notification listener listens, else 0.", func() float64 {
		if h.isListening() {
			return 1
		}
		return 0
	})
}

// reconnected notes a reconnection after an outage of d and tries
// attempts; every subscriber was told to re-read.
func (h *Hub) reconnected(d time.Duration, tries int) {
	h.logger.Info("notification listener reconnected", slog.Duration("down_for", d), slog.Int("attempts", tries))
	if h.m.reconnects != nil {
		h.m.reconnects.WithLabelValues().Inc()
		h.m.outage.WithLabelValues().Observe(d.Seconds())
	}
}
