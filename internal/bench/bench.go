// Package bench is the end-to-end benchmark behind `make bench`: a
// throwaway PostgreSQL cluster (internal/pglocal), the chatd and mockllm
// binaries, and N clients each running structured turns back to back — a
// new chat whose first message carries a json_schema response_format, then
// a long poll until its receipt. It reports completed turns per second, the
// create-to-receipt latency, the database commits per turn, and pgbench's
// commit rate on the same cluster as the database's ceiling.
//
// Method, in rounds (medians are reported):
//
//  1. Start chatd and warm up (connections opened, statements prepared),
//     then stay idle for 11 s: PostgreSQL 15 flushes an idle backend's
//     statistics within 10 s. Read pg_stat_database.xact_commit of the
//     chatd database and the cluster's next transaction id.
//  2. Measure a window, stop starting turns, let those in flight finish,
//     scrape /metrics, stop chatd (SIGTERM).
//  3. Once no chatd backend is connected (a backend flushes its statistics
//     when it exits), read both figures again. The commit delta divided by
//     the turns of step 2 is the commits per turn; the transaction id delta
//     likewise is the writing transactions per turn (a transaction gets an
//     id only when it writes or notifies).
//  4. Run pgbench on the same cluster, chatd stopped: one-row UPDATE
//     transactions, each client on a row of its own.
package bench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/handoff"
	"github.com/chatd/chatd/internal/pglocal"
	"github.com/chatd/chatd/internal/prom"
)

// Options configure a run.
type Options struct {
	// Chatd and MockLLM are the binaries to run.
	Chatd, MockLLM string
	// Baseline, when set, is another chatd binary measured in the same run:
	// every round runs both, in alternating order, each on a database of its
	// own in the same cluster, so that the machine's load affects both.
	Baseline string
	// OTLPSink, when set, is an address to serve an OTLP/HTTP trace sink
	// on for the run, for a traced chatd under test to export to
	// (OTEL_EXPORTER_OTLP_ENDPOINT=http://OTLPSink); the report counts
	// the spans it received.
	OTLPSink string
	// Replicas is how many chatd processes share the database; the clients
	// are spread over them (default 1).
	Replicas int
	// Clients run turns concurrently, each on a chat of its own.
	Clients int
	// Users spread the clients: client i runs as user i mod Users, each
	// user with a token of its own (default 1, the user "bench").
	Users int
	// Workers is each replica's --workers (0: enough for every client's
	// turn to run at once, the slot kept for users with nothing running
	// included; -1: no --workers flag at all, chatd's default).
	Workers int
	// ServerFlags are passed to the chatd under test after the others,
	// BaselineFlags to the baseline.
	ServerFlags, BaselineFlags []string
	// ProviderLatency is how long mockllm takes over every provider call
	// (0: it answers at once, the zero-latency benchmark). With a latency
	// the run measures capacity (Capacity in each Round): errors are
	// counted instead of ending the run, and the peaks are sampled.
	ProviderLatency time.Duration
	// ProviderChunks, when positive, streams each answer in that many
	// chunks spread over ProviderLatency instead of sending it whole after
	// it; a call lasts ProviderLatency either way.
	ProviderChunks int
	// Ramp spreads the clients' first turns over this long (negative: over
	// ProviderLatency). The window starts max(Ramp, ProviderLatency) after
	// the first client, once every client is in its loop.
	Ramp time.Duration
	// Drain bounds the wait for the turns in flight after a window; those
	// still unfinished then are abandoned and reported (0: no bound
	// without a latency, else max(60 s, 3 × ProviderLatency)).
	Drain time.Duration
	// Warmup precedes each measured window; Duration is its length (0:
	// 10 s, or 6 latencies and at least 60 s with a ProviderLatency of 1 s
	// or more).
	Warmup, Duration time.Duration
	// Turns, when positive, ends each window after that many completed
	// turns instead of after Duration.
	Turns int
	// Rounds of (chatd, pgbench) to run; medians are reported.
	Rounds int
	// PgbenchClients are the client counts pgbench runs with each round
	// (default: Clients; none with a ProviderLatency).
	PgbenchClients []int
	// PgbenchDuration is how long each pgbench run lasts.
	PgbenchDuration time.Duration
	// FloorDuration is how long the floor runs each round (Floor; 0:
	// 5 s, negative: not at all). Without a provider latency only.
	FloorDuration time.Duration
	// Fast turns fsync and synchronous_commit off (the test clusters'
	// settings); the default is PostgreSQL's durable defaults.
	Fast bool
	// Keep leaves the work directory (logs, cluster) in place.
	Keep bool
	// Settings are extra PostgreSQL settings (name → value).
	Settings map[string]string
	// Statements loads pg_stat_statements, when the installation has it,
	// and reports each round's statements per turn.
	Statements bool
	// SeedChats, when positive, writes that many chats at rest, SeedAge
	// old (default 48 h), into each round's database just before its
	// window, and reports what the retention sweep (a build's
	// --retain-chats) did with them; lock waits over 100 ms are logged
	// (log_lock_waits, deadlock_timeout=100ms) and counted.
	SeedChats int
	SeedAge   time.Duration
	// Progress receives progress lines (nil: discarded).
	Progress io.Writer
}

