package handoff

import (
	"sync"
	"testing"
	"time"
)

func TestClosedSlotsRefuse(t *testing.T) {
	t.Parallel()
	var none *Slots[int]
	if _, ok := none.Reserve(); ok {
		t.Fatal("a nil Slots reserved a slot")
	}
	s := New[int]()
	if _, ok := s.Reserve(); ok {
		t.Fatal("closed slots reserved one")
	}
	if _, ok := s.Take(); ok {
		t.Fatal("closed slots gave one")
	}
	done := make(chan struct{})
	close(done)
	if s.Wait(done) {
		t.Fatal("Wait on closed slots returned true")
	}
	select {
	case <-s.Close():
	default:
		t.Fatal("closing unused slots did not finish at once")
	}
}

// TestHeadroom: of 10 slots one is kept; Take marks it, Reserve never gets
// it, and Contended says so once the other nine are taken.
func TestHeadroom(t *testing.T) {
	t.Parallel()
	s := New[int]()
	s.Open(Limits{Max: 10, Headroom: 1, Lease: time.Second}, func(sl *Slot, _ int) { sl.Release() })
	var taken []*Slot
	for i := range 8 {
		sl, ok := s.Take()
		if !ok || sl.Headroom {
			t.Fatalf("take %d: ok %v headroom %v", i, ok, sl != nil && sl.Headroom)
		}
		taken = append(taken, sl)
	}
	if s.Contended() {
		t.Fatal("contended with a general slot free")
	}
	r, ok := s.Reserve()
	if !ok {
		t.Fatal("no reservation with a general slot free")
	}
	if !s.Contended() {
		t.Fatal("not contended with every general slot taken")
	}
	if _, ok := s.Reserve(); ok {
		t.Fatal("a reservation took the headroom")
	}
	h, ok := s.Take()
	if !ok || !h.Headroom {
		t.Fatalf("the tenth slot: ok %v, headroom %v", ok, ok && h.Headroom)
	}
	if _, ok := s.Take(); ok {
		t.Fatal("an eleventh slot")
	}
	r.Cancel()
	r.Cancel()
	if n := s.Used(); n != 9 {
		t.Fatalf("used %d after a cancel (twice), want 9", n)
	}
	h.Release()
	h.Release() // twice is once
	for _, sl := range taken {
		sl.Release()
	}
	if n := s.Used(); n != 0 {
		t.Fatalf("used %d, want 0", n)
	}
}

// TestHandRunsInTheSlot: a handed-over value runs in a goroutine holding the
// reserved slot; Close waits for it.
func TestHandRunsInTheSlot(t *testing.T) {
	t.Parallel()
	s := New[string]()
	got := make(chan string, 1)
	proceed := make(chan struct{})
	s.Open(Limits{Max: 1, Lease: 7 * time.Second}, func(sl *Slot, v string) {
		got <- v
		<-proceed
		sl.Release()
	})
	r, ok := s.Reserve()
	if !ok || r.Lease != 7*time.Second || r.Worker.String() == "" {
		t.Fatalf("reserve: %+v %v", r, ok)
	}
	if _, ok := s.Take(); ok {
		t.Fatal("the reserved slot was taken again")
	}
	r.Hand("turn")
	r.Hand("again") // only the first outcome counts
	r.Cancel()
	if v := <-got; v != "turn" {
		t.Fatalf("ran %q", v)
	}
	closed := s.Close()
	select {
	case <-closed:
		t.Fatal("Close finished while a handed-over chat ran")
	default:
	}
	if _, ok := s.Reserve(); ok {
		t.Fatal("reserved after Close")
	}
	close(proceed)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not finish after the slot was released")
	}
	select {
	case v := <-got:
		t.Fatalf("a second run %q", v)
	default:
	}
}

// TestWaitWakesOnRelease: Wait blocks while every slot is taken and returns
// when one is released.
func TestWaitWakesOnRelease(t *testing.T) {
	t.Parallel()
	s := New[int]()
	s.Open(Limits{Max: 1}, nil)
	sl, _ := s.Take()
	woke := make(chan bool)
	go func() { woke <- s.Wait(make(chan struct{})) }()
	select {
	case <-woke:
		t.Fatal("Wait returned while the only slot was taken")
	case <-time.After(20 * time.Millisecond):
	}
	sl.Release()
	if !<-woke {
		t.Fatal("Wait returned false")
	}
}

func TestNoHandOff(t *testing.T) {
	t.Parallel()
	s := New[int]()
	s.Open(Limits{Max: 4, NoHandOff: true}, nil)
	if _, ok := s.Reserve(); ok {
		t.Fatal("reserved with hand-offs off")
	}
	if _, ok := s.Take(); !ok {
		t.Fatal("no slot to take")
	}
}

// TestConcurrentUse never gives more slots than Max.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	s := New[int]()
	const slots = 5
	var mu sync.Mutex
	inUse, peak := 0, 0
	s.Open(Limits{Max: slots}, func(sl *Slot, _ int) {
		mu.Lock()
		inUse--
		mu.Unlock()
		sl.Release()
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if r, ok := s.Reserve(); ok {
					mu.Lock()
					inUse++
					peak = max(peak, inUse)
					mu.Unlock()
					r.Hand(1)
				} else if sl, ok := s.Take(); ok {
					sl.Release()
				}
			}
		})
	}
	wg.Wait()
	<-s.Close()
	if peak > slots {
		t.Fatalf("peak %d > %d", peak, slots)
	}
	if s.Used() != 0 {
		t.Fatalf("used %d after close", s.Used())
	}
}

// TestHeadroomSize: a tenth of the slots is kept, and at least one from
// two slots up; one slot keeps none (it is the only one).
func TestHeadroomSize(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{0: 0, 1: 0, 2: 1, 4: 1, 9: 1, 10: 1, 19: 1, 20: 2, 2000: 200, 9000: 900} {
		if got := Headroom(n); got != want {
			t.Errorf("Headroom(%d) = %d, want %d", n, got, want)
		}
	}
}
