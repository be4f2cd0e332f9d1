package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/console"
	"github.com/chatd/chatd/internal/handoff"
	"github.com/chatd/chatd/internal/hooks"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/jwtauth"
	"github.com/chatd/chatd/internal/mcp"
	"github.com/chatd/chatd/internal/migrate"
	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/provider"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/tools"
	"github.com/chatd/chatd/internal/tracing"
	"github.com/chatd/chatd/internal/webhooks"
)

// defaultRetainTombstones: deleted chats' tombstones are kept 30 days.
const defaultRetainTombstones = 30 * 24 * time.Hour

// serverArgs are the flags of chatd server.
type serverArgs struct {
	listen            *string
	db                databaseFlags
	configPath        *string
	experiments       *string
	doMigrate         *bool
	maxRunning        *int
	workers           *int
	maxRunningPerUser *int
	dbMaxConns        *int
	maxSteps          *int
	lease             *time.Duration
	drain             *time.Duration
	silence           *time.Duration
	serverToolTimeout *time.Duration
	providerAttempts  *int
	toolTimeout       *time.Duration
	logFormat         *string
	logLevel          *string
	corsOrigins       *string
	accessLevel       *string
	withConsole       *bool
	frameAncestors    *string
	traceURL          *string
	bodyTimeout       *time.Duration
	maxRunnable       *int
	maxStreams        *int
	debugListen       *string
	oidcIssuer        *string
	jwksURL           *string
	jwtIssuer         *string
	jwtAudience       *string
	jwtUserClaim      *string
	jwksRefresh       *time.Duration
	retainChats       *time.Duration
	retainTombstones  *time.Duration
}

