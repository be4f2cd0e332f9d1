package main

import "runtime/debug"

// serverGCPercent is the garbage collector's target the server runs with
// unless GOGC is set. Its live heap is small (tens of MB) and a turn
// allocates a lot of short-lived JSON, so Go's default of 100 collects
// often: a lone client's turn spent about a tenth of chatd's CPU in the
// collector. 400 measured 0.94× the p50 of a lone client's turn and 0.4 ms
// less chatd CPU per turn, at 80 MB resident instead of 62 MB with 8
// clients (docs/benchmarks.md). GOGC and GOMEMLIMIT rule when set.
const serverGCPercent = 400

// tuneGC applies serverGCPercent unless getenv("GOGC") is set, and reports
// whether it did.
func tuneGC(getenv func(string) string) bool {
	if getenv("GOGC") != "" {
		return false
	}
	debug.SetGCPercent(serverGCPercent)
	return true
}
