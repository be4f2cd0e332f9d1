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