func (o *Options) defaults() {
	if o.Clients <= 0 {
		o.Clients = 8
	}
	switch {
	case o.Workers == 0:
		o.Workers = slotsFor(o.Clients)
	case o.Workers < 0:
		o.Workers = -1
	}
	if o.Users <= 0 {
		o.Users = 1
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	o.ProviderLatency = max(o.ProviderLatency, 0)
	o.ProviderChunks = max(o.ProviderChunks, 0)
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
		if o.ProviderLatency >= time.Second {
			o.Duration = max(60*time.Second, 6*o.ProviderLatency)
		}
	}
	if o.Ramp < 0 {
		o.Ramp = o.ProviderLatency
	}
	if o.Drain <= 0 && o.ProviderLatency > 0 {
		o.Drain = max(60*time.Second, 3*o.ProviderLatency)
	}
	if o.Warmup < 0 {
		o.Warmup = 0
	}
	if o.Rounds <= 0 {
		o.Rounds = 3
	}
	if len(o.PgbenchClients) == 0 && o.ProviderLatency == 0 {
		o.PgbenchClients = []int{o.Clients}
	}
	if o.PgbenchDuration <= 0 {
		o.PgbenchDuration = 10 * time.Second
	}
	if o.FloorDuration == 0 {
		o.FloorDuration = 5 * time.Second
	}
	if o.capacity() {
		o.FloorDuration = -1
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.SeedChats > 0 && o.SeedAge <= 0 {
		o.SeedAge = 48 * time.Hour
	}
}

// slotsFor is the least --max-running whose slots, less those chatd keeps
// for users with nothing running (handoff.Headroom), run n turns at once.
// An older build that keeps fewer gets spare slots, which cost nothing.
func slotsFor(n int) int {
	w := n
	for w-handoff.Headroom(w) < n {
		w++
	}
	return w
}

// serverFlags are the flags a build's chatd gets beyond the benchmark's
// own: --workers unless -1, then extra.
func (o *Options) serverFlags(extra []string) []string {
	var flags []string
	if o.Workers >= 0 {
		flags = append(flags, "--workers", fmt.Sprint(o.Workers))
	}
	return append(flags, extra...)
}

// userName is the name of user u of n: "bench" alone, else bench-1 to
// bench-n.
func userName(u, n int) string {
	if n == 1 {
		return "bench"
	}
	return fmt.Sprintf("bench-%d", u+1)
}

// capacity reports whether the run measures capacity: a provider latency.
func (o *Options) capacity() bool { return o.ProviderLatency > 0 }

// pollWait is each long poll's ?wait=: longer than a step, so that a turn
// normally costs one poll (chatd caps it at 60 s; a pending answer is
// polled again).
func (o *Options) pollWait() time.Duration {
	if o.capacity() {
		return o.ProviderLatency + 30*time.Second
	}
	return 30 * time.Second
}

// lead is the time from the first client's start to the window's: the ramp
// and one latency, after which every client is in its loop and receipts
// arrive at the steady rate.
func (o *Options) lead() time.Duration {
	if !o.capacity() {
		return 0
	}
	return max(o.Ramp, o.ProviderLatency)
}

// Round is what one round measured of one build.
type Round struct {
	Load        string        // load average when the round started
	WindowTurns int           // turns whose receipt arrived inside the window
	Window      time.Duration // the window's actual length
	TurnsPerSec float64
	P50, P99    time.Duration // create-to-receipt, of turns started inside the window
	// P50Open and P99Open say that the percentile is only a lower bound:
	// a turn abandoned unfinished is at or below its rank.
	P50Open, P99Open bool
	Samples          int // latency samples
	TotalTurns       int // every finished turn between the two readings (window and drain)
	Failed           int // turns whose receipt was not succeeded
	// Unfinished are the turns abandoned without a receipt at the end of
	// the drain (with a latency only: without, the drain has no bound).
	Unfinished   int
	Commits      int64 // xact_commit delta of the build's database
	Rollbacks    int64
	Writes       int64 // transaction ids assigned in the cluster
	Sessions     int64 // database sessions opened during the window (pg_stat_database.sessions)
	CommitsTurn  float64
	WritesTurn   float64
	Pgbench      map[int]float64 // clients → tps
	Floor        *Floor          // the round's floor (nil: not run)
	ServerCounts float64         // chatd's own count of requests it finished in the window (a cross-check)
	Statements   []Statement     // with Options.Statements
	// Purposes are chatd's own count of its transactions in the window, by
	// purpose (chatd_db_transactions_total; empty for builds without it).
	Purposes map[string]float64
	// CPU is the CPU time per turn of each participant between the two
	// readings (Linux only; zero elsewhere).
	CPU struct{ Chatd, Postgres, Mock, Clients time.Duration }
	// Allocs and AllocBytes are chatd's Go heap allocations per finished
	// request (its own count, between the window's two scrapes).
	Allocs, AllocBytes float64
	ProviderP50        float64 // seconds, from chatd's histogram (bucket interpolation)
	CreateP50          float64 // seconds, POST /api/v1/chats as chatd timed it
	// Capacity holds the figures of a run with a provider latency (nil
	// without).
	Capacity *Capacity
	// Sweep is what the retention sweep did with the seeded chats (nil
	// without Options.SeedChats).
	Sweep *Sweep
}

// Build is one chatd binary's part of a run.
type Build struct {
	Name   string // "chatd", or "baseline"
	Chatd  string
	Flags  []string // the server flags the benchmark passed (with --workers)
	DB     string   // its database in the cluster
	Rounds []Round
}

// Result is a whole run.
type Result struct {
	Options  Options
	Machine  Machine
	Postgres string            // server_version
	Settings map[string]string // relevant server settings
	// Builds are the measured binaries: the chatd under test first, then
	// the baseline, if any.
	Builds []*Build
	// Rounds are the first build's rounds (its pgbench figures are the
	// round's).
	Rounds []Round
	// Sink is the OTLP sink the run served (Options.OTLPSink), or nil.
	Sink *OTLPSink
}

// Run runs the benchmark.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	res := &Result{Options: o, Machine: readMachine(), Builds: o.builds()}
	pgbench, err := checkInputs(&o, res)
	if err != nil {
		return nil, err
	}
	if o.OTLPSink != "" {
		stop, err := serveSink(o.OTLPSink, res)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	work, err := workDir(o)
	if err != nil {
		return nil, err
	}
	if !o.Keep {
		defer os.RemoveAll(work)
	}
	cluster, err := startCluster(ctx, o, work)
	if err != nil {
		return nil, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = cluster.Stop(stopCtx)
	}()
	admin, err := openAdmin(ctx, o, cluster, res)
	if err != nil {
		return nil, err
	}
	defer admin.Close(context.Background())
	mock, mockURL, err := startMock(ctx, o.MockLLM, mockArgs(o.ProviderLatency, o.ProviderChunks), filepath.Join(work, "mockllm.log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = mock.stop() }()
	cfgPath, err := writeMockConfig(work, mockURL)
	if err != nil {
		return nil, err
	}
	br := &benchRun{o: o, res: res, cluster: cluster, work: work, cfgPath: cfgPath, pgbench: pgbench,
		envs: map[*Build]roundEnv{},
		base: roundEnv{admin: admin, sampleURL: cluster.URL("postgres"), mockPID: mock.cmd.Process.Pid,
			mockBase: strings.TrimSuffix(mockURL, "/v1"), postmaster: postmasterPID(cluster.Dir()),
			pgLog: filepath.Join(work, "pg", "postgres.log")}}
	if err := br.prepareAll(ctx); err != nil {
		return nil, err
	}
	for i := range o.Rounds {
		if err := br.round(ctx, i); err != nil {
			return nil, err
		}
	}
	res.Rounds = res.Builds[0].Rounds
	return res, nil
}

// builds are the chatd binaries the run compares: the one under test and
// the baseline, if any.
func (o Options) builds() []*Build {
	bs := []*Build{{Name: "chatd", Chatd: o.Chatd, DB: "chatd", Flags: o.serverFlags(o.ServerFlags)}}
	if o.Baseline != "" {
		bs = append(bs, &Build{Name: "baseline", Chatd: o.Baseline, DB: "chatd_baseline", Flags: o.serverFlags(o.BaselineFlags)})
	}
	return bs
}

// workDir makes the run's directory, which the cluster's account enters.
func workDir(o Options) (string, error) {
	work, err := os.MkdirTemp("", "chatd-bench-")
	if err != nil {
		return "", err
	}
	_ = os.Chmod(work, 0o755)
	fmt.Fprintf(o.Progress, "bench: work directory %s\n", work)
	return work, nil
}

// checkInputs checks that the binaries exist and finds pgbench; without
// pg_stat_statements installed, the run goes on without statement counts.
func checkInputs(o *Options, res *Result) (pgbench string, err error) {
	for _, bin := range []string{o.Chatd, o.MockLLM, o.Baseline} {
		if bin == "" {
			continue
		}
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%w (run make build first)", err)
		}
	}
	binDir, err := pglocal.FindBinaries()
	if err != nil {
		return "", err
	}
	pgbench = filepath.Join(binDir, "pgbench")
	if _, err := os.Stat(pgbench); err != nil {
		return "", fmt.Errorf("pgbench not found next to postgres in %s", binDir)
	}
	if o.Statements {
		if _, err := os.Stat(filepath.Join(binDir, "..", "lib", "pg_stat_statements.so")); err != nil {
			fmt.Fprintf(o.Progress, "bench: pg_stat_statements is not installed next to %s: no statement counts\n", binDir)
			o.Statements = false
			res.Options.Statements = false
		}
	}
	return pgbench, nil
}

// startCluster starts the run's PostgreSQL: durable by default, said
// explicitly (pglocal's throwaway clusters turn durability off).
func startCluster(ctx context.Context, o Options, work string) (*pglocal.Cluster, error) {
	durable := map[bool]string{true: "off", false: "on"}[o.Fast]
	settings := map[string]string{"max_connections": "300",
		"fsync": durable, "synchronous_commit": durable, "full_page_writes": durable}
	if o.Statements {
		settings["shared_preload_libraries"] = "pg_stat_statements"
	}
	if o.SeedChats > 0 {
		settings["log_lock_waits"], settings["deadlock_timeout"] = "on", "100ms"
	}
	for k, v := range o.Settings {
		settings[k] = v
	}
	return pglocal.Start(ctx, pglocal.Options{Dir: filepath.Join(work, "pg"), Ephemeral: !o.Keep, Settings: settings})
}

// openAdmin creates the run's databases and connects to the cluster as its
// administrator, recording its version and settings in res.
func openAdmin(ctx context.Context, o Options, cluster *pglocal.Cluster, res *Result) (*pgx.Conn, error) {
	dbs := []string{"pgbench", "floor", "floor_bare"}
	for _, b := range res.Builds {
		dbs = append(dbs, b.DB)
	}
	for _, db := range dbs {
		if err := cluster.EnsureDatabase(ctx, db); err != nil {
			return nil, err
		}
	}
	admin, err := pgx.Connect(ctx, cluster.URL("postgres"))
	if err != nil {
		return nil, err
	}
	err = func() error {
		if o.Statements {
			if _, err := admin.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
				return err
			}
		}
		if err := admin.QueryRow(ctx, "SHOW server_version").Scan(&res.Postgres); err != nil {
			return err
		}
		res.Settings, err = readSettings(ctx, admin)
		return err
	}()
	if err != nil {
		admin.Close(context.Background())
		return nil, err
	}
	return admin, nil
}

// writeMockConfig writes the chatd config that points at mockllm.
func writeMockConfig(work, mockURL string) (string, error) {
	cfgPath := filepath.Join(work, "chatd.json")
	cfg := fmt.Sprintf(`{"providers":[{"name":"mock","type":"openai-compatible","base_url":%q,"api_key_env":"BENCH_UNUSED_KEY"}],
  "models":[{"id":"bench/mock","provider":"mock","model":"mock-1","context_window":32768,"max_output_tokens":4096}],
  "default_model":"bench/mock"}`, mockURL)
	return cfgPath, os.WriteFile(cfgPath, []byte(cfg), 0o644)
}

// benchRun is a run's shared state between its rounds.
type benchRun struct {
	o       Options
	res     *Result
	cluster *pglocal.Cluster
	work    string
	cfgPath string
	pgbench string
	base    roundEnv
	envs    map[*Build]roundEnv
}

// prepare gives build b the database db: its schema and a token per user.
func (br *benchRun) prepare(ctx context.Context, b *Build, db string) (roundEnv, error) {
	if err := br.cluster.EnsureDatabase(ctx, db); err != nil {
		return roundEnv{}, err
	}
	env := br.base
	env.db = db
	env.ch = &chatdRunner{bin: b.Chatd, dbURL: br.cluster.URL(db), config: br.cfgPath, flags: b.Flags, replicas: br.o.Replicas,
		logPath: filepath.Join(br.work, b.Name+".log")}
	tokens, err := prepareDB(ctx, b.Chatd, env.ch.dbURL, br.o.Users)
	env.tokens = tokens
	return env, err
}

// prepareAll prepares each build's database, pgbench's and the floor's.
func (br *benchRun) prepareAll(ctx context.Context) error {
	for _, b := range br.res.Builds {
		env, err := br.prepare(ctx, b, b.DB)
		if err != nil {
			return err
		}
		br.envs[b] = env
	}
	if err := preparePgbench(ctx, br.cluster.URL("pgbench"), maxInt(br.o.PgbenchClients)); err != nil {
		return err
	}
	if br.o.FloorDuration >= 0 { // the floor writes into the schema of the build under test
		if _, err := prepareDB(ctx, br.o.Chatd, br.cluster.URL("floor"), 1); err != nil {
			return err
		}
	}
	return nil
}

// round runs round i: each build (in alternating order, so that drift in
// the load hits both alike), pgbench and the floor. With a latency, each
// round gets a database of its own: turns abandoned in one round would
// otherwise be the next one's backlog.
func (br *benchRun) round(ctx context.Context, i int) error {
	o := br.o
	order := slices.Clone(br.res.Builds)
	if i%2 == 1 {
		slices.Reverse(order)
	}
	rounds := map[*Build]*Round{}
	for _, b := range order {
		fmt.Fprintf(o.Progress, "bench: round %d: %s\n", i+1, b.Name)
		env := br.envs[b]
		if o.capacity() && i > 0 {
			var err error
			if env, err = br.prepare(ctx, b, fmt.Sprintf("%s_%d", b.DB, i+1)); err != nil {
				return err
			}
		}
		r, err := runRound(ctx, o, env)
		if err != nil {
			return fmt.Errorf("round %d (%s): %w", i+1, b.Name, err)
		}
		rounds[b] = r
	}
	pg := map[int]float64{}
	for _, n := range o.PgbenchClients {
		fmt.Fprintf(o.Progress, "bench: round %d: pgbench with %d clients for %s\n", i+1, n, o.PgbenchDuration)
		tps, err := runPgbench(ctx, br.pgbench, br.cluster.URL("pgbench"), n, o.PgbenchDuration, br.work)
		if err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
		pg[n] = tps
	}
	floor, err := runFloorRound(ctx, o, br.cluster, br.res.Builds[0].DB, br.base.postmaster, i)
	if err != nil {
		return fmt.Errorf("round %d: %w", i+1, err)
	}
	for _, b := range br.res.Builds {
		r := rounds[b]
		r.Pgbench, r.Floor = pg, floor
		b.Rounds = append(b.Rounds, *r)
		fmt.Fprintf(o.Progress, "bench: round %d: %s: %s\n", i+1, b.Name, r.progress(o))
	}
	return nil
}

// prepareDB migrates a build's database up and creates a token for each
// user.
func prepareDB(ctx context.Context, chatd, dbURL string, users int) ([]string, error) {
	out, err := exec.CommandContext(ctx, chatd, "migrate", "up", "--database-url", dbURL).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s migrate up: %w: %s", chatd, err, out)
	}
	var tokens []string
	for u := range users {
		out, err = exec.CommandContext(ctx, chatd, "token", "create", "--user", userName(u, users), "--database-url", dbURL).Output()
		if err != nil {
			return nil, fmt.Errorf("%s token create: %w", chatd, err)
		}
		tokens = append(tokens, strings.TrimSpace(string(out)))
	}
	return tokens, nil
}