// serverFlags defines the flags of chatd server: the one source of its
// --help and of the reference in docs/operations.md (TestFlagReference).
func serverFlags(stderr io.Writer) (*flags, *serverArgs) {
	f := newFlags("server", "chatd server [flags]", stderr)
	return f, &serverArgs{
		listen:            f.String("listen", "CHATD_LISTEN", "127.0.0.1:8080", "HTTP listen address (0.0.0.0:8080 to serve other hosts)"),
		db:                addDatabaseFlags(f),
		configPath:        f.String("config", "CHATD_CONFIG", "", "JSON config file: providers, models, the default model, hooks, workspace, MCP servers, webhooks (docs/providers.md)"),
		experiments:       f.String("experiments", "CHATD_EXPERIMENTS", "", "comma-separated experiments to enable; chat-structured-output admits structured requests"),
		doMigrate:         f.Bool("migrate", "CHATD_MIGRATE", false, "apply pending migrations at start-up (always done for the local cluster)"),
		maxRunning:        f.Int("max-running", "CHATD_MAX_RUNNING", -1, "chats this process runs at once; -1: as many as its file descriptors and memory hold, each chat in flight holding a client and a provider connection (the start-up line says how many and what bound them); 0: none, an API-only replica. A chat waiting on its model holds no database connection, and a tenth (at least one) is kept for users with nothing running (docs/runtime.md)"),
		workers:           f.Int("workers", "CHATD_WORKERS", 0, "deprecated: the old name of --max-running; removed in the first release after 2027-03-01"),
		maxRunningPerUser: f.Int("max-running-per-user", "CHATD_MAX_RUNNING_PER_USER", 0, "optional cap on one user's running chats across all replicas (0: none); the rest wait, runnable"),
		dbMaxConns:        f.Int("db-max-conns", "CHATD_DB_MAX_CONNS", defaultDBMaxConns, "database connections this process keeps at most (its pool), whatever --max-running is"),
		maxSteps:          f.Int("max-steps", "CHATD_MAX_STEPS", runner.DefaultMaxSteps, "provider steps allowed per turn"),
		lease:             f.Duration("lease", "CHATD_LEASE", runner.DefaultLease, "how long a worker's claim on a chat lasts without renewal (another replica takes over after it)"),
		drain:             f.Duration("drain-timeout", "CHATD_DRAIN_TIMEOUT", runner.DefaultDrainTimeout, "on SIGTERM, SIGINT or SIGHUP, how long in-flight steps may finish before they are cut off and their chats released"),
		silence:           f.Duration("provider-silence-timeout", "CHATD_PROVIDER_SILENCE_TIMEOUT", runner.DefaultSilenceTimeout, "cut off and retry a provider step that sends nothing for this long"),
		serverToolTimeout: f.Duration("server-tool-timeout", "CHATD_SERVER_TOOL_TIMEOUT", runner.DefaultServerToolTimeout, "how long one server tool call (read_file, list_files) may run before it is answered with an error"),
		providerAttempts:  f.Int("provider-attempts", "CHATD_PROVIDER_ATTEMPTS", runner.DefaultMaxAttempts, "provider attempts per step: transient failures (unreachable, 429, 5xx, cut or stalled streams) are retried with backoff until then (docs/runtime.md#provider-errors)"),
		toolTimeout:       f.Duration("tool-result-timeout", "CHATD_TOOL_RESULT_TIMEOUT", runner.DefaultActionTimeout, "how long a turn waits for client tool results before answering the calls with errors"),
		logFormat:         f.String("log-format", "CHATD_LOG_FORMAT", "json", "log format: json or text"),
		logLevel:          f.String("log-level", "CHATD_LOG_LEVEL", "info", "log level: debug, info, warn, error"),
		corsOrigins:       f.String("cors-origins", "CHATD_CORS_ORIGINS", "", "comma-separated browser origins allowed to call the API (scheme://host[:port], or *); empty: CORS off (docs/api.md#browsers)"),
		accessLevel:       f.String("access-log-level", "CHATD_ACCESS_LOG_LEVEL", "info", "level of the one access line per request: debug, info, warn, error (make run sets debug)"),
		withConsole:       f.Bool("console", "CHATD_CONSOLE", false, "serve the web console at /console/ and redirect / to it (a client of the public API, so any replica serves it; sign in with an API token; docs/console.md)"),
		frameAncestors:    f.String("console-frame-ancestors", "CHATD_CONSOLE_FRAME_ANCESTORS", "", "comma-separated origins (scheme://host[:port]) whose pages may embed the console in a frame and hand it their users' JWTs (docs/console.md#embedding); empty: no page may frame it"),
		traceURL:          f.String("trace-url-template", "CHATD_TRACE_URL_TEMPLATE", "", "the console links a request to its trace at this URL, {trace_id} standing for its trace id, e.g. https://jaeger.example/trace/{trace_id} (docs/operations.md#traces)"),
		bodyTimeout:       f.Duration("body-read-timeout", "CHATD_BODY_READ_TIMEOUT", httpapi.DefaultBodyReadTimeout, "how long a request body may take to arrive; a stalled body is answered 408 and its connection closed. Headers must arrive within 10s and an idle keep-alive connection is closed after 2m; there is no overall read or write timeout, which would cut event streams"),
		maxRunnable:       f.Int("max-runnable-per-user", "CHATD_MAX_RUNNABLE_PER_USER", httpapi.DefaultMaxRunnablePerUser, "runnable chats (running, or waiting for a slot) one user may have across all replicas; a create or send that would start one more is answered 429 (-1: no limit)"),
		maxStreams:        f.Int("max-streams-per-user", "CHATD_MAX_STREAMS_PER_USER", httpapi.DefaultMaxStreamsPerUser, "event streams (chat streams and watches together) one user may have open on this process; one more is answered 429 with Retry-After (-1: no limit). Per process: behind a load balancer a user may hold this many on each replica"),
		debugListen:       f.String("debug-listen", "CHATD_DEBUG_LISTEN", "", "serve Go's profiler (/debug/pprof/) on this address, e.g. 127.0.0.1:6060, never on the API's listener; off when empty. Keep it private: profiles reveal the process's internals"),
		oidcIssuer:        f.String("oidc-issuer", "CHATD_OIDC_ISSUER", "", "the application's OpenID provider, by its issuer URL exactly as its tokens' iss: its keys are found through its discovery document, and its JWTs then sign users in beside API tokens (needs --jwt-audience; docs/operations.md#identity)"),
		jwksURL:           f.String("jwks-url", "CHATD_JWKS_URL", "", "the identity provider's JWKS URL, for one without OpenID discovery (needs --jwt-issuer and --jwt-audience)"),
		jwtIssuer:         f.String("jwt-issuer", "CHATD_JWT_ISSUER", "", "the iss the JWTs must carry, with --jwks-url (with --oidc-issuer it is that URL)"),
		jwtAudience:       f.String("jwt-audience", "CHATD_JWT_AUDIENCE", "", "a value the JWTs' aud must hold: chatd's client or API identifier at the identity provider"),
		jwtUserClaim:      f.String("jwt-user-claim", "CHATD_JWT_USER_CLAIM", jwtauth.DefaultUserClaim, "the JWT claim naming the user (a string; a dotted path for a nested claim, e.g. app_metadata.user_id); with the issuer it keys the chatd user"),
		jwksRefresh:       f.Duration("jwks-refresh", "CHATD_JWKS_REFRESH", jwtauth.DefaultRefreshInterval, "how often the identity provider's keys are fetched again; an unknown key id fetches them at once, at most once a minute"),
		retainChats:       f.Duration("retain-chats", "CHATD_RETAIN_CHATS", 0, "delete chats whose last visible change is older than this, with their child chats, in small batches on one replica at a time; never a chat with a turn running or a request pending (0: keep every chat; docs/operations.md#retention)"),
		retainTombstones:  f.Duration("retain-tombstones", "CHATD_RETAIN_TOMBSTONES", defaultRetainTombstones, "keep what a deleted chat leaves (its id, owner, reason and its requests' outcomes, which late lookups and webhook deliveries read) this long (0: forever)"),
	}
}

