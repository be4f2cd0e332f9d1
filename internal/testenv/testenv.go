// Package testenv assembles a whole chatd in-process for integration tests:
// a database of the test's own (internal/dbtest), the notification hub, the
// runner, the HTTP API on an httptest server, and a mockllm provider reached
// through the real fantasy client of the configured provider type (by
// default openai-compatible, i.e. Chat Completions). Test code only.
package testenv

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/handoff"
	"github.com/chatd/chatd/internal/hooks"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/jwtauth"
	"github.com/chatd/chatd/internal/mcp"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/provider"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/tools"
	"github.com/chatd/chatd/internal/webhooks"
)

// Options shape an Env.
type Options struct {
	// Mock configures the provider; its zero value answers unscripted.
	Mock mockllm.Options
	// ProviderURL, if set, is the base URL (without /v1) of a mock LLM
	// running elsewhere, such as a mockllm process: no mock is started in
	// process, Mock is ignored and Env.Mock is nil.
	ProviderURL string
	// StructuredOutputOff leaves the experiment disabled.
	StructuredOutputOff bool
	// NoRunner starts no workers (StartRunner can start them later).
	NoRunner bool
	// NoHandoff: new chats are announced to every worker (chatd_work) and
	// claimed, as when no worker of the admitting process is idle, instead
	// of handed to an idle worker of this env (internal/handoff).
	NoHandoff bool
	// Runner overrides runner options (fast retries are the default here).
	Runner runner.Options
	// Workspace offers the read_file and list_files tools on this directory.
	Workspace string
	// Tools are more server tools, offered beside the workspace's.
	Tools []tools.Tool
	// MCP are MCP servers (a Manager the test started, often shared by a
	// package's tests; the Env does not stop it).
	MCP *mcp.Manager
	// Spawn enables spawn_agent with these caps (zero fields: defaults).
	Spawn *runner.SpawnOptions
	// Hooks are stop hooks (retried quickly here).
	Hooks []hooks.Config
	// ContextWindow of the mock model (0: unknown, no automatic compaction).
	ContextWindow int64
	// Provider is the provider type chatd is configured with for the mock
	// (config.TypeOpenAICompatible when empty); the mock serves every
	// type's wire format, each on its own route.
	Provider string
	// Model is the mock model's configuration; ID and Provider are set
	// here, Model defaults to "mock-1" and ContextWindow to the field
	// above. Use it for max_output_tokens, reasoning and thinking options,
	// strict_tools.
	Model config.Model
	// ExtraModels are more models on the same mock provider (Provider is
	// set here).
	ExtraModels []config.Model
	// CORSOrigins are the browser origins the API allows.
	CORSOrigins []string
	// MaxStreamsPerUser caps a user's open streams (0: the server's
	// default, 32; negative: no cap, for benchmarks with many streams).
	MaxStreamsPerUser int
	// MaxRunnablePerUser caps a user's runnable chats (0: the server's
	// default; -1: none).
	MaxRunnablePerUser int
	// MaxConcurrency and RequestsPerMinute are the mock provider's limits
	// (config max_concurrency, requests_per_minute).
	MaxConcurrency, RequestsPerMinute int
	// APIKey is the provider's API key, handed over through api_key_env
	// from a private environment (tests stay parallel).
	APIKey string
	// ProviderTransport, when set, carries chatd's provider calls (wrap
	// http.DefaultTransport to inject faults).
	ProviderTransport http.RoundTripper
	// Webhooks are receipt webhook endpoints: when set, the Env installs
	// their subscriptions and runs a Deliverer with WebhookOptions (Logger,
	// Metrics, Wake and Render are set here).
	Webhooks       []config.Webhook
	WebhookOptions webhooks.Options
	// JWT verifies an identity provider's JWTs beside API tokens (the
	// test runs it, or lets Verify fetch the keys).
	JWT *jwtauth.Verifier
	// APISignals are the API's test signals (fault a stream's reads, hear
	// token checks); Answered is armed here when ObserveHTTP was called.
	APISignals *httpapi.TestSignals
}

