// Command chatd-bench is the end-to-end benchmark `make bench` runs: a
// throwaway PostgreSQL cluster, the chatd and mockllm binaries, N clients
// running structured turns, and pgbench on the same cluster for the
// database's commit ceiling. See docs/benchmarks.md and internal/bench.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chatd/chatd/internal/bench"
)

func main() {
	fs := flag.NewFlagSet("chatd-bench", flag.ContinueOnError)
	var o bench.Options
	fs.StringVar(&o.Chatd, "chatd", "bin/chatd", "the chatd binary")
	fs.StringVar(&o.MockLLM, "mockllm", "bin/mockllm", "the mockllm binary")
	fs.StringVar(&o.Baseline, "baseline", "", "another chatd binary to measure in the same run (rounds alternate between the two; ratios are reported)")
	fs.IntVar(&o.Replicas, "replicas", 1, "chatd processes sharing the database (clients are spread over them)")
	fs.IntVar(&o.Clients, "clients", 8, "concurrent chats (each client runs structured turns back to back)")
	fs.IntVar(&o.Workers, "workers", 0, "each replica's --workers (0: as many as --clients)")
	fs.DurationVar(&o.Warmup, "warmup", 3*time.Second, "warm-up before each measured window")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "length of each measured window")
	fs.IntVar(&o.Turns, "turns", 0, "end each window after this many turns instead of --duration")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds (chatd window, then pgbench); medians are reported")
	pgClients := fs.String("pgbench-clients", "", "comma list of pgbench client counts (default: --clients); the first is the ceiling")
	fs.DurationVar(&o.PgbenchDuration, "pgbench-duration", 10*time.Second, "length of each pgbench run")
	fs.BoolVar(&o.Fast, "fast", false, "run PostgreSQL with fsync and synchronous_commit off")
	fs.BoolVar(&o.Keep, "keep", false, "keep the work directory (cluster, chatd and mockllm logs)")
	fs.BoolVar(&o.Statements, "statements", true, "load pg_stat_statements (when installed) and report the statements per turn")
	o.Settings = map[string]string{}
	fs.Func("set", "a PostgreSQL setting name=value for the cluster (repeatable), e.g. --set commit_delay=100", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return fmt.Errorf("want name=value, not %q", v)
		}
		o.Settings[k] = val
		return nil
	})
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *pgClients != "" {
		for _, f := range strings.Split(*pgClients, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				fmt.Fprintf(os.Stderr, "chatd-bench: --pgbench-clients: %q is not a positive number\n", f)
				os.Exit(2)
			}
			o.PgbenchClients = append(o.PgbenchClients, n)
		}
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
