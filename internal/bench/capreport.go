package bench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// CapacitySummary holds the medians of the capacity figures over the
// rounds.
type CapacitySummary struct {
	// Ideal is the turns per second if every turn lasted exactly the
	// provider latency: clients ÷ latency.
	Ideal, TurnsPerSec, OfIdeal float64
	// P50, P99 are create-to-receipt seconds; Open says that a round's
	// figure was only a lower bound; OfLatency is the figure ÷ the latency.
	P50, P99, P50OfLatency, P99OfLatency float64
	P50Open, P99Open                     bool
	Errors, Unfinished                   float64
	PeakPG, PeakGoroutines, PeakInFlight float64
	GoroutinesBefore                     float64
	RSSBeforeMiB, RSSPeakMiB             float64
	// RSSPerChatKiB is the peak growth of chatd's RSS over the load ÷ the
	// peak of chats in flight.
	RSSPerChatKiB               float64
	PeakProvider, ProviderCalls float64
	Cores                       struct{ Chatd, Postgres, Mock, Clients float64 }
}

// rssPerChat is the RSS growth in KiB per chat in flight.
func (c *Capacity) rssPerChat() float64 {
	if c.PeakInFlight == 0 {
		return 0
	}
	return float64(c.RSSPeak-c.RSSBefore) / float64(c.PeakInFlight)
}

func (r *Result) summarizeCapacity(rounds []Round) CapacitySummary {
	var s CapacitySummary
	col := func(f func(Round, *Capacity) float64) float64 {
		var xs []float64
		for _, rd := range rounds {
			if rd.Capacity != nil {
				xs = append(xs, f(rd, rd.Capacity))
			}
		}
		return median(xs)
	}
	lat := r.Options.ProviderLatency.Seconds()
	s.Ideal = float64(r.Options.Clients) / lat
	s.TurnsPerSec = col(func(rd Round, _ *Capacity) float64 { return rd.TurnsPerSec })
	s.OfIdeal = s.TurnsPerSec / s.Ideal
	s.P50 = col(func(rd Round, _ *Capacity) float64 { return rd.P50.Seconds() })
	s.P99 = col(func(rd Round, _ *Capacity) float64 { return rd.P99.Seconds() })
	s.P50OfLatency, s.P99OfLatency = s.P50/lat, s.P99/lat
	for _, rd := range rounds {
		s.P50Open = s.P50Open || rd.P50Open
		s.P99Open = s.P99Open || rd.P99Open
	}
	s.Errors = col(func(_ Round, c *Capacity) float64 { return float64(c.Errors()) })
	s.Unfinished = col(func(rd Round, _ *Capacity) float64 { return float64(rd.Unfinished) })
	s.PeakPG = col(func(_ Round, c *Capacity) float64 { return float64(c.PeakPG) })
	s.PeakGoroutines = col(func(_ Round, c *Capacity) float64 { return float64(c.PeakGoroutines) })
	s.GoroutinesBefore = col(func(_ Round, c *Capacity) float64 { return float64(c.GoroutinesBefore) })
	s.PeakInFlight = col(func(_ Round, c *Capacity) float64 { return float64(c.PeakInFlight) })
	s.RSSBeforeMiB = col(func(_ Round, c *Capacity) float64 { return float64(c.RSSBefore) / 1024 })
	s.RSSPeakMiB = col(func(_ Round, c *Capacity) float64 { return float64(c.RSSPeak) / 1024 })
	s.RSSPerChatKiB = col(func(_ Round, c *Capacity) float64 { return c.rssPerChat() })
	s.PeakProvider = col(func(_ Round, c *Capacity) float64 { return float64(c.PeakProvider) })
	s.ProviderCalls = col(func(_ Round, c *Capacity) float64 { return float64(c.ProviderCalls) })
	s.Cores.Chatd = col(func(_ Round, c *Capacity) float64 { return c.Cores.Chatd })
	s.Cores.Postgres = col(func(_ Round, c *Capacity) float64 { return c.Cores.Postgres })
	s.Cores.Mock = col(func(_ Round, c *Capacity) float64 { return c.Cores.Mock })
	s.Cores.Clients = col(func(_ Round, c *Capacity) float64 { return c.Cores.Clients })
	return s
}

// seconds prints a latency in seconds, with ">" when it is a lower bound.
func seconds(d time.Duration, open bool) string { return bound(open) + secs(d.Seconds()) }

// secs prints seconds to the hundredth, or the millisecond below 1 s.
func secs(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.3f", s)
	}
	return fmt.Sprintf("%.2f", s)
}

func bound(open bool) string {
	if open {
		return ">"
	}
	return ""
}

// provider describes mockllm's latency.
func (o *Options) provider() string {
	switch {
	case !o.capacity():
		return "mockllm with zero latency"
	case o.ProviderChunks > 0:
		return fmt.Sprintf("mockllm streaming every answer in %d chunks over %s", o.ProviderChunks, o.ProviderLatency)
	}
	return fmt.Sprintf("mockllm answering every call after %s", o.ProviderLatency)
}