// apiKeyEnv names the (private) variable holding Options.APIKey.
const apiKeyEnv = "CHATD_TEST_PROVIDER_KEY"

// LogBuffer collects log output from concurrent writers.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *LogBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *LogBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Env is one running chatd.
type Env struct {
	t       testing.TB
	Pool    *pgxpool.Pool
	Store   *store.Store
	Hub     *notify.Hub
	Mock    *mockllm.Server
	MockURL string
	API     *httptest.Server
	Server  *httpapi.Server
	Models  *provider.Registry
	Logger  *slog.Logger
	// Metrics is the registry the API serves at /metrics; the store and
	// the runner count into it too.
	Metrics *prometheus.Registry
	// Config is the configuration the Env runs with.
	Config *config.Config
	// Deliverer delivers receipt webhooks (nil without Options.Webhooks).
	Deliverer *webhooks.Deliverer
	// Slots are the runner's running slots, shared with the API, which
	// hands over the chats it admits (nil with Options.NoHandoff).
	Slots *handoff.Slots[store.Turn]

	logs *LogBuffer

	runnerOpts runner.Options
	mu         sync.Mutex
	stopRunner func()

	stops    []func() // run by Stop, last first
	stopOnce sync.Once
}

// New starts an Env; everything stops when the test ends.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	return start(t, dbtest.New(t), o)
}

// Reopen starts another chatd on prev's database (a restart, possibly with
// other options, or a second replica). prev's workers are stopped first.
func Reopen(t testing.TB, prev *Env, o Options) *Env {
	t.Helper()
	prev.StopRunner()
	return start(t, prev.Pool, o)
}

// OnPool starts an Env on a pool the test made (a database of its own
// cluster, a traced pool). The test closes the pool, after Stop.
func OnPool(t testing.TB, pool *pgxpool.Pool, o Options) *Env {
	t.Helper()
	return start(t, pool, o)
}

// Stop stops the workers, the API and the notification hub, as the end of
// the test would (it is safe to call twice).
func (e *Env) Stop() {
	e.stopOnce.Do(func() {
		for i := len(e.stops) - 1; i >= 0; i-- {
			e.stops[i]()
		}
	})
}

func start(t testing.TB, pool *pgxpool.Pool, o Options) *Env {
	e := &Env{t: t, Pool: pool, logs: &LogBuffer{}}
	// Everything is logged, at debug level, into a buffer tests can read.
	var logOut io.Writer = e.logs
	if os.Getenv("CHATD_TEST_LOG") != "" {
		logOut = io.MultiWriter(e.logs, os.Stderr)
	}
	e.Logger = slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.Store = store.New(e.Pool)
	e.Metrics = prometheus.NewRegistry()
	e.Store.Instrument(e.Metrics)
	e.startModels(o)
	serverTools, toolNames := workspaceTools(t, o)

	t.Cleanup(e.Stop) // after the mock's Close in startModels: the workers stop first
	ctx, cancel := context.WithCancel(context.Background())
	e.Hub = notify.New(e.Pool, e.Logger)
	e.Store.Tell(e.Hub.ID(), e.Hub)
	relay := notify.NewRelay(e.Pool, e.Hub, e.Logger)
	var wg sync.WaitGroup
	wg.Go(func() { e.Hub.Run(ctx) })
	wg.Go(func() { relay.Run(ctx) })
	e.stops = append(e.stops, func() {
		e.StopRunner()
		cancel()
		wg.Wait()
	})
	select {
	case <-e.Hub.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("testenv: notification hub did not start")
	}
	e.startAPI(o, toolNames)
	if len(o.Webhooks) > 0 {
		e.startWebhooks(ctx, &wg, o)
	}
	e.setRunnerOptions(o, serverTools, relay)
	if !o.NoRunner {
		e.StartRunner()
	}
	return e
}

