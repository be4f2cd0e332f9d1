package bench

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/handoff"
)

func TestPercentileAndMedian(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p := percentile(ds, 0.5); p != 50*time.Millisecond {
		t.Errorf("p50 = %v", p)
	}
	if p := percentile(ds, 0.99); p != 99*time.Millisecond {
		t.Errorf("p99 = %v", p)
	}
	if p := percentile(ds[:1], 0.99); p != 100*time.Millisecond {
		t.Errorf("p99 of one = %v", p)
	}
	if p := percentile(nil, 0.5); p != 0 {
		t.Errorf("p50 of none = %v", p)
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("percentile sorted its input")
	}
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median = %v", m)
	}
}

func TestParsePgbench(t *testing.T) {
	out := `pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: /tmp/commit_probe.sql
scaling factor: 1
query mode: simple
number of clients: 8
number of threads: 2
duration: 10 s
number of transactions actually processed: 51234
latency average = 1.561 ms
initial connection time = 12.345 ms
tps = 5123.456789 (without initial connection time)
`
	tps, err := parsePgbenchTPS([]byte(out))
	if err != nil || math.Abs(tps-5123.456789) > 1e-9 {
		t.Fatalf("tps %v, %v", tps, err)
	}
	if _, err := parsePgbenchTPS([]byte("pgbench: error: connection refused\n")); err == nil {
		t.Fatal("no error without a tps line")
	}
}

func TestMachineFigures(t *testing.T) {
	if gb := parseMemTotalGB([]byte("MemTotal:       24641536 kB\nMemFree: 1 kB\n")); math.Abs(gb-23.5) > 0.01 {
		t.Errorf("MemTotal = %v GiB", gb)
	}
	if n := statementName("-- name: ChatGet :one\nSELECT * FROM chats WHERE id = $1"); n != "ChatGet" {
		t.Errorf("sqlc name %q", n)
	}
	if n := statementName("SELECT   pg_notify($1,\n $2)"); n != "SELECT pg_notify($1, $2)" {
		t.Errorf("statement %q", n)
	}
}

func TestProcStat(t *testing.T) {
	ppid, own, children, err := parseStat("4242 (post gres) (x)) S 17 4242 4242 0 -1 4194560 1 2 3 4 150 25 7 3 20 0 1 0 99 1 2")
	if err != nil || ppid != 17 || own != 1750*time.Millisecond || children != 100*time.Millisecond {
		t.Fatalf("ppid %d own %v children %v err %v", ppid, own, children, err)
	}
	if _, _, _, err := parseStat("garbage"); err == nil {
		t.Fatal("no error")
	}
	if own := processCPU(os.Getpid()); own < 0 {
		t.Fatalf("own CPU %v", own)
	}
}

func TestSummaryAndReport(t *testing.T) {
	res := &Result{Options: Options{Clients: 4, Workers: 4, Duration: time.Second, Rounds: 3, PgbenchClients: []int{4, 1},
		PgbenchDuration: time.Second}, Postgres: "15", Settings: map[string]string{"fsync": "on"}}
	for i, tps := range []float64{10, 30, 20} {
		res.Rounds = append(res.Rounds, Round{TurnsPerSec: tps, P50: time.Duration(i+1) * time.Millisecond, P99: 9 * time.Millisecond,
			CommitsTurn: 20, WritesTurn: 5, Pgbench: map[int]float64{4: 1000, 1: 300}, TotalTurns: 7, ServerCounts: 7})
	}
	res.Builds = []*Build{{Name: "chatd", Chatd: "bin/chatd", Rounds: res.Rounds}}
	s := res.Summarize()
	if s.TurnsPerSec != 20 || s.P50ms != 2 || s.CeilingTPS != 1000 || s.WriteRate != 100 || s.WriteRatio != 0.1 ||
		s.TurnCeiling != 200 || s.CommitRatio != 0.4 || s.Pgbench[1] != 300 {
		t.Fatalf("summary %+v", s)
	}
	var b strings.Builder
	res.Report(&b)
	for _, want := range []string{"completed structured turns per second: 20.0", "p50 2.0 ms, p99 9.0 ms",
		"database commits per turn: 20.00", "database ceiling: 1000 commits/s (pgbench, 4 clients", "10.0% of the ceiling", ": 0.10\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "warning") {
		t.Errorf("unexpected warning:\n%s", b.String())
	}

	// With a baseline, the rounds are compared pairwise.
	base := &Build{Name: "baseline", Chatd: "old/chatd"}
	for _, tps := range []float64{5, 10, 10} {
		base.Rounds = append(base.Rounds, Round{TurnsPerSec: tps, P50: 4 * time.Millisecond, TotalTurns: 7, ServerCounts: 7,
			Pgbench: map[int]float64{4: 1000, 1: 300}})
	}
	res.Builds = append(res.Builds, base)
	b.Reset()
	res.Report(&b)
	if want := "turns/s ratio chatd/baseline: median 2.00 (range 2.00–3.00); p50 latency ratio: median 0.50 (range 0.25–0.75)"; !strings.Contains(b.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, b.String())
	}
}

// TestWorkersForEveryClient: by default each client's turn has a slot of
// its own beside the one chatd keeps for users with nothing running, so a
// benchmark of one user's N clients is not one slot short.
func TestWorkersForEveryClient(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ clients, workers int }{{1, 1}, {2, 3}, {8, 9}, {16, 17}, {100, 111}} {
		o := Options{Clients: c.clients}
		o.defaults()
		if o.Workers != c.workers {
			t.Errorf("%d clients: --workers %d, want %d", c.clients, o.Workers, c.workers)
		}
		if free := o.Workers - handoff.Headroom(o.Workers); free < c.clients {
			t.Errorf("%d clients: %d slots for them", c.clients, free)
		}
	}
}
