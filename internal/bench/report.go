package bench

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary holds the medians over the rounds.
type Summary struct {
	TurnsPerSec, P50ms, P99ms  float64
	CommitsTurn, WritesTurn    float64
	Pgbench                    map[int]float64 // clients → median tps
	CeilingTPS                 float64         // pgbench at Options.PgbenchClients[0]
	CommitRate, WriteRate      float64         // chatd's commits and writing commits per second
	WriteRatio, CommitRatio    float64         // chatd's rate ÷ the ceiling
	TurnCeiling                float64         // ceiling ÷ writes per turn
	ProviderP50ms, CreateP50ms float64
	RollbacksPerRound          float64
	SessionsPerRound           float64
	StatementsTurn             float64 // pg_stat_statements calls per turn (0 without it)
	// CPU milliseconds per turn.
	CPUChatd, CPUPostgres, CPUMock, CPUClients float64
	// chatd's allocations per turn (objects, KiB).
	Allocs, AllocKiB float64
}

// Summarize computes the medians of the first build.
func (r *Result) Summarize() Summary { return r.summarize(r.Rounds) }

func (r *Result) summarize(rounds []Round) Summary {
	var s Summary
	col := func(f func(Round) float64) float64 {
		xs := make([]float64, len(rounds))
		for i, rd := range rounds {
			xs[i] = f(rd)
		}
		return median(xs)
	}
	s.TurnsPerSec = col(func(rd Round) float64 { return rd.TurnsPerSec })
	s.P50ms = col(func(rd Round) float64 { return float64(rd.P50.Microseconds()) / 1000 })
	s.P99ms = col(func(rd Round) float64 { return float64(rd.P99.Microseconds()) / 1000 })
	s.CommitsTurn = col(func(rd Round) float64 { return rd.CommitsTurn })
	s.WritesTurn = col(func(rd Round) float64 { return rd.WritesTurn })
	s.ProviderP50ms = col(func(rd Round) float64 { return rd.ProviderP50 * 1000 })
	s.CreateP50ms = col(func(rd Round) float64 { return rd.CreateP50 * 1000 })
	s.RollbacksPerRound = col(func(rd Round) float64 { return float64(rd.Rollbacks) })
	s.SessionsPerRound = col(func(rd Round) float64 { return float64(rd.Sessions) })
	s.StatementsTurn = col(func(rd Round) float64 { return statementsPerTurn(rd) })
	cpu := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	s.CPUChatd = col(func(rd Round) float64 { return cpu(rd.CPU.Chatd) })
	s.CPUPostgres = col(func(rd Round) float64 { return cpu(rd.CPU.Postgres) })
	s.CPUMock = col(func(rd Round) float64 { return cpu(rd.CPU.Mock) })
	s.CPUClients = col(func(rd Round) float64 { return cpu(rd.CPU.Clients) })
	s.Allocs = col(func(rd Round) float64 { return rd.Allocs })
	s.AllocKiB = col(func(rd Round) float64 { return rd.AllocBytes / 1024 })
	s.Pgbench = map[int]float64{}
	for _, n := range r.Options.PgbenchClients {
		s.Pgbench[n] = col(func(rd Round) float64 { return rd.Pgbench[n] })
	}
	if len(r.Options.PgbenchClients) > 0 {
		s.CeilingTPS = s.Pgbench[r.Options.PgbenchClients[0]]
	}
	s.CommitRate = s.TurnsPerSec * s.CommitsTurn
	s.WriteRate = s.TurnsPerSec * s.WritesTurn
	if s.CeilingTPS > 0 {
		s.WriteRatio = s.WriteRate / s.CeilingTPS
		s.CommitRatio = s.CommitRate / s.CeilingTPS
	}
	if s.WritesTurn > 0 {
		s.TurnCeiling = s.CeilingTPS / s.WritesTurn
	}
	return s
}

func statementsPerTurn(rd Round) float64 {
	var n int64
	for _, st := range rd.Statements {
		n += st.Calls
	}
	return float64(n) / float64(max(rd.TotalTurns, 1))
}