func cmdServer(ctx context.Context, args []string, stderr io.Writer) error {
	f, a := serverFlags(stderr)
	if err := parseServerFlags(f, a, args); err != nil {
		return err
	}
	logger, err := newLogger(stderr, *a.logFormat, *a.logLevel)
	if err != nil {
		return err
	}
	gcTuned := tuneServerGC(logger)
	web, err := checkServerFlags(f, a, logger)
	if err != nil {
		return err
	}
	cfg, exp, err := loadServerConfig(*a.configPath, *a.experiments, logger)
	if err != nil {
		return err
	}
	traces, err := tracing.Setup(ctx, os.Getenv) // off unless an OTEL_* variable configures an exporter
	if err != nil {
		return err
	}
	defer flushTraces(ctx, traces, logger)
	d, err := openDatabase(ctx, a.db, int32(*a.dbMaxConns), logger)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := ensureMigrated(ctx, d, *a.doMigrate, logger); err != nil {
		return err
	}
	s, err := assembleServer(ctx, a, cfg, exp, web, d, logger)
	if err != nil {
		return err
	}
	defer s.mcps.Close() // stdio children (their process groups) stop after the runner
	ln, closeDebug, err := listen(*a.listen, *a.debugListen, logger)
	if err != nil {
		return err
	}
	defer closeDebug()
	srv := httpapi.NewHTTPServer(s.handler(*a.withConsole, console.Config{TraceURLTemplate: *a.traceURL, FrameAncestors: web.frameAncestors}))
	s.gate.Install(srv)
	bg := s.startLoops(ctx, s.ceil.running > 0, gcTuned)
	defer bg.stopAll()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	announce(stderr, f, a, cfg, exp, d, ln, traces, s.ceil, logger)
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-serveErr:
		bg.stop()
		return err
	}
	s.drain(srv, bg)
	logger.Info("stopped")
	return nil
}

// tuneServerGC applies serverGCPercent unless GOGC is set, and reports
// whether it did.
func tuneServerGC(logger *slog.Logger) bool {
	if !tuneGC(os.Getenv) {
		return false
	}
	logger.Debug("garbage collector target set", slog.Int("gc_percent", serverGCPercent))
	return true
}

// parseServerFlags reads the flags and the environment; the server takes
// no arguments.
func parseServerFlags(f *flags, a *serverArgs, args []string) error {
	if err := f.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return fmt.Errorf("server: unexpected argument %q", f.Arg(0))
	}
	return a.db.validate()
}

// webSettings are the HTTP settings that flags give in words.
type webSettings struct {
	origins        []string
	accessLogLevel slog.Level
	jwt            *jwtauth.Verifier // nil: API tokens only
	frameAncestors []string          // origins that may frame the console
}

// checkServerFlags refuses values out of range before anything starts.
func checkServerFlags(f *flags, a *serverArgs, logger *slog.Logger) (webSettings, error) {
	var web webSettings
	var err error
	if web.origins, err = httpapi.ParseOrigins(*a.corsOrigins); err != nil {
		return web, fmt.Errorf("--cors-origins: %w", err)
	}
	if err := web.accessLogLevel.UnmarshalText([]byte(*a.accessLevel)); err != nil {
		return web, fmt.Errorf("--access-log-level: %w", err)
	}
	if err := aliasWorkers(f, a.maxRunning, *a.workers, logger); err != nil {
		return web, err
	}
	if web.frameAncestors, err = httpapi.ParseOrigins(*a.frameAncestors); err != nil || slices.Contains(web.frameAncestors, "*") {
		return web, fmt.Errorf("--console-frame-ancestors: name the origins (scheme://host[:port]): %v", err)
	}
	if web.jwt, err = jwtVerifier(a, logger); err != nil {
		return web, err
	}
	return web, checkServerLimits(a)
}

