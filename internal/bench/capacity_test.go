package bench

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
)

func TestPercentileOpen(t *testing.T) {
	t.Parallel()
	s := func(xs ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range xs {
			ds = append(ds, time.Duration(x)*time.Second)
		}
		return ds
	}
	for _, tc := range []struct {
		name       string
		done, open []time.Duration
		q          float64
		want       time.Duration
		lower      bool
	}{
		{"none", nil, nil, 0.5, 0, false},
		{"all finished: nearest rank", s(4, 1, 3, 2), nil, 0.5, 2 * time.Second, false},
		{"open turns above the rank leave it exact", s(1, 2, 3), s(60, 60), 0.5, 3 * time.Second, false},
		{"the rank on an open turn: a lower bound", s(1, 2), s(60, 60, 60), 0.5, 60 * time.Second, true},
		{"an open turn below the rank could be above it", s(1, 20, 30), s(10), 0.75, 20 * time.Second, true},
		{"an open turn ties after a finished one", s(10, 10), s(10), 0.5, 10 * time.Second, false},
		{"p99 of a few is the largest", s(1, 2, 3), s(9), 0.99, 9 * time.Second, true},
		{"all open", nil, s(55, 56), 0.5, 55 * time.Second, true},
	} {
		got, lower := percentileOpen(tc.done, tc.open, tc.q)
		if got != tc.want || lower != tc.lower {
			t.Errorf("%s: got %v (lower %v), want %v (lower %v)", tc.name, got, lower, tc.want, tc.lower)
		}
	}
}

// TestRoundCount: receipts in the window count for turns/s, turns started
// in it for the latency, abandoned ones as lower bounds.
func TestRoundCount(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	turns := []turn{
		{start: at(-5), end: at(5), ok: true},                   // ends in the window, started before it
		{start: at(1), end: at(11), ok: true},                   // in the window
		{start: at(2), end: at(12), ok: false},                  // in the window, failed
		{start: at(15), end: at(25), ok: true},                  // started in it, ends after it
		{start: at(18), end: at(80), open: true},                // started in it, abandoned
		{start: at(-9), end: at(-1), ok: true},                  // before the window
		{start: at(-1), end: at(80), open: true},                // abandoned, not started in the window
		{start: at(19.5), end: at(29.5), ok: true, open: false}, // started in it, ends after it
	}
	var r Round
	r.count(turns, at(0), at(20))
	if r.WindowTurns != 3 || r.TotalTurns != 6 || r.Failed != 1 || r.Unfinished != 2 || r.Samples != 5 || r.TurnsPerSec != 0.15 {
		t.Errorf("round %+v", r)
	}
	// Latencies 10, 10, 10, 10 and one open at 62: p50 exact, p99 a bound.
	if r.P50 != 10*time.Second || r.P50Open || r.P99 != 62*time.Second || !r.P99Open {
		t.Errorf("p50 %v (%v), p99 %v (%v)", r.P50, r.P50Open, r.P99, r.P99Open)
	}
}

func TestVmRSS(t *testing.T) {
	t.Parallel()
	kb, err := parseVmRSS([]byte("Name:\tchatd\nVmPeak:\t  900000 kB\nVmRSS:\t   51234 kB\nThreads:\t9\n"))
	if err != nil || kb != 51234 {
		t.Fatalf("VmRSS %d, %v", kb, err)
	}
	if _, err := parseVmRSS([]byte("Name:\tzombie\n")); err == nil {
		t.Fatal("no error without VmRSS")
	}
	if rssKiB([]int{-1}) != 0 {
		t.Fatal("a missing process counts")
	}
}

