// Package notify fans PostgreSQL notifications out inside one process: one
// connection LISTENs on the channels the triggers in sql/triggers/040_notify.sql
// write to, and subscribers (streams, long polls, workers) wait on Go
// channels. A notification is a hint to re-read, never the data itself; after
// a reconnect every subscriber is told to re-read, since notifications sent
// while disconnected are lost.
package notify

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Event says a chat changed. Snapshot is the chat's new snapshot_version,
// 0 when the chat was deleted, and -1 for "re-read: notifications may have
// been lost".
type Event struct {
	ChatID   uuid.UUID
	Snapshot int64
	OwnerID  uuid.UUID
}

// Sub receives events for one chat, or for all chats of one owner. Events
// coalesce: a slow reader sees the latest, never a backlog.
type Sub struct {
	hub   *Hub
	key   uuid.UUID
	owner bool
	ch    chan struct{}
	mu    sync.Mutex
	last  Event
	valid bool
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
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// Close unsubscribes.
func (s *Sub) Close() { s.hub.unsubscribe(s) }

// Hub owns the listening connection.
type Hub struct {
	pool   *pgxpool.Pool
	logger *slog.Logger

	mu     sync.Mutex
	chats  map[uuid.UUID]map[*Sub]struct{}
	owners map[uuid.UUID]map[*Sub]struct{}
	deltas map[uuid.UUID]map[*DeltaSub]struct{}
	work   chan struct{} // closed and replaced on every work notification
	ready  chan struct{} // closed once the first LISTEN is in place
}

// New returns a hub; call Run to start listening.
func New(pool *pgxpool.Pool, logger *slog.Logger) *Hub {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Hub{
		pool: pool, logger: logger,
		chats: map[uuid.UUID]map[*Sub]struct{}{}, owners: map[uuid.UUID]map[*Sub]struct{}{},
		deltas: map[uuid.UUID]map[*DeltaSub]struct{}{},
		work:   make(chan struct{}), ready: make(chan struct{}),
	}
}

// Ready is closed once the hub listens (tests wait on it before committing).
func (h *Hub) Ready() <-chan struct{} { return h.ready }

// Subscribe delivers events for one chat.
func (h *Hub) Subscribe(chatID uuid.UUID) *Sub { return h.subscribe(chatID, false) }

// SubscribeOwner delivers events for every chat of one owner.
func (h *Hub) SubscribeOwner(owner uuid.UUID) *Sub { return h.subscribe(owner, true) }

func (h *Hub) subscribe(key uuid.UUID, owner bool) *Sub {
	s := &Sub{hub: h, key: key, owner: owner, ch: make(chan struct{}, 1)}
	h.mu.Lock()
	m := h.chats
	if owner {
		m = h.owners
	}
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
	m := h.chats
	if s.owner {
		m = h.owners
	}
	delete(m[s.key], s)
	if len(m[s.key]) == 0 {
		delete(m, s.key)
	}
}

// WorkSignal returns a channel closed at the next "runnable chat" wake-up.
func (h *Hub) WorkSignal() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.work
}

// Subscribers counts chat and owner subscriptions (for metrics).
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.chats {
		n += len(m)
	}
	for _, m := range h.owners {
		n += len(m)
	}
	return n
}

func (h *Hub) wakeWorkers() {
	h.mu.Lock()
	close(h.work)
	h.work = make(chan struct{})
	h.mu.Unlock()
}

func (h *Hub) publish(e Event) {
	h.mu.Lock()
	var targets []*Sub
	for s := range h.chats[e.ChatID] {
		targets = append(targets, s)
	}
	for s := range h.owners[e.OwnerID] {
		targets = append(targets, s)
	}
	h.mu.Unlock()
	for _, s := range targets {
		s.deliver(e)
	}
}

// resyncAll tells every subscriber and worker to re-read.
func (h *Hub) resyncAll() {
	h.mu.Lock()
	var targets []*Sub
	for _, m := range []map[uuid.UUID]map[*Sub]struct{}{h.chats, h.owners} {
		for _, subs := range m {
			for s := range subs {
				targets = append(targets, s)
			}
		}
	}
	h.mu.Unlock()
	for _, s := range targets {
		s.deliver(Event{ChatID: s.key, Snapshot: -1})
	}
	h.wakeWorkers()
}

// Run listens until ctx ends, reconnecting with backoff.
func (h *Hub) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		err := h.listen(ctx, func() {
			if first {
				close(h.ready)
				first = false
			} else {
				h.resyncAll()
			}
			backoff = 100 * time.Millisecond
		})
		if ctx.Err() != nil {
			return
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
	conn, err := pgx.ConnectConfig(ctx, h.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, ch := range []string{"chatd_chat", "chatd_work", "chatd_delta"} {
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
			h.wakeWorkers()
		case "chatd_chat":
			if e, ok := parse(n.Payload); ok {
				h.publish(e)
			}
		case "chatd_delta":
			h.publishDeltas(n.Payload)
		}
	}
}

func parse(payload string) (Event, bool) {
	f := strings.Fields(payload)
	if len(f) != 3 {
		return Event{}, false
	}
	id, err1 := uuid.Parse(f[0])
	snap, err2 := strconv.ParseInt(f[1], 10, 64)
	owner, err3 := uuid.Parse(f[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return Event{}, false
	}
	return Event{ChatID: id, Snapshot: snap, OwnerID: owner}, true
}
