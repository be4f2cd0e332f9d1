package handoff

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestReserveNeedsAnIdleSeat(t *testing.T) {
	t.Parallel()
	var none *Seats[int]
	if _, ok := none.Reserve(); ok {
		t.Fatal("a nil Seats reserved a seat")
	}
	s := New[int]()
	if _, ok := s.Reserve(); ok {
		t.Fatal("reserved a seat nobody sits on")
	}
	st := s.NewSeat(time.Second)
	st.Sit()
	st.Sit() // twice is once
	if n := s.Idle(); n != 1 {
		t.Fatalf("%d idle, want 1", n)
	}
	if _, ok := st.Stand(); ok {
		t.Fatal("an unreserved seat reported a hand-off")
	}
	if _, ok := s.Reserve(); ok {
		t.Fatal("reserved a seat whose worker stood up")
	}
}

func TestHandAndCancel(t *testing.T) {
	t.Parallel()
	s := New[string]()
	st := s.NewSeat(7 * time.Second)
	st.Sit()
	r, ok := s.Reserve()
	if !ok || r.Lease != 7*time.Second || r.Worker.String() == "" {
		t.Fatalf("reserve: %+v %v", r, ok)
	}
	if _, ok := s.Reserve(); ok {
		t.Fatal("one seat reserved twice")
	}
	r.Hand("turn")
	r.Hand("again") // only the first outcome counts
	r.Cancel()
	if h := <-st.C(); !h.OK || h.Value != "turn" {
		t.Fatalf("handed %+v", h)
	}
	select {
	case h := <-st.C():
		t.Fatalf("a second outcome %+v", h)
	default:
	}

	st.Sit()
	r, _ = s.Reserve()
	r.Cancel()
	r.Hand("late")
	if h := <-st.C(); h.OK {
		t.Fatalf("a cancelled reservation handed %+v", h)
	}
}

// A worker woken by something else while an admission reserved its seat
// takes the hand-off first, whether the outcome arrives before or after it
// stands up.
func TestStandTakesAReservation(t *testing.T) {
	t.Parallel()
	s := New[int]()
	st := s.NewSeat(time.Second)

	st.Sit()
	r, _ := s.Reserve()
	r.Hand(1) // before Stand
	if h, ok := st.Stand(); !ok || !h.OK || h.Value != 1 {
		t.Fatalf("stand after the hand-off: %+v %v", h, ok)
	}

	st.Sit()
	r, _ = s.Reserve()
	got := make(chan Handed[int])
	go func() {
		h, ok := st.Stand() // waits for the outcome
		if !ok {
			t.Error("stand returned without the reservation's outcome")
		}
		got <- h
	}()
	r.Hand(2)
	if h := <-got; !h.OK || h.Value != 2 {
		t.Fatalf("stand before the hand-off: %+v", h)
	}
	if n := s.Idle(); n != 0 {
		t.Fatalf("%d idle after the hand-offs", n)
	}
}

func TestMostRecentlyIdleFirst(t *testing.T) {
	t.Parallel()
	s := New[int]()
	a, b := s.NewSeat(time.Second), s.NewSeat(time.Second)
	a.Sit()
	b.Sit()
	r, _ := s.Reserve()
	r.Hand(1)
	select {
	case <-b.C():
	default:
		t.Fatal("the seat taken was not the one that sat last")
	}
	if _, ok := a.Stand(); ok {
		t.Fatal("the other seat was reserved too")
	}
}

// Many workers and admissions at once: every reservation's outcome reaches
// exactly one worker, and none is lost (run with -race).
func TestConcurrentHandOffs(t *testing.T) {
	t.Parallel()
	s := New[int]()
	const workers, admissions = 4, 500
	received := make(chan int, admissions)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		st := s.NewSeat(time.Second)
		wg.Go(func() {
			for {
				st.Sit()
				select {
				case h := <-st.C():
					if h.OK {
						received <- h.Value
					}
					continue
				case <-stop:
				case <-time.After(time.Millisecond): // woken for other work
				}
				if h, ok := st.Stand(); ok && h.OK {
					received <- h.Value
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}
	handed := 0
	for i := 0; handed < admissions; i++ {
		r, ok := s.Reserve()
		if !ok {
			runtime.Gosched()
			continue
		}
		if i%3 == 0 {
			r.Cancel()
			continue
		}
		r.Hand(i)
		handed++
	}
	close(stop)
	wg.Wait()
	close(received)
	seen := map[int]bool{}
	for v := range received {
		if seen[v] {
			t.Fatalf("%d handed twice", v)
		}
		seen[v] = true
	}
	if len(seen) != handed {
		t.Fatalf("%d of %d hand-offs received", len(seen), handed)
	}
}