// jwtVerifier is the identity provider's verifier the JWT flags describe
// (nil when none is given).
func jwtVerifier(a *serverArgs, logger *slog.Logger) (*jwtauth.Verifier, error) {
	oidc, jwks, iss := *a.oidcIssuer, *a.jwksURL, *a.jwtIssuer
	switch {
	case oidc == "" && jwks == "":
		if iss != "" || *a.jwtAudience != "" {
			return nil, errors.New("--jwt-issuer and --jwt-audience need --oidc-issuer or --jwks-url")
		}
		return nil, nil
	case oidc != "" && jwks != "":
		return nil, errors.New("give --oidc-issuer or --jwks-url, not both")
	case jwks != "" && iss == "":
		return nil, errors.New("--jwks-url needs --jwt-issuer: the iss its tokens carry")
	case oidc != "" && iss != "" && iss != oidc:
		return nil, errors.New("--jwt-issuer differs from --oidc-issuer: give only --oidc-issuer")
	case *a.jwtAudience == "":
		return nil, errors.New("--jwt-audience is required with --oidc-issuer or --jwks-url")
	case *a.jwksRefresh < time.Minute:
		return nil, errors.New("--jwks-refresh must be at least 1m")
	}
	for name, u := range map[string]string{"--oidc-issuer": oidc, "--jwks-url": jwks} {
		if p, err := url.Parse(u); u != "" && (err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "") {
			return nil, fmt.Errorf("%s: %q is not an http(s) URL", name, u)
		}
	}
	if oidc != "" {
		iss = oidc
	}
	v, err := jwtauth.New(jwtauth.Options{Issuer: iss, Discovery: oidc != "", JWKSURL: jwks, Audience: *a.jwtAudience,
		UserClaim: *a.jwtUserClaim, RefreshInterval: *a.jwksRefresh, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("--jwt-user-claim: %w", err)
	}
	return v, nil
}

// checkServerLimits checks the flags' numbers and durations.
func checkServerLimits(a *serverArgs) error {
	if *a.maxRunning < -1 || *a.maxRunning > maxMaxRunning {
		return fmt.Errorf("--max-running must be -1 (derived from the limits) or from 0 to %d", maxMaxRunning)
	}
	if *a.maxRunningPerUser < 0 {
		return errors.New("--max-running-per-user must be 0 (no cap) or positive")
	}
	if *a.dbMaxConns < 2 || *a.dbMaxConns > 10000 {
		return errors.New("--db-max-conns must be from 2 to 10000")
	}
	if *a.lease < time.Second || *a.drain <= 0 || *a.toolTimeout <= 0 || *a.silence <= 0 || *a.serverToolTimeout <= 0 {
		return errors.New("--lease must be at least 1s; --drain-timeout, --tool-result-timeout, --server-tool-timeout and --provider-silence-timeout must be positive")
	}
	if err := console.ParseTraceURLTemplate(*a.traceURL); err != nil {
		return fmt.Errorf("--trace-url-template: %w", err)
	}
	if *a.bodyTimeout <= 0 {
		return errors.New("--body-read-timeout must be positive")
	}
	if *a.maxRunnable == 0 || *a.maxRunnable < -1 {
		return errors.New("--max-runnable-per-user must be positive, or -1 for no limit")
	}
	if *a.maxStreams == 0 || *a.maxStreams < -1 {
		return errors.New("--max-streams-per-user must be positive, or -1 for no limit")
	}
	if *a.providerAttempts < 1 || *a.providerAttempts > 100 {
		return errors.New("--provider-attempts must be from 1 to 100")
	}
	if *a.retainChats < 0 || *a.retainTombstones < 0 {
		return errors.New("--retain-chats and --retain-tombstones must be 0 (off) or positive")
	}
	return nil
}

// loadServerConfig reads the config file, webhooks included, and the
// experiments to enable.
func loadServerConfig(path, experiments string, logger *slog.Logger) (*config.Config, map[string]bool, error) {
	cfg := &config.Config{}
	if path != "" {
		var err error
		if cfg, err = config.Load(path); err != nil {
			return nil, nil, err
		}
		if err := webhooks.Check(cfg.Webhooks); err != nil {
			return nil, nil, fmt.Errorf("config: %w", err)
		}
	} else {
		logger.Warn("no --config given: no models are configured, so chats cannot be created")
	}
	exp := map[string]bool{}
	for _, e := range strings.Split(experiments, ",") {
		if e = strings.TrimSpace(e); e != "" {
			if e != httpapi.ExperimentStructuredOutput {
				return nil, nil, fmt.Errorf("--experiments: unknown experiment %q (known: %s)", e, httpapi.ExperimentStructuredOutput)
			}
			exp[e] = true
		}
	}
	return cfg, exp, nil
}

// flushTraces sends the traces still buffered, for a few seconds at most,
// at the end of the drain.
func flushTraces(ctx context.Context, traces *tracing.Tracing, logger *slog.Logger) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := traces.Shutdown(fctx); err != nil {
		logger.Warn("flushing traces failed", slog.String("error", err.Error()))
	}
}

// server is what chatd server runs, assembled.
type server struct {
	st        *store.Store
	hub       *notify.Hub
	relay     *notify.Relay
	mcps      *mcp.Manager
	slots     *handoff.Slots[store.Turn]
	api       *httpapi.Server
	deliverer *webhooks.Deliverer
	run       *runner.Runner
	ceil      ceiling
	gate      *httpapi.ConnGate
}

