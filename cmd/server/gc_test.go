package main

import (
	"runtime/debug"
	"testing"
)

// Not parallel: the collector's target is the process's.
func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)

	if tuneGC(func(string) string { return "50" }) {
		t.Fatal("tuneGC overrode GOGC")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("with GOGC set the target became %d, want it left at 100", got)
	}
	if !tuneGC(func(string) string { return "" }) {
		t.Fatal("tuneGC did nothing without GOGC")
	}
	if got := debug.SetGCPercent(100); got != serverGCPercent {
		t.Fatalf("the target is %d, want %d", got, serverGCPercent)
	}
}

func TestGCPercentFor(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{0: 400, 8: 400, 32: 400, 40: 300, 64: 200, 100: 100, 128: 100, 200: 100, 256: 100, 257: 50, 2000: 50, 2048: 50, 2049: 25, 9000: 25} {
		if got := gcPercentFor(n); got != want {
			t.Errorf("%d chats running: %d, want %d", n, got, want)
		}
	}
}
