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
