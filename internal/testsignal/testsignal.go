// Package testsignal holds points in production code that a test can hold
// while it does something else, or hear from, after River's testsignal: a
// package keeps one struct of them (runner.TestSignals), which production
// leaves zero, so each point costs a nil check. Tests use a Barrier to
// reach a point, act (interrupt, edit, kill), release, and assert, and a
// Signal to wait for what happened (a process started, a call was sent)
// instead of sleeping.
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

// Signal is a point where production code tells a test that something
// happened, and what. The zero Signal drops every value, so in production a
// point costs a nil check. Arm it before the code under test starts: with
// Init to read the values from C, or with InitFunc to take each one where it
// is signalled.
type Signal[T any] struct {
	ch chan T
	f  func(T)
}

// signalBuffer is how many values an armed Signal holds for the test.
const signalBuffer = 64

// Init arms s: values wait in C for the test to read them.
func (s *Signal[T]) Init() { s.ch = make(chan T, signalBuffer) }

// InitFunc arms s to call f with each value, on the goroutine that
// signals it: for a test that keeps every value, or a few of them.
func (s *Signal[T]) InitFunc(f func(T)) { s.f = f }

// Signal is the point itself. It never blocks: a test that lets
// signalBuffer values go unread is broken, and panics here.
func (s *Signal[T]) Signal(v T) {
	switch {
	case s == nil:
	case s.f != nil:
		s.f(v)
	case s.ch != nil:
		select {
		case s.ch <- v:
		default:
			panic("testsignal: a Signal's buffer is full: its test does not read it")
		}
	}
}

// C is where an armed Signal's values wait (nil when s is not armed by
// Init).
func (s *Signal[T]) C() <-chan T { return s.ch }
