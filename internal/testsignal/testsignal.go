// Package testsignal holds points in production code that a test can hold
// while it does something else, after River's testsignal: a package keeps
// one struct of them (runner.TestSignals), which production leaves zero, so
// each point costs a nil check. Tests use them as barriers: reach a point,
// act (interrupt, edit, kill), release, and assert, with no sleeps.
package testsignal

import (
	"context"
	"sync"
)

// Barrier holds the first goroutine that reaches it until the test
// releases it or that goroutine's context ends; later arrivals pass. The
// zero Barrier holds nothing.
type Barrier struct {
	reached, release chan struct{}
	arrive, free     sync.Once
}

// Cleaner is the part of testing.TB that Init needs.
type Cleaner interface{ Cleanup(func()) }

// Init arms b; it is released when the test ends, so a failing test never
// leaves a goroutine held. Call it before the code under test starts.
func (b *Barrier) Init(tb Cleaner) {
	b.reached, b.release = make(chan struct{}), make(chan struct{})
	tb.Cleanup(b.Release)
}

// Wait is the point itself. It returns at once unless b is armed and this
// is the first arrival, which waits for Release or for ctx to end.
func (b *Barrier) Wait(ctx context.Context) {
	if b == nil || b.reached == nil {
		return
	}
	first := false
	b.arrive.Do(func() {
		first = true
		close(b.reached)
	})
	if !first {
		return
	}
	select {
	case <-b.release:
	case <-ctx.Done():
	}
}

// Reached is closed when the first goroutine reaches b.
func (b *Barrier) Reached() <-chan struct{} { return b.reached }

// Release lets the held goroutine (and every later one) go on.
func (b *Barrier) Release() {
	if b.release != nil {
		b.free.Do(func() { close(b.release) })
	}
}
