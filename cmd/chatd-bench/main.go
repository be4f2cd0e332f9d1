// Command chatd-bench is the end-to-end benchmark `make bench` runs: a
// throwaway PostgreSQL cluster, the chatd and mockllm binaries, N clients
// running structured turns, and pgbench on the same cluster for the
// database's commit ceiling. See docs/benchmarks.md and internal/bench.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chatd/chatd/internal/bench"
)

func main() {
	o, err := parse(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chatd-bench:", err)
		os.Exit(2)
	}
	o.Progress = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := bench.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chatd-bench:", err)
		os.Exit(1)
	}
	res.Report(os.Stdout)
}

// parse reads the flags; usage and flag errors go to stderr.
func parse(args []string, stderr io.Writer) (bench.Options, error) {
	fs := flag.NewFlagSet("chatd-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o bench.Options
	fs.StringVar(&o.Chatd, "chatd", "bin/chatd", "the chatd binary")
	fs.StringVar(&o.MockLLM, "mockllm", "bin/mockllm", "the mockllm binary")
	fs.StringVar(&o.Baseline, "baseline", "", "another chatd binary to measure in the same run (rounds alternate between the two; ratios are reported)")
	fs.IntVar(&o.Replicas, "replicas", 1, "chatd processes sharing the database (clients are spread over them)")
	fs.IntVar(&o.Clients, "clients", 8, "concurrent chats (each client runs structured turns back to back)")
	fs.IntVar(&o.Users, "users", 1, "users the clients are spread over, a token each (client i is user i mod --users)")
	fs.IntVar(&o.Workers, "workers", 0, "each replica's --workers (0: enough for every client's turn at once, the slot kept for users with nothing running included; -1: no --workers flag, chatd's default)")
	fs.Func("server-flag", "a flag for the chatd under test, after the others (repeatable), e.g. --server-flag=--max-running=8", func(v string) error {
		o.ServerFlags = append(o.ServerFlags, v)
		return nil
	})
	fs.Func("baseline-server-flag", "a flag for the --baseline chatd (repeatable), e.g. --baseline-server-flag=--workers=256", func(v string) error {
		o.BaselineFlags = append(o.BaselineFlags, v)
		return nil
	})
	fs.DurationVar(&o.ProviderLatency, "provider-latency", 0, "how long mockllm takes over every provider call (0: it answers at once); "+
		"with a latency the run measures capacity: errors are counted, peaks sampled")
	fs.IntVar(&o.ProviderChunks, "provider-chunks", 0, "stream each answer in this many chunks spread over --provider-latency (0: whole, after it)")
	fs.DurationVar(&o.Ramp, "ramp", -1, "spread the clients' first turns over this long (default: --provider-latency)")
	fs.DurationVar(&o.Drain, "drain", 0, "after the window, wait at most this long for the turns in flight, then abandon them "+
		"(default: no bound without a latency, else 3 latencies and at least 60s)")
	fs.DurationVar(&o.Warmup, "warmup", 3*time.Second, "warm-up before each measured window (with a latency: by 8 clients at most)")
	fs.DurationVar(&o.Duration, "duration", 0, "length of each measured window (default 10s; with a latency of 1s or more, 6 latencies and at least 60s)")
	fs.IntVar(&o.Turns, "turns", 0, "end each window after this many turns instead of --duration")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds (chatd window, then pgbench); medians are reported")
	pgClients := fs.String("pgbench-clients", "", "comma list of pgbench client counts (default: --clients, none with a latency); the first is the ceiling")
	fs.DurationVar(&o.PgbenchDuration, "pgbench-duration", 10*time.Second, "length of each pgbench run")
	fs.DurationVar(&o.FloorDuration, "floor-duration", 5*time.Second, "length of each round's floor run: a bare pgx client writing a turn's rows, "+
		"against which chatd's CPU per turn is reported (negative: no floor; none with --provider-latency)")
	fs.BoolVar(&o.Fast, "fast", false, "run PostgreSQL with fsync and synchronous_commit off")
	fs.StringVar(&o.OTLPSink, "otlp-sink", "", "serve an OTLP/HTTP trace sink on this address (e.g. 127.0.0.1:4318) for a traced chatd to export to; "+
		"the report counts the spans it received")
	fs.BoolVar(&o.Keep, "keep", false, "keep the work directory (cluster, chatd and mockllm logs)")
	fs.BoolVar(&o.Statements, "statements", true, "load pg_stat_statements (when installed) and report the statements per turn")
	fs.IntVar(&o.SeedChats, "seed-chats", 0, "write this many chats at rest into each round's database before its window, and report "+
		"what the retention sweep did with them (give the build under test --server-flag=--retain-chats=1h); lock waits over 100 ms are counted")
	fs.DurationVar(&o.SeedAge, "seed-age", 48*time.Hour, "how long ago the seeded chats last changed")
	o.Settings = map[string]string{}
	fs.Func("set", "a PostgreSQL setting name=value for the cluster (repeatable), e.g. --set commit_delay=100", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return fmt.Errorf("want name=value, not %q", v)
		}
		o.Settings[k] = val
		return nil
	})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w (see --help)", err)
	}
	if *pgClients != "" {
		for _, f := range strings.Split(*pgClients, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return o, fmt.Errorf("--pgbench-clients: %q is not a positive number", f)
			}
			o.PgbenchClients = append(o.PgbenchClients, n)
		}
	}
	return o, check(fs, o)
}

// check refuses flag values the benchmark cannot run with.
func check(fs *flag.FlagSet, o bench.Options) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	switch {
	case o.Clients < 1:
		return fmt.Errorf("--clients must be at least 1, not %d", o.Clients)
	case o.Users < 1 || o.Users > o.Clients:
		return fmt.Errorf("--users must be between 1 and --clients (%d), not %d", o.Clients, o.Users)
	case o.Workers < -1:
		return fmt.Errorf("--workers must be -1 (chatd's default), 0 (as many as --clients) or positive, not %d", o.Workers)
	case o.ProviderLatency < 0:
		return fmt.Errorf("--provider-latency must not be negative, not %s", o.ProviderLatency)
	case o.ProviderChunks < 0:
		return fmt.Errorf("--provider-chunks must not be negative, not %d", o.ProviderChunks)
	case o.ProviderChunks > 0 && o.ProviderLatency == 0:
		return errors.New("--provider-chunks needs a --provider-latency to spread the chunks over")
	case o.Drain < 0:
		return fmt.Errorf("--drain must not be negative, not %s", o.Drain)
	}
	for _, f := range append(slices.Clone(o.ServerFlags), o.BaselineFlags...) {
		if !strings.HasPrefix(f, "-") {
			return fmt.Errorf("a server flag starts with -, as in --server-flag=--max-running=8, not %q", f)
		}
	}
	return nil
}
