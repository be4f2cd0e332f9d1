// Package handoff holds a process's running slots: how many chats its
// runner runs at once, and the hand-off by which the process's API gives a
// chat it admits straight to the runner.
//
// A slot is cheap (a goroutine while its chat runs, nothing while it waits
// for work), so a process runs as many chats as its limits allow, each
// holding a database connection only while it runs a statement. Of the
// Max slots, Headroom are kept for chats whose owner has nothing running:
// while the other slots are all taken (contended), a user who starts a
// turn still starts promptly, however long another user's steps last.
//
// The hand-off: the API reserves a slot before the admission's transaction
// (Reserve), the transaction claims the chat for the reservation's worker
// id (the claim, the lease, the counted attempt, the prompt read), and
// after it the API hands over what the transaction read (Hand), which runs
// the chat in the reserved slot, or gives the slot back (Cancel). The turn
// then needs no chatd_work notification and no claim transaction.
//
// The value handed over is a type parameter so that the package depends on
// nothing: the server hands a store.Turn.
package handoff

import (
	"sync"
	"time"

	"github.com/google/uuid"
)

// Limits are what Open sets.
type Limits struct {
	// Max is how many chats run at once.
	Max int
	// Headroom, of Max, is kept for chats whose owner has nothing running.
	Headroom int
	// Lease is the claims' lease (a reservation's).
	Lease time.Duration
	// NoHandOff refuses every Reserve: claims then go through the
	// database, where a per-user cap is checked.
	NoHandOff bool
}

// Headroom is how many of n slots are kept for chats whose owner has
// nothing running: a tenth, and at least one whenever there are two slots,
// so that a small pool (an operator bounding spend) is fair too.
func Headroom(n int) int {
	if n < 2 {
		return 0
	}
	return max(1, n/10)
}

// Slots are one process's running slots. The zero value is closed: Take
// and Reserve refuse until Open.
type Slots[T any] struct {
	mu     sync.Mutex
	lim    Limits
	open   bool
	used   int
	run    func(*Slot, T) // runs a handed-over chat (Open's)
	free   chan struct{}  // capacity 1: a slot was released, or the slots opened
	closed chan struct{}  // Close's: closed when used reaches 0 while closed
}

// New returns closed slots.
func New[T any]() *Slots[T] { return &Slots[T]{free: make(chan struct{}, 1)} }

// Slot is one taken slot. Its holder releases it once.
type Slot struct {
	// Headroom: taken while every other slot was, so its claim may take
	// only a chat whose owner has nothing running.
	Headroom bool
	release  func()
	once     sync.Once
}

// Release gives the slot back; only the first call counts.
func (sl *Slot) Release() { sl.once.Do(sl.release) }

// Open starts giving slots: run runs a handed-over chat in its slot (in a
// goroutine of its own) and releases the slot when it is done.
func (s *Slots[T]) Open(lim Limits, run func(*Slot, T)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lim, s.run, s.open, s.closed = lim, run, true, nil
	s.signal()
}

// Close refuses new slots. The channel it returns is closed once every
// slot taken before is released.
func (s *Slots[T]) Close() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = false
	if s.closed == nil {
		s.closed = make(chan struct{})
		if s.used == 0 {
			close(s.closed)
		}
	}
	return s.closed
}

// Wait returns true once a slot may be free (Take can still lose it to a
// Reserve), false when done ends first.
func (s *Slots[T]) Wait(done <-chan struct{}) bool {
	for {
		s.mu.Lock()
		ok := s.open && s.used < s.lim.Max
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-s.free:
		case <-done:
			return false
		}
	}
}

// Take takes a slot for a claim whose chat is not known yet.
func (s *Slots[T]) Take() (*Slot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open || s.used >= s.lim.Max {
		return nil, false
	}
	headroom := s.used >= s.lim.Max-s.lim.Headroom
	s.used++
	return &Slot{Headroom: headroom, release: s.releaseOne}, true
}

// OthersContended reports, for a caller holding one slot, whether every
// slot outside the headroom is taken by others: the caller's slot is then
// the headroom, whenever it was taken.
func (s *Slots[T]) OthersContended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used-1 >= s.lim.Max-s.lim.Headroom
}

// Contended reports whether every slot outside the headroom is taken.
func (s *Slots[T]) Contended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used >= s.lim.Max-s.lim.Headroom
}

// Used counts the slots taken (for metrics and tests).
func (s *Slots[T]) Used() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// Max is the number of slots (0 while closed).
func (s *Slots[T]) Max() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open {
		return 0
	}
	return s.lim.Max
}

func (s *Slots[T]) releaseOne() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used--
	if s.used == 0 && s.closed != nil && !s.open {
		close(s.closed)
	}
	s.signal()
}

// signal wakes Wait; s.mu is held.
func (s *Slots[T]) signal() {
	select {
	case s.free <- struct{}{}:
	default:
	}
}

// Reservation is a slot taken for one admission.
type Reservation[T any] struct {
	// Worker is the claim id the admission writes (chats.worker_id).
	Worker uuid.UUID
	// Lease is the claim's lease.
	Lease time.Duration
	slot  *Slot
	run   func(*Slot, T)
	once  sync.Once
}

// Reserve takes a slot for a chat the API is about to admit, if one is free
// outside the headroom (the headroom goes to claims, which check the
// owner). A nil Slots has none.
func (s *Slots[T]) Reserve() (*Reservation[T], bool) {
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open || s.lim.NoHandOff || s.used >= s.lim.Max-s.lim.Headroom {
		return nil, false
	}
	s.used++
	return &Reservation[T]{Worker: uuid.New(), Lease: s.lim.Lease, slot: &Slot{release: s.releaseOne}, run: s.run}, true
}

// Hand runs v, the admission's claim, in the reserved slot. Only the first
// Hand or Cancel of a reservation counts.
func (r *Reservation[T]) Hand(v T) {
	r.once.Do(func() { go r.run(r.slot, v) })
}

// Cancel gives the slot back unused (the admission failed or claimed
// nothing). A no-op after Hand, so it can be deferred.
func (r *Reservation[T]) Cancel() { r.once.Do(r.slot.Release) }