// Report writes the figures: each build's, then the comparison.
func (r *Result) Report(w io.Writer) {
	o := r.Options
	mode := "durable: PostgreSQL defaults"
	if o.Fast {
		mode = "fast: fsync and synchronous_commit off"
	}
	window := o.Duration.String()
	if o.Turns > 0 {
		window = fmt.Sprintf("%d turns", o.Turns)
	}
	users := ""
	if o.Users > 1 {
		users = fmt.Sprintf(" over %d users", o.Users)
	}
	fmt.Fprintf(w, "chatd end-to-end benchmark: %d concurrent chats of structured turns%s, %d replica(s) with %s each, %s\n",
		o.Clients, users, o.Replicas, flagsText(r.Builds[0].Flags), o.provider())
	if o.capacity() {
		fmt.Fprintf(w, "%d rounds of a %s window starting %s after the first client (starts spread over %s), after a %s warm-up with %d clients; "+
			"turns in flight after it get %s; long polls ?wait=%s; medians over the rounds\n",
			o.Rounds, window, o.lead(), o.Ramp, o.Warmup, min(o.Clients, 8), o.Drain, o.pollWait())
	} else {
		fmt.Fprintf(w, "%d rounds of %s after a %s warm-up; medians over the rounds\n", o.Rounds, window, o.Warmup)
	}
	fmt.Fprintf(w, "machine: %s, %d cores, %.1f GiB, %s\n", r.Machine.CPU, r.Machine.Cores, r.Machine.MemoryGB, r.Machine.GoOS)
	if r.Sink != nil {
		fmt.Fprintf(w, "OTLP sink on %s: %d spans received in %d exports\n", o.OTLPSink, r.Sink.Spans(), r.Sink.Requests())
	}
	keys := make([]string, 0, len(r.Settings))
	for k := range r.Settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var set []string
	for _, k := range keys {
		set = append(set, k+"="+r.Settings[k])
	}
	fmt.Fprintf(w, "PostgreSQL %s (%s): %s\n", r.Postgres, mode, strings.Join(set, " "))
	for i, b := range r.Builds {
		head := b.Chatd
		if i > 0 && !slices.Equal(b.Flags, r.Builds[0].Flags) {
			head += ", with " + flagsText(b.Flags)
		}
		fmt.Fprintf(w, "\n== %s (%s)\n\n", b.Name, head)
		r.reportBuild(w, b.Rounds)
	}
	if len(r.Builds) == 2 {
		r.compare(w, r.Builds[0], r.Builds[1])
	}
}

// compare prints the per-round ratios of a to b (rounds ran back to back)
// and their median and range.
func (r *Result) compare(w io.Writer, a, b *Build) {
	fmt.Fprintf(w, "\n== %s vs %s, round by round (each round ran both, in alternating order)\n\n", a.Name, b.Name)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "round\t%s turns/s\t%s turns/s\tratio\t%s p50 ms\t%s p50 ms\tp50 ratio\t%s p99 ms\t%s p99 ms\tp99 ratio\t\n",
		a.Name, b.Name, a.Name, b.Name, a.Name, b.Name)
	var tps, p50, p99 []float64
	for i := range min(len(a.Rounds), len(b.Rounds)) {
		ra, rb := a.Rounds[i], b.Rounds[i]
		t := ra.TurnsPerSec / math.Max(rb.TurnsPerSec, 1e-9)
		l := float64(ra.P50) / math.Max(float64(rb.P50), 1)
		h := float64(ra.P99) / math.Max(float64(rb.P99), 1)
		tps, p50, p99 = append(tps, t), append(p50, l), append(p99, h)
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.2f\t%s%s\t%s%s\t%.2f\t%s%s\t%s%s\t%.2f\t\n", i+1, ra.TurnsPerSec, rb.TurnsPerSec, t,
			bound(ra.P50Open), ms(ra.P50), bound(rb.P50Open), ms(rb.P50), l, bound(ra.P99Open), ms(ra.P99), bound(rb.P99Open), ms(rb.P99), h)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nturns/s ratio %s/%s: median %.2f (range %.2f–%.2f); p50 latency ratio: median %.2f (range %.2f–%.2f); "+
		"p99 latency ratio: median %.2f (range %.2f–%.2f)\n", a.Name, b.Name, median(tps), slices.Min(tps), slices.Max(tps),
		median(p50), slices.Min(p50), slices.Max(p50), median(p99), slices.Min(p99), slices.Max(p99))
}

// flagsText describes the flags a build's chatd got.
func flagsText(flags []string) string {
	if len(flags) == 0 {
		return "chatd's default flags"
	}
	return strings.Join(flags, " ")
}

func (r *Result) reportBuild(w io.Writer, rounds []Round) {
	o := r.Options
	s := r.summarize(rounds)
	if o.capacity() {
		r.reportCapacity(w, rounds)
	} else {
		r.reportTurns(w, rounds, s)
	}
	if o.SeedChats > 0 {
		reportSweeps(w, "sweep", rounds)
	}
	r.reportDatabase(w, rounds, s)
}

