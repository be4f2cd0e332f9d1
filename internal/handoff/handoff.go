// Package handoff lets a process's API give a chat it admits straight to
// one of the same process's idle workers. The admission claims the chat for
// that worker in its own transaction (worker id, lease, counted attempt,
// the prompt read), so the turn needs no chatd_work notification and no
// claim transaction, and the worker starts the provider call the moment the
// admission commits.
//
// A worker waiting for work sits on a Seat; the API reserves one before its
// transaction and, after it, hands over what the transaction read (Hand)
// or gives the seat back (Cancel). A reserved worker waits for one of the
// two: every Reserve is followed by exactly one of them, promptly (the
// admission's transaction is short), so a worker never waits long. A
// worker reserved while it was being woken for something else still takes
// the hand-off first.
//
// The value handed over is a type parameter so that the package depends on
// nothing: the server hands a store.Turn.
package handoff

import (
	"sync"
	"time"

	"github.com/google/uuid"
)

// Seats are one process's idle workers.
type Seats[T any] struct {
	mu   sync.Mutex
	idle []*Seat[T] // most recently idle last: it is taken first
}

// New returns an empty set of seats.
func New[T any]() *Seats[T] { return &Seats[T]{} }

// Seat is one worker's place. Its methods are the worker's own.
type Seat[T any] struct {
	seats *Seats[T]
	lease time.Duration
	c     chan Handed[T] // capacity 1: the one Hand or Cancel of a reservation
	state seatState      // guarded by seats.mu
}

type seatState int

const (
	seatBusy     seatState = iota // the worker is not waiting
	seatIdle                      // in seats.idle
	seatReserved                  // taken by Reserve; Hand or Cancel follows
)

// Handed is what a reserved seat receives: the admission's value, or
// OK false when the admission did not commit.
type Handed[T any] struct {
	Value T
	OK    bool
}

// NewSeat returns a seat for one worker whose claims last lease.
func (s *Seats[T]) NewSeat(lease time.Duration) *Seat[T] {
	return &Seat[T]{seats: s, lease: lease, c: make(chan Handed[T], 1)}
}

// Sit makes the worker available to Reserve.
func (st *Seat[T]) Sit() {
	s := st.seats
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.state == seatBusy {
		st.state = seatIdle
		s.idle = append(s.idle, st)
	}
}

// Stand takes the worker out of the idle set before it does something
// else. When the seat was reserved meanwhile, Stand waits for the
// reservation's outcome (promptly: see the package comment) and returns it
// with true: the worker takes that first.
func (st *Seat[T]) Stand() (Handed[T], bool) {
	s := st.seats
	s.mu.Lock()
	switch st.state {
	case seatIdle:
		for i, o := range s.idle {
			if o == st {
				s.idle = append(s.idle[:i], s.idle[i+1:]...)
				break
			}
		}
		st.state = seatBusy
	case seatReserved:
		s.mu.Unlock()
		return <-st.c, true
	}
	s.mu.Unlock()
	select { // handed over just before: take it
	case h := <-st.c:
		return h, true
	default:
		return Handed[T]{}, false
	}
}

// C delivers a reservation's outcome to the worker waiting on its seat.
func (st *Seat[T]) C() <-chan Handed[T] { return st.c }

// Reservation is a seat taken for one admission.
type Reservation[T any] struct {
	// Worker is the claim id the admission writes (chats.worker_id).
	Worker uuid.UUID
	// Lease is the claim's lease, the worker's.
	Lease time.Duration
	seat  *Seat[T]
	once  sync.Once
}

// Reserve takes an idle seat, if there is one. A nil Seats has none.
func (s *Seats[T]) Reserve() (*Reservation[T], bool) {
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.idle)
	if n == 0 {
		return nil, false
	}
	st := s.idle[n-1]
	s.idle = s.idle[:n-1]
	st.state = seatReserved
	return &Reservation[T]{Worker: uuid.New(), Lease: st.lease, seat: st}, true
}

// Hand gives v to the reserved worker. Only the first Hand or Cancel of a
// reservation counts.
func (r *Reservation[T]) Hand(v T) { r.finish(Handed[T]{Value: v, OK: true}) }

// Cancel gives the seat back unused (the admission failed). A no-op after
// Hand, so it can be deferred.
func (r *Reservation[T]) Cancel() { r.finish(Handed[T]{}) }

func (r *Reservation[T]) finish(h Handed[T]) {
	r.once.Do(func() {
		st := r.seat
		st.seats.mu.Lock()
		defer st.seats.mu.Unlock()
		st.state = seatBusy
		st.c <- h // never blocks: one outcome per reservation, capacity 1
	})
}

// Idle counts the seats Reserve may take (for tests and metrics).
func (s *Seats[T]) Idle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.idle)
}