func TestTallyAndGauge(t *testing.T) {
	t.Parallel()
	ta := newTally()
	ta.callFailed(fmt.Errorf("create: %w", &client.APIError{StatusCode: 503, Body: client.Error{Message: "The database is not reachable"}}))
	ta.callFailed(fmt.Errorf("create: %w", &client.APIError{StatusCode: 503, Body: client.Error{Message: "again"}}))
	ta.callFailed(errors.New("connection reset"))
	ta.receipt(client.StructuredOutputResult{Status: client.OutputFailed, Error: &client.StructuredOutputError{Code: client.CodeProviderError}})
	ta.receipt(client.StructuredOutputResult{Status: client.OutputCancelled})
	c := Capacity{HTTPErrors: ta.http, Receipts: ta.receipts}
	if c.Errors() != 5 || ta.http[503].N != 2 || !strings.Contains(ta.http[503].Example, "not reachable") || ta.http[0].N != 1 ||
		ta.receipts["failed:provider_error"] != 1 || ta.receipts["cancelled"] != 1 {
		t.Fatalf("tally %+v %+v", ta.http, ta.receipts)
	}
	var b strings.Builder
	reportErrors(&b, 2, &c)
	want := "  round 2: 1 × no answer (connection reset); 2 × HTTP 503 (create: chatd: HTTP 503: The database is not reachable); "
	if !strings.HasPrefix(b.String(), want) || !strings.Contains(b.String(), "1 × receipt failed:provider_error") {
		t.Errorf("report %q", b.String())
	}

	var g gauge
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { g.add(1) })
	}
	wg.Wait()
	for range 50 {
		g.add(-1)
	}
	g.add(3)
	if g.n.Load() != 3 || g.peak.Load() != 50 {
		t.Fatalf("gauge %d, peak %d", g.n.Load(), g.peak.Load())
	}
}

func TestOptionsForCapacity(t *testing.T) {
	t.Parallel()
	o := Options{Clients: 1000, Users: 10, ProviderLatency: 10 * time.Second, Ramp: -1, Workers: -1,
		ServerFlags: []string{"--max-running=8"}}
	o.defaults()
	if o.Duration != 60*time.Second || o.Ramp != 10*time.Second || o.lead() != 10*time.Second || o.Drain != 60*time.Second ||
		o.pollWait() != 40*time.Second || len(o.PgbenchClients) != 0 || o.Workers != -1 {
		t.Errorf("defaults at 10s: %+v", o)
	}
	if f := o.serverFlags(o.ServerFlags); !slices.Equal(f, []string{"--max-running=8"}) {
		t.Errorf("flags %q", f)
	}
	o = Options{ProviderLatency: 60 * time.Second, Ramp: 5 * time.Second}
	o.defaults()
	if o.Duration != 6*time.Minute || o.lead() != time.Minute || o.Drain != 3*time.Minute || o.pollWait() != 90*time.Second {
		t.Errorf("defaults at 60s: %+v", o)
	}
	// Without a latency: the zero-latency benchmark's defaults (8 clients
	// and a slot kept for users with nothing running).
	o = Options{}
	o.defaults()
	if o.Clients != 8 || o.Workers != 9 || o.Duration != 10*time.Second || o.lead() != 0 || o.Drain != 0 ||
		o.pollWait() != 30*time.Second || !slices.Equal(o.PgbenchClients, []int{8}) || o.capacity() {
		t.Errorf("zero-latency defaults: %+v", o)
	}
	if f := o.serverFlags([]string{"--x"}); !slices.Equal(f, []string{"--workers", "9", "--x"}) {
		t.Errorf("flags %q", f)
	}
	o = Options{ProviderLatency: 50 * time.Millisecond}
	o.defaults()
	if o.Duration != 10*time.Second || o.Drain != time.Minute {
		t.Errorf("defaults at 50ms: %+v", o)
	}

	if !slices.Equal(mockArgs(0, 0)[4:], []string{"--latency", "0s", "--chunk-delay", "0s"}) ||
		!slices.Equal(mockArgs(10*time.Second, 0)[4:], []string{"--latency", "10s", "--chunk-delay", "0s"}) ||
		!slices.Equal(mockArgs(10*time.Second, 4)[4:], []string{"--latency", "2.5s", "--chunk-delay", "2.5s", "--stream-chunks", "4"}) {
		t.Errorf("mock args %q %q", mockArgs(0, 0), mockArgs(10*time.Second, 4))
	}
	if userName(0, 1) != "bench" || userName(0, 10) != "bench-1" || userName(9, 10) != "bench-10" {
		t.Error("user names")
	}
}