// reportTurns writes the zero-latency round table and the turn figures.
func (r *Result) reportTurns(w io.Writer, rounds []Round, s Summary) {
	o := r.Options
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "round\tload avg\tturns\tturns/s\tp50 ms\tp99 ms\tcommits/turn\twrites/turn\tsessions\t"
	for _, n := range o.PgbenchClients {
		head += fmt.Sprintf("pgbench c=%d tps\t", n)
	}
	fmt.Fprintln(tw, head)
	for i, rd := range rounds {
		line := fmt.Sprintf("%d\t%s\t%d\t%.1f\t%s\t%s\t%.2f\t%.2f\t%d\t", i+1, rd.Load, rd.WindowTurns, rd.TurnsPerSec,
			ms(rd.P50), ms(rd.P99), rd.CommitsTurn, rd.WritesTurn, rd.Sessions)
		for _, n := range o.PgbenchClients {
			line += fmt.Sprintf("%.0f\t", rd.Pgbench[n])
		}
		fmt.Fprintln(tw, line)
	}
	line := fmt.Sprintf("median\t\t\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t%.0f\t", s.TurnsPerSec, s.P50ms, s.P99ms, s.CommitsTurn, s.WritesTurn, s.SessionsPerRound)
	for _, n := range o.PgbenchClients {
		line += fmt.Sprintf("%.0f\t", s.Pgbench[n])
	}
	fmt.Fprintln(tw, line)
	tw.Flush()

	fmt.Fprintf(w, "\ncompleted structured turns per second: %.1f\n", s.TurnsPerSec)
	fmt.Fprintf(w, "create-to-receipt latency: p50 %.1f ms, p99 %.1f ms\n", s.P50ms, s.P99ms)
}

// reportDatabase writes the database figures per turn, the ceiling (when
// pgbench ran), chatd's view and the CPU per turn.
func (r *Result) reportDatabase(w io.Writer, rounds []Round, s Summary) {
	o := r.Options
	fmt.Fprintf(w, "database commits per turn: %.2f (all transactions committed in chatd's database), of which %.2f wrote (were assigned a transaction id)\n",
		s.CommitsTurn, s.WritesTurn)
	fmt.Fprintf(w, "new database sessions during the window: %.0f (median per round)\n", s.SessionsPerRound)
	if s.StatementsTurn > 0 {
		fmt.Fprintf(w, "statements per turn (pg_stat_statements): %.1f\n", s.StatementsTurn)
	}
	if len(o.PgbenchClients) > 0 {
		fmt.Fprintf(w, "database ceiling: %.0f commits/s (pgbench, %d clients, one-row UPDATE per transaction, %s runs)\n",
			s.CeilingTPS, o.PgbenchClients[0], o.PgbenchDuration)
		fmt.Fprintf(w, "chatd's load on it: %.0f writing commits/s = %.1f%% of the ceiling (%.0f commits/s in all = %.1f%%)\n",
			s.WriteRate, 100*s.WriteRatio, s.CommitRate, 100*s.CommitRatio)
		fmt.Fprintf(w, "ratio: measured %.1f turns/s vs %.0f turns/s if commits were the only limit (%.0f / %.2f writes per turn): %.2f\n",
			s.TurnsPerSec, s.TurnCeiling, s.CeilingTPS, s.WritesTurn, s.WriteRatio)
	}
	fmt.Fprintf(w, "chatd's own view (median): provider step p50 %.1f ms, POST /api/v1/chats p50 %.1f ms (histogram buckets, interpolated)\n",
		s.ProviderP50ms, s.CreateP50ms)
	if total := s.CPUChatd + s.CPUPostgres + s.CPUMock + s.CPUClients; total > 0 {
		fmt.Fprintf(w, "CPU per turn (median): %.1f ms = chatd %.1f + PostgreSQL %.1f + mockllm %.1f + clients %.1f; %d cores allow %.0f turns/s at that cost\n",
			total, s.CPUChatd, s.CPUPostgres, s.CPUMock, s.CPUClients, r.Machine.Cores, float64(r.Machine.Cores)*1000/total)
	}
	if s.Allocs > 0 {
		fmt.Fprintf(w, "chatd's heap allocations per turn (median): %.0f objects, %.0f KiB (go_memstats, between the window's scrapes)\n", s.Allocs, s.AllocKiB)
	}
	r.reportFloor(w, rounds, s)
	r.reportPurposes(w, rounds)
	if len(rounds) > 0 && len(rounds[len(rounds)-1].Statements) > 0 {
		rd := rounds[len(rounds)-1]
		fmt.Fprintf(w, "\nstatements per turn, last round (pg_stat_statements, %d turns):\n", rd.TotalTurns)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  calls\tms\tstatement\n")
		n := float64(max(rd.TotalTurns, 1))
		for _, st := range rd.Statements {
			fmt.Fprintf(tw, "  %.2f\t%.3f\t%s\n", float64(st.Calls)/n, float64(st.Time.Microseconds())/1000/n, st.Name)
		}
		tw.Flush()
	}
	for i, rd := range rounds {
		if int(rd.ServerCounts) != rd.TotalTurns && rd.Unfinished == 0 {
			fmt.Fprintf(w, "warning: round %d: chatd counted %.0f finished requests, the clients %d\n", i+1, rd.ServerCounts, rd.TotalTurns)
		}
		if rd.Rollbacks > 0 {
			fmt.Fprintf(w, "note: round %d: %d transactions rolled back (fence misses, client disconnects)\n", i+1, rd.Rollbacks)
		}
	}
}