// progress is the line printed after each round.
func (rd *Round) progress(o Options) string {
	c := rd.Capacity
	if c == nil {
		line := fmt.Sprintf("%.1f turns/s, p50 %s ms, p99 %s ms, %.2f commits/turn, %.2f writes/turn",
			rd.TurnsPerSec, ms(rd.P50), ms(rd.P99), rd.CommitsTurn, rd.WritesTurn)
		if len(o.PgbenchClients) > 0 {
			line += fmt.Sprintf(", pgbench %.0f tps", rd.Pgbench[o.PgbenchClients[0]])
		}
		return line
	}
	ideal := float64(o.Clients) / o.ProviderLatency.Seconds()
	return fmt.Sprintf("%.1f turns/s of an ideal %.1f (%.2f), p50 %s s, p99 %s s, %d errors, %d unfinished, "+
		"peak %d PostgreSQL connections, %d goroutines, %d provider calls in flight, RSS +%.0f KiB per chat in flight",
		rd.TurnsPerSec, ideal, rd.TurnsPerSec/ideal, seconds(rd.P50, rd.P50Open), seconds(rd.P99, rd.P99Open),
		c.Errors(), rd.Unfinished, c.PeakPG, c.PeakGoroutines, c.PeakProvider, c.rssPerChat())
}

// reportCapacity writes a build's capacity rounds and their medians.
func (r *Result) reportCapacity(w io.Writer, rounds []Round) {
	o := r.Options
	s := r.summarizeCapacity(rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tload avg\tturns\tturns/s\tof ideal\tp50 s\tp99 s\terrors\tunfinished\tPG conns\t"+
		"RSS MiB\tpeak MiB\tKiB/chat\tgoroutines\tprovider calls\t")
	for i, rd := range rounds {
		c := rd.Capacity
		if c == nil {
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.1f\t%.2f\t%s\t%s\t%d\t%d\t%d\t%.1f\t%.1f\t%.0f\t%d\t%d\t\n", i+1, rd.Load, rd.WindowTurns,
			rd.TurnsPerSec, rd.TurnsPerSec/s.Ideal, seconds(rd.P50, rd.P50Open), seconds(rd.P99, rd.P99Open), c.Errors(),
			rd.Unfinished, c.PeakPG, float64(c.RSSBefore)/1024, float64(c.RSSPeak)/1024, c.rssPerChat(), c.PeakGoroutines, c.PeakProvider)
	}
	fmt.Fprintf(tw, "median\t\t\t%.1f\t%.2f\t%s%s\t%s%s\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t\n", s.TurnsPerSec, s.OfIdeal,
		bound(s.P50Open), secs(s.P50), bound(s.P99Open), secs(s.P99), s.Errors, s.Unfinished, s.PeakPG, s.RSSBeforeMiB, s.RSSPeakMiB,
		s.RSSPerChatKiB, s.PeakGoroutines, s.PeakProvider)
	tw.Flush()

	lat := o.ProviderLatency
	fmt.Fprintf(w, "\nprovider latency %s: the ideal is %.1f turns/s (%d clients ÷ %s)\n", lat, s.Ideal, o.Clients, lat)
	fmt.Fprintf(w, "completed structured turns per second: %.1f = %.2f × the ideal\n", s.TurnsPerSec, s.OfIdeal)
	fmt.Fprintf(w, "create-to-receipt latency: p50 %s%s s = %s%.2f × the latency, p99 %s%s s = %s%.2f × the latency\n",
		bound(s.P50Open), secs(s.P50), bound(s.P50Open), s.P50OfLatency, bound(s.P99Open), secs(s.P99), bound(s.P99Open), s.P99OfLatency)
	if s.P50Open || s.P99Open {
		fmt.Fprintf(w, "  (\">\": a lower bound — turns started in the window were still unfinished %s after it and were abandoned)\n", o.Drain)
	}
	fmt.Fprintf(w, "errors: %.0f (median per round); turns abandoned unfinished: %.0f\n", s.Errors, s.Unfinished)
	for i, rd := range rounds {
		if rd.Capacity != nil {
			reportErrors(w, i+1, rd.Capacity)
		}
	}
	fmt.Fprintf(w, "peak PostgreSQL client connections of chatd (pg_stat_activity every 100 ms): %.0f (max_connections %s)\n",
		s.PeakPG, r.Settings["max_connections"])
	fmt.Fprintf(w, "chatd RSS: %.1f MiB before the load, %.1f MiB at its peak; growth ÷ peak chats in flight (%.0f) = %.0f KiB per chat in flight\n",
		s.RSSBeforeMiB, s.RSSPeakMiB, s.PeakInFlight, s.RSSPerChatKiB)
	fmt.Fprintf(w, "chatd goroutines (go_goroutines every second): %.0f before the load, peak %.0f\n", s.GoroutinesBefore, s.PeakGoroutines)
	fmt.Fprintf(w, "provider calls in flight (mockllm's peak): %.0f; %.0f calls during the load\n", s.PeakProvider, s.ProviderCalls)
	fmt.Fprintf(w, "CPU during the load, in cores: chatd %.2f, PostgreSQL %.2f, mockllm %.2f, benchmark clients %.2f (of %d)\n",
		s.Cores.Chatd, s.Cores.Postgres, s.Cores.Mock, s.Cores.Clients, r.Machine.Cores)
	fmt.Fprintln(w)
}

// reportErrors lists a round's errors by HTTP status and receipt status.
func reportErrors(w io.Writer, round int, c *Capacity) {
	var parts []string
	for _, st := range slices.Sorted(maps.Keys(c.HTTPErrors)) {
		e := c.HTTPErrors[st]
		what := fmt.Sprintf("HTTP %d", st)
		if st == 0 {
			what = "no answer"
		}
		parts = append(parts, fmt.Sprintf("%d × %s (%s)", e.N, what, e.Example))
	}
	keys := slices.SortedFunc(maps.Keys(c.Receipts), func(a, b string) int { return cmp.Compare(c.Receipts[b], c.Receipts[a]) })
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d × receipt %s", c.Receipts[k], k))
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "  round %d: %s\n", round, strings.Join(parts, "; "))
	}
}