// TestClientsSpread: each user's clients are spread over the replicas.
func TestClientsSpread(t *testing.T) {
	t.Parallel()
	cs := [][]*client.Client{{}, {}}
	for r := range cs {
		for u := range 3 {
			cs[r] = append(cs[r], client.New(fmt.Sprintf("http://r%d", r), fmt.Sprintf("u%d", u), nil))
		}
	}
	l := load{clients: cs}
	seen := map[*client.Client]int{}
	for i := range 12 {
		seen[l.client(i)]++
	}
	if len(seen) != 6 {
		t.Fatalf("12 clients used %d of the 6 (replica, user) pairs", len(seen))
	}
	for c, n := range seen {
		if n != 2 {
			t.Errorf("%p used %d times", c, n)
		}
	}
}

func TestCapacityReport(t *testing.T) {
	t.Parallel()
	res := &Result{Options: Options{Clients: 1000, Users: 10, Workers: 256, ProviderLatency: 10 * time.Second, Ramp: -1, Rounds: 3},
		Settings: map[string]string{"max_connections": "300"}, Machine: Machine{Cores: 2}}
	res.Options.defaults()
	for i, tps := range []float64{25.6, 24.0, 26.0} {
		rd := Round{TurnsPerSec: tps, WindowTurns: int(tps * 60), P50: 40 * time.Second, P99: time.Duration(55+i) * time.Second,
			P99Open: i == 1, Unfinished: i, TotalTurns: 1500, ServerCounts: 1500, Load: "1 1 1"}
		rd.Capacity = &Capacity{PeakPG: 24, RSSBefore: 40 * 1024, RSSPeak: 40*1024 + 238*1000, PeakInFlight: 1000, PeakGoroutines: 3000,
			GoroutinesBefore: 300, PeakProvider: 256, ProviderCalls: 1800, HTTPErrors: map[int]ErrorCount{}, Receipts: map[string]int{}}
		if i == 2 {
			rd.Capacity.HTTPErrors[503] = ErrorCount{N: 4, Example: "create: chatd: HTTP 503: unreachable"}
		}
		res.Rounds = append(res.Rounds, rd)
	}
	res.Builds = []*Build{{Name: "chatd", Chatd: "bin/chatd", Flags: res.Options.serverFlags(nil), Rounds: res.Rounds}}
	var b strings.Builder
	res.Report(&b)
	out := b.String()
	for _, want := range []string{
		"1000 concurrent chats of structured turns over 10 users, 1 replica(s) with --workers 256 each, mockllm answering every call after 10s",
		"3 rounds of a 1m0s window starting 10s after the first client (starts spread over 10s)",
		"the ideal is 100.0 turns/s (1000 clients ÷ 10s)",
		"completed structured turns per second: 25.6 = 0.26 × the ideal",
		"p50 40.00 s = 4.00 × the latency, p99 >56.00 s = >5.60 × the latency",
		"errors: 0 (median per round); turns abandoned unfinished: 1",
		"  round 3: 4 × HTTP 503 (create: chatd: HTTP 503: unreachable)",
		"peak PostgreSQL client connections of chatd (pg_stat_activity every 100 ms): 24 (max_connections 300)",
		"40.0 MiB before the load, 272.4 MiB at its peak; growth ÷ peak chats in flight (1000) = 238 KiB per chat in flight",
		"300 before the load, peak 3000",
		"provider calls in flight (mockllm's peak): 256; 1800 calls during the load",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "database ceiling") || strings.Contains(out, "warning") {
		t.Errorf("a ceiling without pgbench, or a warning:\n%s", out)
	}
	if p := res.Rounds[0].progress(res.Options); !strings.HasPrefix(p, "25.6 turns/s of an ideal 100.0 (0.26), p50 40.00 s, p99 55.00 s, 0 errors") {
		t.Errorf("progress %q", p)
	}
}

func TestLogTail(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/chatd.log"
	if err := os.WriteFile(path, []byte("one\ntwo\nthree\nError: --workers must be from 0 to 1024\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := logTail(path); got != "two\nthree\nError: --workers must be from 0 to 1024" {
		t.Errorf("tail %q", got)
	}
	if got := logTail(path + ".missing"); !strings.Contains(got, "chatd.log.missing") {
		t.Errorf("missing log: %q", got)
	}
}