// assembleServer builds the store, the hub, the API, the webhook deliverer
// and the runner, and starts the MCP servers; it stops them again when a
// later part fails.
func assembleServer(ctx context.Context, a *serverArgs, cfg *config.Config, exp map[string]bool, web webSettings, d *database,
	logger *slog.Logger) (s *server, err error) {
	serverTools, toolNames, err := workspaceTools(cfg.Workspace)
	if err != nil {
		return nil, err
	}
	stopHooks, err := hooks.New(cfg.Hooks, nil)
	if err != nil {
		return nil, err
	}
	reg := newMetrics()
	res := readResources(*a.dbMaxConns, cfg)
	s = &server{st: store.New(d.pool), ceil: deriveCeiling(*a.maxRunning, res)}
	s.ceil.warn(logger, res)
	s.ceil.instrument(reg)
	s.gate = httpapi.NewConnGate(s.ceil.conns, reg)
	s.st.Instrument(reg)
	d.txs.Instrument(reg)
	s.hub = notify.New(d.pool, logger)
	s.hub.ListenOn(d.listen)
	s.hub.Instrument(reg)
	s.st.Tell(s.hub.ID(), s.hub)
	s.relay = notify.NewRelay(d.pool, s.hub, logger)
	models := provider.NewRegistry(cfg, provider.Options{Logger: logger, Calls: s.ceil.running, Metrics: reg})
	s.mcps = mcp.New(cfg.MCPServers, mcp.Options{Logger: logger, Metrics: reg, Reserved: []string{runner.FinalizerName}})
	s.mcps.Start(ctx)
	defer func() {
		if err != nil {
			s.mcps.Close()
		}
	}()
	spawn := spawnOptions(cfg, exp)
	// Free running slots take the chats this process admits straight from
	// the admission (internal/handoff).
	s.slots = handoff.New[store.Turn]()
	s.api = httpapi.New(httpapi.Options{Store: s.st, Models: models, Hub: s.hub, Experiments: exp, ServerTools: toolNames, MCP: s.mcps, SpawnAgents: spawn != nil, Slots: s.slots,
		Logger: logger, AccessLogLevel: web.accessLogLevel, CORSOrigins: web.origins, Metrics: reg,
		BodyReadTimeout: *a.bodyTimeout, MaxStreamsPerUser: *a.maxStreams, MaxRunnablePerUser: *a.maxRunnable, JWT: web.jwt})
	if web.jwt != nil {
		go web.jwt.Run(ctx) // the keys, now and on schedule, until the server stops
	}
	if s.deliverer, err = startWebhooks(ctx, s.st, s.hub, cfg, reg, logger); err != nil {
		return nil, err
	}
	s.run = runner.New(s.st, models, s.hub, runner.Options{MaxRunning: s.ceil.running, MaxRunningPerUser: *a.maxRunningPerUser, MaxSteps: *a.maxSteps,
		Tools: serverTools, MCP: s.mcps, Spawn: spawn, Slots: s.slots,
		Lease: *a.lease, DrainTimeout: *a.drain, ActionTimeout: *a.toolTimeout, SilenceTimeout: *a.silence,
		ServerToolTimeout: *a.serverToolTimeout, MaxAttempts: *a.providerAttempts,
		Hooks: stopHooks, CompactionThreshold: cfg.CompactionThreshold, Preview: s.relay, Logger: logger, Metrics: reg,
		RetainChats: *a.retainChats, RetainTombstones: *a.retainTombstones})
	return s, nil
}

// workspaceTools are the server tools reading the config's workspace, if
// it names one, and their names.
func workspaceTools(workspace string) ([]tools.Tool, []string, error) {
	if workspace == "" {
		return nil, []string{}, nil
	}
	serverTools, err := tools.Workspace(workspace)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(serverTools))
	for _, t := range serverTools {
		names = append(names, t.Name)
	}
	return serverTools, names, nil
}

// spawnOptions offer spawn_agent when the config does.
func spawnOptions(cfg *config.Config, exp map[string]bool) *runner.SpawnOptions {
	sp := cfg.SpawnAgent
	if sp == nil {
		return nil
	}
	return &runner.SpawnOptions{MaxDepth: sp.MaxDepth, MaxPerTurn: sp.MaxChildrenPerTurn, MaxPerChat: sp.MaxChildrenPerChat,
		StructuredOutput: exp[httpapi.ExperimentStructuredOutput]}
}

// startWebhooks makes the deliverer and installs the config's
// subscriptions, so that receipts finishing from now on get their outbox
// rows, also when it has none.
func startWebhooks(ctx context.Context, st *store.Store, hub *notify.Hub, cfg *config.Config, reg *prometheus.Registry,
	logger *slog.Logger) (*webhooks.Deliverer, error) {
	deliverer, err := webhooks.New(st, cfg.Webhooks, webhooks.Options{Logger: logger, Metrics: reg, Wake: hub.Finished(),
		Render: func(rs store.RequestState) (any, error) { return httpapi.RenderResult(rs) }})
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := st.SyncWebhooks(ctx, deliverer.Subscriptions()); err != nil {
		return nil, fmt.Errorf("install webhook subscriptions: %w", err)
	}
	return deliverer, nil
}

// handler is the API, with the console mounted when it is served.
func (s *server) handler(withConsole bool, cfg console.Config) http.Handler {
	if !withConsole {
		return s.api
	}
	return console.MountWith(s.api, cfg)
}

// listen opens the API's listener and, when asked, the profiler's; the
// function returned closes the profiler.
func listen(addr, debugAddr string, logger *slog.Logger) (net.Listener, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	if debugAddr == "" {
		return ln, func() {}, nil
	}
	dbg, err := serveDebug(debugAddr, logger)
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	return ln, func() { _ = dbg.Close() }, nil
}

// loops are the server's background goroutines. The runner's stop first:
// it takes no new claims, drains its steps and releases their chats while
// the hub and relay still run.
type loops struct {
	wg         sync.WaitGroup
	stopRunner context.CancelFunc
	stopAll    context.CancelFunc
}