// reportPurposes lists chatd's own count of its committed transactions per
// turn by purpose (median over the rounds); the rest of the database's
// commits are the listening connections' (PostgreSQL delivers
// notifications inside transactions of their own).
func (r *Result) reportPurposes(w io.Writer, rounds []Round) {
	names := map[string]bool{}
	for _, rd := range rounds {
		for p := range rd.Purposes {
			names[p] = true
		}
	}
	if len(names) == 0 {
		return
	}
	type row struct {
		name string
		n    float64
	}
	var rows []row
	var total float64
	for p := range names {
		xs := make([]float64, len(rounds))
		for i, rd := range rounds {
			xs[i] = rd.Purposes[p] / float64(max(rd.TotalTurns, 1))
		}
		rows = append(rows, row{p, median(xs)})
		total += median(xs)
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(b.n, a.n) })
	fmt.Fprintf(w, "\nchatd's transactions per turn by purpose (its own count, median over the rounds): %.2f\n", total)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, x := range rows {
		fmt.Fprintf(tw, "  %.2f\t%s\n", x.n, x.name)
	}
	tw.Flush()
}

// reportFloor writes the floors' figures and chatd's CPU per turn (chatd
// and PostgreSQL) as a multiple of the schema floor's (client and
// PostgreSQL): the median of the rounds' ratios, each round's floors
// having run right after its chatd window, so that the machine's load hits
// both alike.
func (r *Result) reportFloor(w io.Writer, rounds []Round, s Summary) {
	var ratio, pgRatio, bareRatio []float64
	var schema, bare []FloorRun
	for _, rd := range rounds {
		f := rd.Floor
		if f == nil || f.Schema.Turns == 0 || f.Bare.Turns == 0 {
			continue
		}
		chatd := float64(rd.CPU.Chatd + rd.CPU.Postgres)
		ratio = append(ratio, chatd/float64(max(f.Schema.Total(), 1)))
		bareRatio = append(bareRatio, chatd/float64(max(f.Bare.Total(), 1)))
		pgRatio = append(pgRatio, float64(rd.CPU.Postgres)/float64(max(f.Schema.CPU.Postgres, 1)))
		schema, bare = append(schema, f.Schema), append(bare, f.Bare)
	}
	if len(ratio) == 0 {
		return
	}
	for _, fl := range []struct {
		name string
		runs []FloorRun
	}{{"the floor (a bare pgx client writing a turn's rows with chatd's bytes into chatd's schema, triggers and constraints included: " +
		"2 transactions of one round trip each", schema}, {"the bare floor (the same rows in tables without triggers", bare}} {
		col := func(f func(FloorRun) float64) float64 {
			xs := make([]float64, len(fl.runs))
			for i, x := range fl.runs {
				xs[i] = f(x)
			}
			return median(xs)
		}
		c := col(func(x FloorRun) float64 { return float64(x.CPU.Client.Microseconds()) / 1000 })
		p := col(func(x FloorRun) float64 { return float64(x.CPU.Postgres.Microseconds()) / 1000 })
		fmt.Fprintf(w, "%s, %d statements, no reads, limits, HTTP or model): %.0f turns/s with %d clients; CPU per turn %.2f ms = client %.2f + PostgreSQL %.2f\n",
			fl.name, fl.runs[0].Statements, col(func(x FloorRun) float64 { return x.TurnsPerSec }), r.Options.Clients, c+p, c, p)
	}
	fmt.Fprintf(w, "chatd's CPU per turn against the floor: %.2f× (median of the rounds' ratios, range %.2f–%.2f; against the bare floor %.2f×): "+
		"chatd %.2f ms against the floor client's, PostgreSQL %.2f ms, %.2f× the floor's\n",
		median(ratio), slices.Min(ratio), slices.Max(ratio), median(bareRatio), s.CPUChatd, s.CPUPostgres, median(pgRatio))
}
