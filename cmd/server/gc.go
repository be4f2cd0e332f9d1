package main

import (
	"context"
	"runtime/debug"
	"time"
)

// serverGCPercent is the garbage collector's target the server runs with
// unless GOGC is set, while few chats run. Its live heap is then small
// (tens of MB) and a turn allocates a lot of short-lived JSON, so Go's
// default of 100 collects often: a lone client's turn spent about a tenth
// of chatd's CPU in the collector. 400 measured 0.94× the p50 of a lone
// client's turn and 0.4 ms less chatd CPU per turn, at 80 MB resident
// instead of 62 MB with 8 clients (docs/benchmarks.md). GOGC and GOMEMLIMIT
// rule when set.
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

// gcPercentFor is the collector's target with n chats running. The
// garbage allowed between collections is a multiple of the live heap,
// which grows with the chats in flight (their connections, buffers and
// steps): at 400, a thousand chats waiting on their model held 0.6 MiB of
// resident memory each. So the target falls from 400 as more than 32
// chats run, in steps (400, 300, 200, 100, then 50 past 256 chats and 25
// past 2,048): the garbage allowed stays near what 32 chats at 400 allow
// until the chats' own 52 KiB of live heap and 80 KiB of stacks each
// dominate, and a chat in flight costs about those.
func gcPercentFor(n int) int {
	switch {
	case n <= 32:
		return serverGCPercent
	case n > 2048:
		return 25
	case n > 256:
		return 50
	}
	return max(100, (serverGCPercent*32/n+50)/100*100)
}

// adaptGC sets the collector's target from the chats running (running)
// every second until ctx ends. Only when tuneGC applied its target.
func adaptGC(ctx context.Context, running func() int) {
	cur := serverGCPercent
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if p := gcPercentFor(running()); p != cur {
			debug.SetGCPercent(p)
			cur = p
		}
	}
}