// startLoops starts the hub, the relay, the webhook deliverer and, when
// this process runs chats, the runner.
func (s *server) startLoops(ctx context.Context, running, gcTuned bool) *loops {
	l := &loops{}
	bg, stopAll := context.WithCancel(context.WithoutCancel(ctx))
	runCtx, stopRunner := context.WithCancel(bg)
	l.stopAll, l.stopRunner = stopAll, stopRunner
	l.wg.Go(func() { s.hub.Run(bg) })
	l.wg.Go(func() { s.relay.Run(bg) })
	l.wg.Go(func() { s.deliverer.Run(runCtx) })
	if running {
		l.wg.Go(func() { s.run.Run(runCtx) })
		if gcTuned {
			l.wg.Go(func() { adaptGC(bg, s.slots.Used) })
		}
	}
	return l
}

// stop ends the loops and waits for them.
func (l *loops) stop() {
	l.stopRunner()
	l.stopAll()
	l.wg.Wait()
}

// drain ends the server on a signal: the runner stops claiming, open
// streams end cleanly, requests in flight finish for a while, then the
// loops stop.
func (s *server) drain(srv *http.Server, l *loops) {
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l.stopRunner()
	s.api.Shutdown() // ends open streams cleanly, without waiting for them
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	l.stop()
}

// announce prints the banner on a terminal and logs the start.
func announce(stderr io.Writer, f *flags, a *serverArgs, cfg *config.Config, exp map[string]bool, d *database, ln net.Listener,
	traces *tracing.Tracing, ceil ceiling, logger *slog.Logger) {
	if isTerminal(stderr) {
		b := banner{base: "http://" + ln.Addr().String(), self: "chatd", console: *a.withConsole, cfg: cfg}
		if strings.Contains(os.Args[0], "/") {
			b.self = os.Args[0] // bin/chatd, as make run starts it
		}
		switch {
		case *a.db.url != "":
			b.dbFlag = " --database-url URL"
		case *a.db.dataDir != f.Lookup("data-dir").DefValue:
			b.dbFlag = " --data-dir " + *a.db.dataDir
		}
		b.write(stderr)
	}
	logger.Info("chatd listening", slog.String("addr", "http://"+ln.Addr().String()), slog.Int("max_running", ceil.running),
		slog.String("max_running_bound", ceil.bound), slog.Int("max_connections", ceil.conns), slog.Int("descriptors", ceil.descriptors),
		slog.Int("db_max_conns", *a.dbMaxConns),
		slog.Bool("structured_output", exp[httpapi.ExperimentStructuredOutput]), slog.Bool("console", *a.withConsole), slog.Bool("local_database", d.local),
		slog.String("traces", traces.String()))
}

// ensureMigrated migrates the local cluster, and for an external database
// either migrates (--migrate) or refuses to run while work is pending.
func ensureMigrated(ctx context.Context, d *database, force bool, logger *slog.Logger) error {
	return d.sessions(ctx, func(pool *pgxpool.Pool) error {
		m, err := migrate.New(pool)
		if err != nil {
			return err
		}
		defer func() { _ = m.Close() }()
		if d.local || force {
			res, err := m.UpIfPending(ctx)
			for _, r := range res {
				logger.Info("migration applied", slog.Int64("version", r.Version), slog.String("name", r.Name))
			}
			return err
		}
		pending, err := m.Pending(ctx)
		if err != nil {
			return fmt.Errorf("check migrations: %w", err)
		}
		if pending {
			return errors.New("the database has pending migrations: run `chatd migrate up --database-url ...` first, or start the server with --migrate")
		}
		return nil
	})
}

// migrateFlags defines the flags of chatd migrate.
func migrateFlags(stderr io.Writer) (*flags, databaseFlags, *bool) {
	f := newFlags("migrate", "chatd migrate up|down|status [flags]", stderr)
	db := addDatabaseFlags(f)
	force := f.Bool("force", "CHATD_MIGRATE_FORCE", false, "migrate down: revert even while structured requests are pending (they may never get their receipts)")
	return f, db, force
}

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, db, force := migrateFlags(stderr)
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if err := f.Parse(args); err != nil {
			return err
		}
		f.Usage()
		return &exitError{code: 2, err: errors.New("migrate: say up, down or status")}
	}
	verb := args[0]
	if verb != "up" && verb != "down" && verb != "status" {
		return &exitError{code: 2, err: fmt.Errorf("migrate: unknown verb %q (up, down, status)", verb)}
	}
	if err := f.Parse(args[1:]); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return fmt.Errorf("migrate: unexpected argument %q", f.Arg(0))
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := openDatabase(ctx, db, 4, logger)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.sessions(ctx, func(pool *pgxpool.Pool) error {
		m, err := migrate.New(pool)
		if err != nil {
			return err
		}
		defer func() { _ = m.Close() }()
		return migrateVerb(ctx, m, store.New(pool), verb, *force, stdout)
	})
}