func readSettings(ctx context.Context, admin *pgx.Conn) (map[string]string, error) {
	out := map[string]string{}
	rows, err := admin.Query(ctx, `SELECT name, setting || coalesce(unit, '') FROM pg_settings
		WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', 'wal_level',
		               'max_connections', 'autovacuum', 'commit_delay', 'wal_sync_method')`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

func maxInt(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// Statement is one normalised statement of a round, from pg_stat_statements.
type Statement struct {
	Name  string // the sqlc query name, or the statement's first line
	Calls int64
	Time  time.Duration // planning and execution, summed over the calls
}

// statementName is the sqlc name of a query ("-- name: ChatGet :one") or
// its text, shortened.
func statementName(q string) string {
	q = strings.TrimSpace(q)
	if rest, ok := strings.CutPrefix(q, "-- name: "); ok {
		name, _, _ := strings.Cut(rest, " ")
		return name
	}
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 70 {
		q = q[:70] + "…"
	}
	return q
}

func readStatements(ctx context.Context, admin *pgx.Conn, db string) ([]Statement, error) {
	rows, err := admin.Query(ctx, `SELECT s.query, sum(s.calls)::bigint, sum(s.total_plan_time + s.total_exec_time)::float8
		FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
		WHERE d.datname = $1 GROUP BY s.query ORDER BY 2 DESC`, db)
	if err != nil {
		return nil, err
	}
	byName := map[string]*Statement{}
	var order []string
	for rows.Next() {
		var q string
		var calls int64
		var ms float64
		if err := rows.Scan(&q, &calls, &ms); err != nil {
			return nil, err
		}
		n := statementName(q)
		if _, ok := byName[n]; !ok {
			order = append(order, n)
			byName[n] = &Statement{Name: n}
		}
		byName[n].Calls += calls
		byName[n].Time += time.Duration(ms * float64(time.Millisecond))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]Statement, 0, len(order))
	for _, n := range order {
		out = append(out, *byName[n])
	}
	slices.SortStableFunc(out, func(a, b Statement) int { return cmp.Compare(b.Calls, a.Calls) })
	return out, nil
}

// counters are the database figures read around a round.
type counters struct {
	commits, rollbacks, sessions, nextXID int64
}

// snapshot reads the database's committed and rolled back transactions, the
// sessions opened in it, and the next transaction id. With closed, it first
// waits until no client backend is connected to the database: a backend
// flushes its statistics when it exits, so they are then complete.
func snapshot(ctx context.Context, admin *pgx.Conn, db string, closed bool) (counters, error) {
	var c counters
	deadline := time.Now().Add(60 * time.Second)
	for closed {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = $1 AND backend_type = 'client backend'`, db).Scan(&n); err != nil {
			return c, err
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return c, errors.New("chatd's database connections did not close within 60s")
		}
		time.Sleep(10 * time.Millisecond) // polling PostgreSQL, not synchronising goroutines
	}
	// This session caches statistics per transaction; read them afresh.
	if _, err := admin.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return c, err
	}
	err := admin.QueryRow(ctx, `SELECT xact_commit, xact_rollback, sessions,
		pg_snapshot_xmax(pg_current_snapshot())::text::bigint
		FROM pg_stat_database WHERE datname = $1`, db).Scan(&c.commits, &c.rollbacks, &c.sessions, &c.nextXID)
	return c, err
}

// statsSettle is how long the round waits, idle, after its warm-up before
// reading the statistics: PostgreSQL 15 flushes an idle backend's pending
// statistics at most 10 s after its last transaction.
const statsSettle = 11 * time.Second

// serverView is what the replicas' /metrics say, summed.
type serverView struct {
	finished float64
	purposes map[string]float64 // committed transactions by purpose
	provider float64            // provider step p50, seconds (first replica)
	create   float64            // POST /api/v1/chats p50, seconds (first replica)
	// mallocs and allocBytes are the Go heap allocations so far (every
	// replica's): deterministic where CPU time is not.
	mallocs, allocBytes float64
}

func scrape(ctx context.Context, cs []*client.Client) serverView {
	v := serverView{purposes: map[string]float64{}}
	for i, c := range cs {
		body, err := c.Metrics(ctx)
		if err != nil {
			continue
		}
		s, err := prom.Parse(strings.NewReader(string(body)))
		if err != nil {
			continue
		}
		n, _ := s.Get("chatd_structured_requests_finished_total")
		v.finished += n
		n, _ = s.Get("go_memstats_mallocs_total")
		v.mallocs += n
		n, _ = s.Get("go_memstats_alloc_bytes_total")
		v.allocBytes += n
		for _, smp := range s.Series("chatd_db_transactions_total") {
			if smp.Labels["outcome"] == "commit" {
				v.purposes[smp.Labels["purpose"]] += smp.Value
			}
		}
		if i == 0 {
			v.provider, _ = s.Quantile("chatd_provider_call_duration_seconds", 0.5, "call", "step")
			v.create, _ = s.Quantile("chatd_http_request_duration_seconds", 0.5, "route", "/api/v1/chats", "method", "POST")
		}
	}
	return v
}

// roundEnv is what the rounds of one build run against.
type roundEnv struct {
	ch         *chatdRunner
	db         string    // the build's database
	admin      *pgx.Conn // on the postgres database
	sampleURL  string    // the postgres database, for the sampling connection
	tokens     []string  // one per user
	mockPID    int
	mockBase   string // mockllm's URL without /v1
	postmaster int
	pgLog      string // the cluster's log
}

func runRound(ctx context.Context, o Options, env roundEnv) (*Round, error) {
	r := &Round{Load: loadAverage()}
	bases, err := env.ch.start(ctx)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = env.ch.stop()
		}
	}()
	// One transport for every client, keeping a connection per client
	// between its calls.
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConns: 4 * o.Clients, MaxIdleConnsPerHost: 4 * o.Clients}}
	cs, firsts := roundClients(bases, env.tokens, httpc)
	if err := warmUp(ctx, o, cs); err != nil {
		return nil, err
	}
	st, err := startMeasuring(ctx, o, env, firsts)
	if err != nil {
		return nil, err
	}
	logAt, err := r.seedSweep(ctx, o, env)
	if err != nil {
		return nil, err
	}
	l := load{clients: cs, n: o.Clients, window: o.Duration, maxTurns: o.Turns, wait: o.pollWait()}
	pk, err := r.startCapacity(ctx, o, env, &l, httpc, st.pids, firsts)
	if err != nil {
		return nil, err
	}
	turns, windowStart, windowEnd, err := drive(ctx, l)
	if pk != nil {
		r.finishCapacity(ctx, pk, l, httpc, env.mockBase)
	}
	if err != nil {
		return nil, err
	}
	r.finishSweep(ctx, env, firsts, logAt, pk)
	// chatd's own view, then stop it: its backends exit and flush.
	r.chatdView(st.view, scrape(ctx, firsts))
	httpc.CloseIdleConnections()
	stopped = true
	after, cpu1, wall, err := r.stopAndRead(ctx, o, env, st)
	if err != nil {
		return nil, err
	}
	r.count(turns, windowStart, windowEnd)
	r.perTurn(st.before, after, st.cpu, cpu1, wall)
	if r.Failed > 0 && !o.capacity() {
		return nil, fmt.Errorf("%d of %d turns did not succeed (see the chatd log)", r.Failed, r.TotalTurns)
	}
	return r, nil
}

// measureStart is what a round's figures are measured from.
type measureStart struct {
	before counters
	view   serverView
	pids   []int
	cpu    cpuSample
	at     time.Time
}

// startMeasuring reads the database's counters, chatd's metrics and the
// CPU used so far, and resets pg_stat_statements.
func startMeasuring(ctx context.Context, o Options, env roundEnv, firsts []*client.Client) (measureStart, error) {
	var st measureStart
	var err error
	if st.before, err = snapshot(ctx, env.admin, env.db, false); err != nil {
		return st, err
	}
	st.view = scrape(ctx, firsts)
	st.pids = env.ch.pids()
	st.cpu, st.at = sampleCPU(st.pids, env.mockPID, env.postmaster), time.Now()
	if o.Statements {
		if _, err := env.admin.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
			return st, err
		}
	}
	return st, nil
}

// stopAndRead stops chatd (its backends exit and flush) and reads the
// database's counters, the CPU used and the statements' counts.
func (r *Round) stopAndRead(ctx context.Context, o Options, env roundEnv, st measureStart) (counters, cpuSample, time.Duration, error) {
	cpu1, wall := sampleCPU(st.pids, env.mockPID, env.postmaster), time.Since(st.at)
	if err := env.ch.stop(); err != nil {
		return counters{}, cpu1, wall, err
	}
	after, err := snapshot(ctx, env.admin, env.db, true)
	if err != nil {
		return after, cpu1, wall, err
	}
	cpu1.postgres = clusterCPU(env.postmaster) // chatd's backends have exited and been reaped
	if o.Statements {
		if r.Statements, err = readStatements(ctx, env.admin, env.db); err != nil {
			return after, cpu1, wall, err
		}
	}
	return after, cpu1, wall, nil
}

// finishSweep records what the retention sweep did with the seeded chats.
func (r *Round) finishSweep(ctx context.Context, env roundEnv, firsts []*client.Client, logAt int64, pk *peaks) {
	sw := r.Sweep
	if sw == nil {
		return
	}
	sweepMetrics(ctx, func(ctx context.Context, i int) ([]byte, error) { return firsts[i].Metrics(ctx) }, len(firsts), sw)
	sw.Left = seededLeft(ctx, env.ch.dbURL)
	sw.LockWaits, _ = lockWaitLines(env.pgLog, logAt)
	if pk != nil {
		sw.LongestXact = time.Duration(pk.xact.Load())
	}
}

// roundClients makes a client per replica and token, and returns the first
// client of each replica apart (for /metrics).
func roundClients(bases, tokens []string, httpc *http.Client) (cs [][]*client.Client, firsts []*client.Client) {
	cs = make([][]*client.Client, len(bases))
	for i, base := range bases {
		for _, token := range tokens {
			cs[i] = append(cs[i], client.New(base, token, httpc))
		}
		firsts = append(firsts, cs[i][0])
	}
	return cs, firsts
}

// warmUp opens connections, prepares statements and fills caches, then
// lets the statistics settle. With a latency a few clients do it; the
// window's ramp brings the load up.
func warmUp(ctx context.Context, o Options, cs [][]*client.Client) error {
	warm := load{clients: cs, n: o.Clients, window: o.Warmup, wait: o.pollWait()}
	if o.capacity() {
		warm.n, warm.drain, warm.tolerant, warm.errs = min(o.Clients, 8), o.Drain, true, newTally()
	}
	fmt.Fprintf(o.Progress, "bench: %d clients over %d user(s) on %d replica(s), warm-up %s with %d, then %s idle for the statistics to settle\n",
		o.Clients, o.Users, len(cs), o.Warmup, warm.n, statsSettle)
	if _, _, _, err := drive(ctx, warm); err != nil {
		return err
	}
	select {
	case <-time.After(statsSettle):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// seedSweep writes the chats at rest the retention sweep is to delete
// (Options.SeedChats) and returns where the PostgreSQL log stood.
func (r *Round) seedSweep(ctx context.Context, o Options, env roundEnv) (logAt int64, err error) {
	if o.SeedChats <= 0 {
		return 0, nil
	}
	r.Sweep = &Sweep{Seeded: o.SeedChats}
	fmt.Fprintf(o.Progress, "bench: seeding %d chats at rest, %s old\n", o.SeedChats, o.SeedAge)
	if r.Sweep.SeedFor, err = seed(ctx, o, env.ch.dbURL); err != nil {
		return 0, fmt.Errorf("seed: %w", err)
	}
	_, logAt = lockWaitLines(env.pgLog, 0)
	return logAt, nil
}

// startCapacity readies a run with a provider latency: the load's ramp,
// drain and tallies, the figures before it and the peaks' sampler (nil
// without a latency).
func (r *Round) startCapacity(ctx context.Context, o Options, env roundEnv, l *load, httpc *http.Client, pids []int, firsts []*client.Client) (*peaks, error) {
	if !o.capacity() {
		return nil, nil
	}
	l.lead, l.ramp, l.drain, l.tolerant, l.errs, l.inFlight = o.lead(), o.Ramp, o.Drain, true, newTally(), &gauge{}
	r.Capacity = &Capacity{RSSBefore: rssKiB(pids), GoroutinesBefore: goroutines(ctx, firsts)}
	var err error
	if _, _, r.Capacity.ProviderCalls, err = mockStats(ctx, httpc, env.mockBase, true); err != nil {
		return nil, err
	}
	pk, err := samplePeaks(ctx, env.sampleURL, env.db, pids, firsts)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Progress, "bench: ramp over %s, window from %s for %s, then at most %s for the turns in flight\n",
		o.Ramp, o.lead(), o.Duration, o.Drain)
	return pk, nil
}

func (r *Round) finishCapacity(ctx context.Context, pk *peaks, l load, httpc *http.Client, mockBase string) {
	c := r.Capacity
	c.PeakPG, c.RSSPeak, c.PeakGoroutines = pk.finish()
	c.HTTPErrors, c.Receipts, c.PeakInFlight = l.errs.http, l.errs.receipts, int(l.inFlight.peak.Load())
	if _, peak, calls, err := mockStats(ctx, httpc, mockBase, false); err == nil {
		c.PeakProvider, c.ProviderCalls = peak, calls-c.ProviderCalls
	}
}

// chatdView records what chatd's own metrics counted in the round.
func (r *Round) chatdView(view0, view1 serverView) {
	r.ServerCounts = view1.finished - view0.finished
	if n := view1.finished - view0.finished; n > 0 {
		r.Allocs, r.AllocBytes = (view1.mallocs-view0.mallocs)/n, (view1.allocBytes-view0.allocBytes)/n
	}
	r.ProviderP50, r.CreateP50 = view1.provider, view1.create
	r.Purposes = map[string]float64{}
	for p, n := range view1.purposes {
		if d := n - view0.purposes[p]; d > 0 {
			r.Purposes[p] = d
		}
	}
}

// perTurn divides the database's counters and the CPU sampled by the
// turns; with a latency, the CPU is also given in cores.
func (r *Round) perTurn(before, after counters, cpu0, cpu1 cpuSample, wall time.Duration) {
	r.Commits = after.commits - before.commits
	r.Rollbacks = after.rollbacks - before.rollbacks
	r.Sessions = after.sessions - before.sessions
	r.Writes = after.nextXID - before.nextXID
	if n := time.Duration(r.TotalTurns); n > 0 {
		r.CommitsTurn = float64(r.Commits) / float64(r.TotalTurns)
		r.WritesTurn = float64(r.Writes) / float64(r.TotalTurns)
		r.CPU.Chatd = (cpu1.chatd - cpu0.chatd) / n
		r.CPU.Postgres = (cpu1.postgres - cpu0.postgres) / n
		r.CPU.Mock = (cpu1.mock - cpu0.mock) / n
		r.CPU.Clients = (cpu1.clients - cpu0.clients) / n
	}
	if c := r.Capacity; c != nil {
		cores := func(d time.Duration) float64 { return d.Seconds() / wall.Seconds() }
		c.Cores.Chatd, c.Cores.Postgres = cores(cpu1.chatd-cpu0.chatd), cores(cpu1.postgres-cpu0.postgres)
		c.Cores.Mock, c.Cores.Clients = cores(cpu1.mock-cpu0.mock), cores(cpu1.clients-cpu0.clients)
	}
}

// count computes the round's turn figures: the receipts that arrived in
// the window, and the create-to-receipt latency of the turns started in
// it (those abandoned count as at least what they waited).
func (r *Round) count(turns []turn, start, end time.Time) {
	var lat, open []time.Duration
	for _, t := range turns {
		started := !t.start.Before(start) && t.start.Before(end)
		if t.open {
			r.Unfinished++
			if started {
				open = append(open, t.end.Sub(t.start))
			}
			continue
		}
		r.TotalTurns++
		if !t.ok {
			r.Failed++
		}
		if !t.end.Before(start) && t.end.Before(end) {
			r.WindowTurns++
		}
		if started {
			lat = append(lat, t.end.Sub(t.start))
		}
	}
	r.Window = end.Sub(start)
	r.TurnsPerSec = float64(r.WindowTurns) / r.Window.Seconds()
	r.P50, r.P50Open = percentileOpen(lat, open, 0.50)
	r.P99, r.P99Open = percentileOpen(lat, open, 0.99)
	r.Samples = len(lat) + len(open)
}

// benchSchema is the response format of every turn: a small realistic
// report.
const benchSchema = `{"type":"object","additionalProperties":false,
 "required":["summary","severity","files","confidence"],
 "properties":{
  "summary":{"type":"string","minLength":1,"maxLength":200},
  "severity":{"enum":["low","medium","high"]},
  "files":{"type":"array","maxItems":5,"items":{"type":"string"}},
  "confidence":{"type":"number","minimum":0,"maximum":1}}}`

// process is a child process whose output goes to a log file.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

func (p *process) stop() error {
	if p == nil || p.cmd.Process == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.log.Close()
	if ps := p.cmd.ProcessState; ps != nil && !ps.Success() {
		return fmt.Errorf("%s exited: %s (log: %s)", filepath.Base(p.cmd.Path), ps, p.log.Name())
	}
	return nil
}

// spawn starts bin with args; every line it writes goes to logPath, and
// match (if set) is told each line until it returns true.
func spawn(bin string, args []string, logPath string, match func(line string) bool) (*process, <-chan struct{}, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, err
	}
	// done closes once the process exited and its output is all logged.
	p := &process{cmd: cmd, done: make(chan struct{}), log: logf}
	matched := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		found := match == nil
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if !found && match(sc.Text()) {
				found = true
				close(matched)
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		_ = cmd.Wait()
		_ = pw.Close()
		<-drained
		close(p.done)
	}()
	return p, matched, nil
}

// mockArgs are mockllm's flags for a provider latency, given whole or
// streamed in chunks: --latency d, or the first of n chunks after d/n and
// the others d/n apart, so that a call lasts d either way.
func mockArgs(d time.Duration, chunks int) []string {
	args := []string{"--listen", "127.0.0.1:0", "--format", "openai"}
	if chunks <= 0 {
		return append(args, "--latency", d.String(), "--chunk-delay", "0s")
	}
	step := d / time.Duration(chunks)
	return append(args, "--latency", step.String(), "--chunk-delay", step.String(), "--stream-chunks", fmt.Sprint(chunks))
}

// logTail is the last lines of a log, to say why a process exited (the
// work directory is gone by the time the error is read, without --keep).
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(log: " + path + ")"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(len(lines)-3, 0):], "\n")
}

// startMock runs mockllm on a free port and returns its base URL.
func startMock(ctx context.Context, bin string, args []string, logPath string) (*process, string, error) {
	var url string
	p, matched, err := spawn(bin, args, logPath, func(line string) bool {
		if rest, ok := strings.CutPrefix(line, "mockllm listening on "); ok {
			url = strings.TrimSpace(rest)
			return true
		}
		return false
	})
	if err != nil {
		return nil, "", err
	}
	select {
	case <-matched:
		return p, url, nil
	case <-p.done:
		return nil, "", fmt.Errorf("mockllm exited at start: %s", logTail(logPath))
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	_ = p.stop()
	return nil, "", fmt.Errorf("mockllm did not start (log: %s)", logPath)
}

// chatdRunner starts and stops the chatd servers of one build.
type chatdRunner struct {
	bin, dbURL, config, logPath string
	flags                       []string // after the benchmark's own
	replicas                    int
	ps                          []*process
}

// start runs the replicas, each `chatd server` on a free port, and returns
// their base URLs once they are ready.
func (c *chatdRunner) start(ctx context.Context) ([]string, error) {
	var addrs []string
	for range c.replicas {
		addr, err := c.startOne(ctx)
		if err != nil {
			_ = c.stop()
			return nil, err
		}
		addrs = append(addrs, addr)
	}
	return addrs, nil
}

func (c *chatdRunner) startOne(ctx context.Context) (string, error) {
	var addr string
	args := append([]string{"server", "--listen", "127.0.0.1:0", "--database-url", c.dbURL,
		"--config", c.config, "--experiments", "chat-structured-output", "--log-format", "json", "--log-level", "info"}, c.flags...)
	p, matched, err := spawn(c.bin, args, c.logPath, func(line string) bool {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "chatd listening" {
			addr = rec.Addr
			return true
		}
		return false
	})
	if err != nil {
		return "", err
	}
	select {
	case <-matched:
	case <-p.done:
		return "", fmt.Errorf("chatd exited at start: %s", logTail(c.logPath))
	case <-time.After(60 * time.Second):
		_ = p.stop()
		return "", fmt.Errorf("chatd did not start (log: %s)", c.logPath)
	case <-ctx.Done():
		_ = p.stop()
		return "", ctx.Err()
	}
	c.ps = append(c.ps, p)
	// Ready means the database answers too.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := client.New(addr, "", nil).Ready(ctx); err == nil {
			return addr, nil
		}
		if time.Now().After(deadline) {
			return "", errors.New("chatd did not become ready")
		}
		time.Sleep(10 * time.Millisecond) // polling a process we started
	}
}

func (c *chatdRunner) pids() []int {
	var out []int
	for _, p := range c.ps {
		out = append(out, p.cmd.Process.Pid)
	}
	return out
}

// stop stops every replica at once (they drain in parallel).
func (c *chatdRunner) stop() error {
	ps := c.ps
	c.ps = nil
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { errs[i] = p.stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pgbenchScript is one transaction per run: a one-row UPDATE of the
// client's own row (no lock waits between clients), committed on its own.
const pgbenchScript = "UPDATE commit_probe SET n = n + 1 WHERE id = :client_id;\n"

func preparePgbench(ctx context.Context, url string, rows int) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS commit_probe (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
		INSERT INTO commit_probe (id) SELECT g FROM generate_series(0, `+fmt.Sprint(max(rows, 1)-1)+`) g ON CONFLICT DO NOTHING`)
	return err
}

// runPgbench measures the commit rate of clients one-row write
// transactions for d.
func runPgbench(ctx context.Context, bin, url string, clients int, d time.Duration, work string) (float64, error) {
	script := filepath.Join(work, "commit_probe.sql")
	if err := os.WriteFile(script, []byte(pgbenchScript), 0o644); err != nil {
		return 0, err
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return 0, err
	}
	threads := min(clients, 2)
	cmd := exec.CommandContext(ctx, bin, "-n", "-f", script, "-c", fmt.Sprint(clients), "-j", fmt.Sprint(threads),
		"-T", fmt.Sprint(int(d.Round(time.Second).Seconds())), "-h", cfg.Host, "-p", fmt.Sprint(cfg.Port), "-U", cfg.User, cfg.Database)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %w: %s", err, out)
	}
	return parsePgbenchTPS(out)
}
