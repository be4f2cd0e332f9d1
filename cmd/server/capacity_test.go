package main

import (
	"testing"
)

// TestDeriveCeiling: the running slots and the client connections come
// from what runs out first: descriptors (two per chat in flight, beyond a
// reserve), memory, or the flag when it is given.
func TestDeriveCeiling(t *testing.T) {
	t.Parallel()
	const gib = 1 << 30
	for _, tc := range []struct {
		name    string
		flag    int
		res     resources
		running int
		bound   string
		conns   int
	}{
		// 20,000 descriptors: 64 + 24 + 1,250 kept, 18,662 for chats.
		{name: "this machine", flag: -1, res: resources{descriptors: 20000, memory: 24 * gib, dbConns: 24}, running: 9331, bound: "descriptors", conns: 9331},
		{name: "a small container", flag: -1, res: resources{descriptors: 20000, memory: gib, dbConns: 24}, running: 3696, bound: "memory", conns: 14966},
		{name: "the flag", flag: 100, res: resources{descriptors: 20000, memory: 24 * gib, dbConns: 24}, running: 100, bound: "flag", conns: 18562},
		{name: "an API-only replica", flag: 0, res: resources{descriptors: 20000, memory: 24 * gib, dbConns: 24}, running: 0, bound: "flag", conns: 18662},
		// Providers bounded at 500 calls: the others wait without a connection.
		{name: "bounded providers", flag: -1, res: resources{descriptors: 20000, memory: 24 * gib, dbConns: 24, providerCalls: 500}, running: 18162, bound: "descriptors", conns: 18162},
		{name: "unknown memory", flag: -1, res: resources{descriptors: 1024, dbConns: 24}, running: 436, bound: "descriptors", conns: 436},
		{name: "descriptors unknown", flag: -1, res: resources{memory: gib, dbConns: 24}, running: 3696, bound: "memory", conns: 2013262136},
		{name: "a flag past the descriptors", flag: 50000, res: resources{descriptors: 20000, memory: 24 * gib, dbConns: 24}, running: 50000, bound: "flag", conns: minConns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := deriveCeiling(tc.flag, tc.res)
			if c.running != tc.running || c.bound != tc.bound || c.conns != tc.conns {
				t.Fatalf("deriveCeiling(%d, %+v) = %d running (%s), %d connections; want %d (%s), %d",
					tc.flag, tc.res, c.running, c.bound, c.conns, tc.running, tc.bound, tc.conns)
			}
			providerConns := c.running
			if tc.res.providerCalls > 0 {
				providerConns = min(providerConns, tc.res.providerCalls)
			}
			if used := c.conns + providerConns + tc.res.dbConns + fixedDescriptors; tc.bound == "descriptors" && used > tc.res.descriptors {
				t.Fatalf("%d descriptors in use at the ceiling, of %d", used, tc.res.descriptors)
			}
		})
	}
}