// migrateVerb runs up, down or status and prints what it did; down only
// once no structured request is pending, unless forced.
func migrateVerb(ctx context.Context, m *migrate.Migrator, st *store.Store, verb string, force bool, stdout io.Writer) error {
	switch verb {
	case "up":
		res, err := m.Up(ctx)
		for _, r := range res {
			fmt.Fprintf(stdout, "applied %d %s\n", r.Version, r.Name)
		}
		if err != nil {
			return err
		}
		if len(res) == 0 {
			fmt.Fprintln(stdout, "no migrations pending")
		}
		fmt.Fprintln(stdout, "trigger files applied")
	case "down":
		if !force {
			if err := downDrained(ctx, m, st); err != nil {
				return err
			}
		}
		r, err := m.Down(ctx)
		if err != nil {
			return err
		}
		if r == nil {
			fmt.Fprintln(stdout, "nothing to revert")
		} else {
			fmt.Fprintf(stdout, "reverted %d %s\n", r.Version, r.Name)
		}
	case "status":
		st, triggersCurrent, err := m.Status(ctx)
		if err != nil {
			return err
		}
		pending := 0
		for _, s := range st {
			state := "applied"
			if !s.Applied {
				state = "pending"
				pending++
			}
			fmt.Fprintf(stdout, "%-8s %5d %s\n", state, s.Version, s.Name)
		}
		if triggersCurrent {
			fmt.Fprintln(stdout, "triggers current")
		} else {
			fmt.Fprintln(stdout, "triggers stale (run chatd migrate up)")
		}
		if pending > 0 || !triggersCurrent {
			return &exitError{code: 3, err: errors.New("migrations pending")}
		}
	}
	return nil
}

// tokenFlags defines the flags of chatd token VERB but the database's:
// create's --user and --expires-in, list's --user (nil when VERB has none).
// tokenOpts are the flags of `chatd token VERB`.
type tokenOpts struct {
	user      *string
	expiresIn *time.Duration
	scopes    *string
	actAs     *bool
}

func tokenFlags(verb string, stderr io.Writer) (*flags, tokenOpts) {
	f := newFlags("token", "chatd token create --user NAME [--scopes read,write,admin] [--act-as] [--expires-in DURATION] | "+
		"list [--user NAME] | revoke TOKEN_ID | users [flags]", stderr)
	var o tokenOpts
	switch verb {
	case "create":
		o.user = f.String("user", "CHATD_USER", "", "user name (created if it does not exist)")
		o.expiresIn = f.Duration("expires-in", "CHATD_TOKEN_EXPIRES_IN", 0, "the token stops working this long from now, e.g. 720h (0: never)")
		o.scopes = f.String("scopes", "CHATD_TOKEN_SCOPES", "read,write",
			"what the token may do, comma-separated: read (GET routes and streams), write (everything a user does; brings read), admin (the token and user API)")
		o.actAs = f.Bool("act-as", "CHATD_TOKEN_ACT_AS", false,
			"the token may send X-Chatd-User to act for any user (for an application's backend; docs/operations.md#identity)")
	case "list":
		o.user = f.String("user", "CHATD_USER", "", "list only this user's tokens")
	}
	return f, o
}

func cmdToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	verb := ""
	if len(args) > 0 {
		verb = args[0]
	}
	f, o := tokenFlags(verb, stderr)
	switch verb {
	case "create", "list", "revoke", "users":
	case "-h", "--help":
		f.Usage()
		return flag.ErrHelp
	default:
		f.Usage()
		return &exitError{code: 2, err: errors.New("token: say create, list, revoke or users")}
	}
	db := addToolDatabaseFlags(f, stderr)
	rest := args[1:]
	var operand []string // revoke's TOKEN_ID, before or after the flags
	if verb == "revoke" && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		operand, rest = rest[:1], rest[1:]
	}
	if err := f.Parse(rest); err != nil {
		return err
	}
	operand = append(operand, f.Args()...)
	spec, revokeID, err := tokenArgs(verb, o, operand)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := openDatabase(ctx, db, 2, logger)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := ensureMigrated(ctx, d, false, logger); err != nil {
		return err
	}
	st := store.New(d.pool)
	switch verb {
	case "list":
		return printTokens(ctx, st, *o.user, stdout)
	case "users":
		return printUsers(ctx, st, stdout)
	case "revoke":
		if err := st.RevokeToken(ctx, revokeID); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("token revoke: no token %s", revokeID)
		} else if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked %s (servers stop accepting it, and end its open streams, within %s)\n", revokeID, store.TokenCacheTTL)
		return nil
	}
	return createToken(ctx, st, spec, stdout, stderr)
}

