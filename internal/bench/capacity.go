package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/prom"
)

// Capacity is what a round with a provider latency measured beyond the
// turns: the errors, and the peaks sampled while the load ran.
type Capacity struct {
	// HTTPErrors counts the failed calls by HTTP status (0: no answer, a
	// transport error), with one message of each.
	HTTPErrors map[int]ErrorCount
	// Receipts counts the terminal receipts other than succeeded, by
	// status (and error code).
	Receipts map[string]int
	// PeakPG is the most client backends connected to the build's
	// database at once (pg_stat_activity, sampled every 100 ms).
	PeakPG int
	// RSSBefore is chatd's VmRSS (KiB, summed over the replicas) just
	// before the load; RSSPeak its peak while the load ran.
	RSSBefore, RSSPeak int64
	// GoroutinesBefore and PeakGoroutines are chatd's go_goroutines
	// (summed over the replicas; sampled every second: each scrape of
	// /metrics costs chatd a query).
	GoroutinesBefore, PeakGoroutines int
	// PeakInFlight is the most turns the clients had started and not yet
	// seen the receipt of: chats in flight.
	PeakInFlight int
	// PeakProvider is mockllm's peak of calls in flight; ProviderCalls the
	// calls it received during the load.
	PeakProvider  int
	ProviderCalls int64
	// Cores is the CPU each participant used over the load, in cores
	// (CPU time ÷ wall time).
	Cores struct{ Chatd, Postgres, Mock, Clients float64 }
}

// ErrorCount is how many calls failed with one HTTP status, and the first
// message.
type ErrorCount struct {
	N       int
	Example string
}

// Errors is the sum of the HTTP errors and of the failed receipts.
func (c *Capacity) Errors() int {
	n := 0
	for _, e := range c.HTTPErrors {
		n += e.N
	}
	for _, k := range c.Receipts {
		n += k
	}
	return n
}

// tally counts the errors of a load, from every client goroutine.
type tally struct {
	mu       sync.Mutex
	http     map[int]ErrorCount
	receipts map[string]int
}

func newTally() *tally { return &tally{http: map[int]ErrorCount{}, receipts: map[string]int{}} }

// callFailed counts a failed call: an API error by its status, anything
// else as status 0.
func (t *tally) callFailed(err error) {
	status := 0
	var ae *client.APIError
	if errors.As(err, &ae) {
		status = ae.StatusCode
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.http[status]
	if e.N == 0 {
		e.Example = err.Error()
	}
	e.N++
	t.http[status] = e
}

// receipt counts a terminal receipt that did not succeed.
func (t *tally) receipt(res client.StructuredOutputResult) {
	key := string(res.Status)
	if res.Error != nil && res.Error.Code != "" {
		key += ":" + string(res.Error.Code)
	}
	t.mu.Lock()
	t.receipts[key]++
	t.mu.Unlock()
}

// gauge counts things in flight and keeps the peak.
type gauge struct{ n, peak atomic.Int64 }

func (g *gauge) add(d int64) {
	n := g.n.Add(d)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// percentileOpen is percentile over finished turns (done) and turns that
// never finished (open, each at the time it had waited when it was
// abandoned: a lower bound). The result is exact unless an open turn is at
// or below its rank; then it is only a lower bound, and lower is true.
func percentileOpen(done, open []time.Duration, q float64) (d time.Duration, lower bool) {
	type sample struct {
		d    time.Duration
		open bool
	}
	all := make([]sample, 0, len(done)+len(open))
	for _, d := range done {
		all = append(all, sample{d, false})
	}
	for _, d := range open {
		all = append(all, sample{d, true})
	}
	if len(all) == 0 {
		return 0, false
	}
	// An open turn sorts after a finished one of the same time: it waited
	// at least that long.
	slices.SortFunc(all, func(a, b sample) int {
		return cmp.Or(cmp.Compare(a.d, b.d), cmp.Compare(boolInt(a.open), boolInt(b.open)))
	})
	rank := min(max(int(math.Ceil(q*float64(len(all)))), 1), len(all))
	return all[rank-1].d, slices.ContainsFunc(all[:rank], func(s sample) bool { return s.open })
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// parseVmRSS reads VmRSS (KiB) from a /proc/<pid>/status.
func parseVmRSS(b []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, errors.New("no VmRSS line")
}

// rssKiB is the resident memory of the processes, summed (0 for one that
// cannot be read).
func rssKiB(pids []int) int64 {
	var n int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		if kb, err := parseVmRSS(b); err == nil {
			n += kb
		}
	}
	return n
}

// goroutines is go_goroutines summed over the replicas' /metrics.
func goroutines(ctx context.Context, cs []*client.Client) int {
	n := 0
	for _, c := range cs {
		body, err := c.Metrics(ctx)
		if err != nil {
			continue
		}
		s, err := prom.Parse(bytes.NewReader(body))
		if err != nil {
			continue
		}
		g, _ := s.Get("go_goroutines")
		n += int(g)
	}
	return n
}

// pgBackends counts the client backends connected to db; the sampling
// connection itself is on another database.
func pgBackends(ctx context.Context, conn *pgx.Conn, db string) (int, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()`, db).Scan(&n)
	return n, err
}

// peaks samples, while a load runs, chatd's connections to PostgreSQL, its
// longest open transaction and its resident memory every 100 ms, and its
// goroutines every second.
type peaks struct {
	pg, rss, goroutines atomic.Int64
	// xact is the longest open transaction of a chatd backend seen, in
	// nanoseconds.
	xact atomic.Int64
	stop context.CancelFunc
	done chan struct{}
}

func samplePeaks(ctx context.Context, pgURL, db string, pids []int, cs []*client.Client) (*peaks, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &peaks{stop: cancel, done: make(chan struct{})}
	raise := func(a *atomic.Int64, v int64) {
		if v > a.Load() {
			a.Store(v) // one writer: the sampling goroutine
		}
	}
	go func() {
		defer close(p.done)
		defer conn.Close(context.Background())
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			if n, err := pgBackends(ctx, conn, db); err == nil {
				raise(&p.pg, int64(n))
			}
			if d, err := longestXact(ctx, conn, db); err == nil {
				raise(&p.xact, int64(d))
			}
			raise(&p.rss, rssKiB(pids))
			if i%10 == 0 {
				raise(&p.goroutines, int64(goroutines(ctx, cs)))
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return p, nil
}

// finish stops the sampling and returns the peaks.
func (p *peaks) finish() (pg int, rss int64, goroutines int) {
	p.stop()
	<-p.done
	return int(p.pg.Load()), p.rss.Load(), int(p.goroutines.Load())
}

// mockStats asks mockllm for its call counts (GET /_mockllm/stats), or
// resets its peak (POST /_mockllm/stats/reset); base is its URL without
// /v1.
func mockStats(ctx context.Context, httpc *http.Client, base string, reset bool) (inFlight, peak int, calls int64, err error) {
	method, path := http.MethodGet, "/_mockllm/stats"
	if reset {
		method, path = http.MethodPost, "/_mockllm/stats/reset"
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, 0, fmt.Errorf("mockllm %s %s: %s (a mockllm without the stats endpoint?)", method, path, resp.Status)
	}
	var s struct {
		InFlight     int   `json:"in_flight"`
		PeakInFlight int   `json:"peak_in_flight"`
		Calls        int64 `json:"calls"`
	}
	err = json.NewDecoder(resp.Body).Decode(&s)
	return s.InFlight, s.PeakInFlight, s.Calls, err
}