// startModels points the provider registry at o.ProviderURL, or at a mock
// started here.
func (e *Env) startModels(o Options) {
	base := o.ProviderURL
	if base == "" {
		e.Mock = mockllm.New(o.Mock)
		mockSrv := httptest.NewServer(e.Mock)
		e.t.Cleanup(mockSrv.Close)
		base = mockSrv.URL
	}
	e.MockURL = base + "/v1"
	cfg, err := mockConfig(o, base)
	if err != nil {
		e.t.Fatal(err)
	}
	e.Config = cfg
	po := provider.Options{Logger: e.Logger, Metrics: e.Metrics, Getenv: func(k string) string {
		if k == apiKeyEnv {
			return o.APIKey
		}
		return ""
	}}
	if o.ProviderTransport != nil {
		po.HTTPClient = &http.Client{Transport: o.ProviderTransport}
	}
	e.Models = provider.NewRegistry(cfg, po)
}

// workspaceTools are the server-side tools: the workspace's, then o.Tools.
func workspaceTools(t testing.TB, o Options) ([]tools.Tool, []string) {
	var serverTools []tools.Tool
	if o.Workspace != "" {
		var err error
		if serverTools, err = tools.Workspace(o.Workspace); err != nil {
			t.Fatal(err)
		}
	}
	serverTools = append(serverTools, o.Tools...)
	names := make([]string, 0, len(serverTools))
	for _, st := range serverTools {
		names = append(names, st.Name)
	}
	return serverTools, names
}

// startAPI serves the HTTP API on a test server, with the running slots
// the runner opens and closes.
func (e *Env) startAPI(o Options, toolNames []string) {
	exp := map[string]bool{httpapi.ExperimentStructuredOutput: !o.StructuredOutputOff}
	slots := handoff.New[store.Turn]() // opened and closed by the runner, started and stopped below
	if o.NoHandoff {
		slots = nil
	}
	e.Slots = slots
	e.Server = httpapi.New(httpapi.Options{Store: e.Store, Models: e.Models, Hub: e.Hub, Experiments: exp, ServerTools: toolNames, MCP: o.MCP,
		SpawnAgents: o.Spawn != nil, Slots: slots,
		Logger: e.Logger, Metrics: e.Metrics, CORSOrigins: o.CORSOrigins, MaxStreamsPerUser: o.MaxStreamsPerUser,
		MaxRunnablePerUser: o.MaxRunnablePerUser, JWT: o.JWT, TestSignals: APISignals(o.APISignals)})
	e.API = httptest.NewServer(e.Server)
	e.stops = append(e.stops, func() {
		e.Server.Shutdown()
		e.API.Close()
	})
}

func (e *Env) startWebhooks(ctx context.Context, wg *sync.WaitGroup, o Options) {
	wo := o.WebhookOptions
	wo.Logger, wo.Metrics, wo.Wake = e.Logger, e.Metrics, e.Hub.Finished()
	wo.Render = func(rs store.RequestState) (any, error) { return httpapi.RenderResult(rs) }
	var err error
	if e.Deliverer, err = webhooks.New(e.Store, o.Webhooks, wo); err != nil {
		e.t.Fatal(err)
	}
	if err := e.Store.SyncWebhooks(e.t.Context(), e.Deliverer.Subscriptions()); err != nil {
		e.t.Fatal(err)
	}
	wg.Go(func() { e.Deliverer.Run(ctx) })
}