// createToken is `chatd token create`: the secret on stdout, alone.
func createToken(ctx context.Context, st *store.Store, spec store.TokenSpec, stdout, stderr io.Writer) error {
	token, info, err := st.CreateScopedToken(ctx, spec)
	if errors.Is(err, store.ErrInvalidUserName) {
		return fmt.Errorf("user name %q: use 1-64 letters, digits, '_', '.', '@' or '-'", spec.User)
	}
	if err != nil {
		return err
	}
	if info.ExpiresAt != nil {
		fmt.Fprintf(stderr, "chatd: the token expires at %s\n", info.ExpiresAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(stdout, token)
	return nil
}

// tokenArgs checks the command line of `chatd token VERB`: what create
// makes, or the token revoke names.
func tokenArgs(verb string, o tokenOpts, operand []string) (store.TokenSpec, uuid.UUID, error) {
	usage := func(format string, args ...any) (store.TokenSpec, uuid.UUID, error) {
		return store.TokenSpec{}, uuid.Nil, &exitError{code: 2, err: fmt.Errorf(format, args...)}
	}
	switch {
	case verb == "revoke":
		if len(operand) != 1 {
			return usage("token revoke: say which token (an id from chatd token list)")
		}
		id, err := uuid.Parse(operand[0])
		if err != nil {
			return usage("token revoke: %q is not a token id (chatd token list shows them)", operand[0])
		}
		return store.TokenSpec{}, id, nil
	case len(operand) > 0:
		return usage("token %s: unexpected argument %q", verb, operand[0])
	case verb != "create":
		return store.TokenSpec{}, uuid.Nil, nil
	case *o.user == "":
		return usage("token create: --user is required")
	case *o.expiresIn < 0:
		return usage("token create: --expires-in must not be negative")
	}
	var scopes []client.Scope
	for name := range strings.SplitSeq(*o.scopes, ",") {
		scopes = append(scopes, client.Scope(strings.TrimSpace(name)))
	}
	scopes, err := store.NormalizeScopes(scopes)
	if err != nil {
		return usage("token create: --scopes: %v", err)
	}
	return store.TokenSpec{User: *o.user, Scopes: scopes, ActAs: *o.actAs, ExpiresIn: *o.expiresIn}, uuid.Nil, nil
}

// printTokens is `chatd token list`.
func printTokens(ctx context.Context, st *store.Store, userName string, stdout io.Writer) error {
	tokens, err := st.ListTokens(ctx, userName)
	if err != nil {
		return err
	}
	const row = "%-36s  %-20s  %-16s  %-6s  %-20s  %-20s  %s\n"
	fmt.Fprintf(stdout, row, "ID", "USER", "SCOPES", "ACT-AS", "CREATED", "LAST USED", "EXPIRES")
	stamp := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	for _, t := range tokens {
		expires := stamp(t.ExpiresAt)
		if t.ExpiresAt == nil {
			expires = "never"
		} else if t.Expired {
			expires += " (expired)"
		}
		actAs := "no"
		if t.ActAs {
			actAs = "yes"
		}
		fmt.Fprintf(stdout, row, t.ID, t.UserName, strings.Join(t.Scopes, ","), actAs, stamp(&t.CreatedAt), stamp(t.LastUsedAt), expires)
	}
	return nil
}

// printUsers is `chatd token users`: every user, named or an identity
// provider's.
func printUsers(ctx context.Context, st *store.Store, stdout io.Writer) error {
	fmt.Fprintf(stdout, "%-36s  %-30s  %s\n", "ID", "NAME", "IDENTITY")
	after := ""
	for {
		users, err := st.ListUsers(ctx, after, 1000)
		if err != nil {
			return err
		}
		for _, u := range users {
			identity := "-"
			if u.Issuer != nil && u.Subject != nil {
				identity = *u.Subject + " at " + *u.Issuer
			}
			fmt.Fprintf(stdout, "%-36s  %-30s  %s\n", u.ID, u.Name, identity)
		}
		if len(users) < 1000 {
			return nil
		}
		after = users[len(users)-1].Name
	}
}

// defaultDBMaxConns is --db-max-conns' default. On two cores PostgreSQL
// commits no faster with more; several replicas must fit max_connections
// (100 by default) together.
const defaultDBMaxConns = 24

// maxMaxRunning bounds --max-running: far above what one process's memory
// holds of chats in flight (docs/operations.md#sizing).
const maxMaxRunning = 100_000

// aliasWorkers applies the deprecated --workers to --max-running.
func aliasWorkers(f *flags, maxRunning *int, workers int, logger *slog.Logger) error {
	set := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if !set["workers"] {
		return nil
	}
	if set["max-running"] && *maxRunning != workers {
		return errors.New("--workers is the old name of --max-running: give one of them")
	}
	logger.Warn("--workers (CHATD_WORKERS) is deprecated and removed in the first release after 2027-03-01: use --max-running (CHATD_MAX_RUNNING)", slog.Int("max_running", workers))
	*maxRunning = workers
	return nil
}

// downDrained refuses to revert a migration while structured requests are
// pending: the binary rolled back to would have to finish them on a schema
// its successor wrote them for, and a rollback drains accepted work first
// (docs/operations.md, Rolling back).
func downDrained(ctx context.Context, m *migrate.Migrator, st *store.Store) error {
	migrations, _, err := m.Status(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(migrations, func(s migrate.Status) bool { return s.Applied }) {
		return nil // nothing to revert, and no table to count in
	}
	n, err := st.PendingRequests(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		return &exitError{code: 3, err: fmt.Errorf("migrate down: %d structured requests are still pending; start every replica "+
			"without the chat-structured-output experiment and wait until none is (chatd_structured_requests_pending is 0), "+
			"see docs/operations.md \"Rolling back\"; --force reverts anyway", n)}
	}
	return nil
}
