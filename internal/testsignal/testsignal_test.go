package testsignal_test

import (
	"context"
	"testing"

	"github.com/chatd/chatd/internal/testsignal"
)

func TestZeroBarrierHoldsNothing(t *testing.T) {
	t.Parallel()
	var b testsignal.Barrier
	b.Wait(t.Context()) // returns at once
	b.Release()
	var nilB *testsignal.Barrier
	nilB.Wait(t.Context())
}

func TestBarrierHoldsTheFirstArrival(t *testing.T) {
	t.Parallel()
	var b testsignal.Barrier
	b.Init(t)
	done := make(chan struct{})
	go func() {
		b.Wait(t.Context())
		close(done)
	}()
	<-b.Reached()
	select {
	case <-done:
		t.Fatal("the first arrival was not held")
	default:
	}
	b.Wait(t.Context()) // a later arrival passes while the first is held
	b.Release()
	<-done
	b.Release() // twice is fine
}

func TestBarrierLetsACancelledArrivalGo(t *testing.T) {
	t.Parallel()
	var b testsignal.Barrier
	b.Init(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		b.Wait(ctx)
		close(done)
	}()
	<-b.Reached()
	cancel()
	<-done
}

func TestZeroSignalDropsValues(t *testing.T) {
	t.Parallel()
	var s testsignal.Signal[int]
	s.Signal(1) // dropped, never blocks
	if s.C() != nil {
		t.Fatal("a zero Signal has a channel")
	}
	var nilS *testsignal.Signal[int]
	nilS.Signal(1)
}

func TestSignalHandsValuesToTheTest(t *testing.T) {
	t.Parallel()
	var s testsignal.Signal[string]
	s.Init()
	go s.Signal("started")
	if got := <-s.C(); got != "started" {
		t.Fatalf("got %q", got)
	}
	var seen []int
	var f testsignal.Signal[int]
	f.InitFunc(func(v int) { seen = append(seen, v) })
	f.Signal(1)
	f.Signal(2)
	if len(seen) != 2 || seen[0] != 1 || seen[1] != 2 {
		t.Fatalf("seen %v", seen)
	}
}

func TestSignalUnreadPanics(t *testing.T) {
	t.Parallel()
	var s testsignal.Signal[int]
	s.Init()
	defer func() {
		if recover() == nil {
			t.Fatal("a full Signal did not panic")
		}
	}()
	for i := range 1000 {
		s.Signal(i)
	}
}