// setRunnerOptions completes o.Runner with fast retries, two running slots
// and the environment's parts, for StartRunner.
func (e *Env) setRunnerOptions(o Options, serverTools []tools.Tool, relay *notify.Relay) {
	stopHooks, err := hooks.New(o.Hooks, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	stopHooks.SetRetry(2, 5*time.Millisecond)
	e.runnerOpts = o.Runner
	if e.runnerOpts.RetryBase == 0 {
		e.runnerOpts.RetryBase = 5 * time.Millisecond
	}
	if e.runnerOpts.RetryMax == 0 {
		e.runnerOpts.RetryMax = 50 * time.Millisecond
	}
	if e.runnerOpts.MaxRunning == 0 {
		e.runnerOpts.MaxRunning = 3 // one of them kept for users with nothing running
	}
	e.runnerOpts.Logger = e.Logger
	e.runnerOpts.Slots = e.Slots
	e.runnerOpts.Metrics = e.Metrics
	e.runnerOpts.Tools = serverTools
	e.runnerOpts.MCP = o.MCP
	if o.Spawn != nil {
		sp := *o.Spawn
		sp.StructuredOutput = !o.StructuredOutputOff
		e.runnerOpts.Spawn = &sp
	}
	e.runnerOpts.Hooks = stopHooks
	if e.runnerOpts.Preview == nil {
		e.runnerOpts.Preview = relay
	}
}

// mockConfig configures one provider of type o.Provider on the mock, and
// its models, through config.Parse (so the file's rules apply).
func mockConfig(o Options, base string) (*config.Config, error) {
	typ := cmp.Or(o.Provider, config.TypeOpenAICompatible)
	p := config.Provider{Name: "mock", Type: typ, BaseURL: base + "/v1", APIKeyEnv: apiKeyEnv,
		MaxConcurrency: o.MaxConcurrency, RequestsPerMinute: o.RequestsPerMinute}
	if typ == config.TypeAnthropic || typ == config.TypeGoogle {
		p.BaseURL = base // the Anthropic SDK adds /v1/messages itself, genai /v1beta
	}
	m := o.Model
	m.ID, m.Provider, m.Model = "mock/model", "mock", cmp.Or(m.Model, "mock-1")
	m.ContextWindow = cmp.Or(m.ContextWindow, o.ContextWindow)
	models := []config.Model{m}
	for _, x := range o.ExtraModels {
		x.Provider, x.Model = "mock", cmp.Or(x.Model, "mock-1")
		models = append(models, x)
	}
	doc, err := json.Marshal(config.Config{Providers: []config.Provider{p}, Models: models, DefaultModel: m.ID})
	if err != nil {
		return nil, err
	}
	return config.Parse(doc)
}

// Logs returns everything logged so far (at debug level and up).
func (e *Env) Logs() string { return e.logs.String() }

// StartRunner starts workers (a "server start").
func (e *Env) StartRunner() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopRunner != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := runner.New(e.Store, e.Models, e.Hub, e.runnerOpts)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	e.stopRunner = func() {
		cancel()
		<-done
	}
}

// StopRunner stops the workers and waits for them (a graceful "server stop").
func (e *Env) StopRunner() {
	e.mu.Lock()
	stop := e.stopRunner
	e.stopRunner = nil
	e.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Client returns an API client for a user (created on first use).
func (e *Env) Client(userName string) *client.Client {
	e.t.Helper()
	token, err := e.Store.CreateToken(context.Background(), userName)
	if err != nil {
		e.t.Fatal(err)
	}
	return client.New(e.API.URL, token, e.API.Client())
}

// Token returns a fresh token for a user.
func (e *Env) Token(userName string) string {
	e.t.Helper()
	token, err := e.Store.CreateToken(context.Background(), userName)
	if err != nil {
		e.t.Fatal(err)
	}
	return token
}

var httpObserver atomic.Pointer[func(httpapi.Answer)]

// ObserveHTTP makes every API server built afterwards by this test binary
// with APISignals tell f the route pattern and status of each answered
// request (httpapi's TestMain checks that each is documented).
func ObserveHTTP(f func(httpapi.Answer)) { httpObserver.Store(&f) }

// APISignals are the test signals of an API server: s (new ones when nil),
// with Answered armed when ObserveHTTP was called.
func APISignals(s *httpapi.TestSignals) *httpapi.TestSignals {
	if s == nil {
		s = &httpapi.TestSignals{}
	}
	if f := httpObserver.Load(); f != nil {
		s.Answered.InitFunc(*f)
	}
	return s
}
