package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/testsignal"
)

// Options tune a Manager.
type Options struct {
	Logger  *slog.Logger
	Metrics *prometheus.Registry
	// Getenv reads the variables named by env and headers (os.LookupEnv
	// when nil).
	Getenv Getenv
	// Reserved are tool names no server may offer.
	Reserved []string
	// RetryBase and RetryMax shape the reconnect backoff (1s, 30s).
	RetryBase, RetryMax time.Duration
	// TestSignals are points tests hear from; nil in production.
	TestSignals *TestSignals
}

// TestSignals are the points of a Manager that tests wait for instead of
// sleeping. Production leaves them zero.
type TestSignals struct {
	// Started hears every stdio child as it starts.
	Started testsignal.Signal[Child]
	// Sending hears the tool of every call just before the call is sent.
	Sending testsignal.Signal[Tool]
}

// Child is a server's process.
type Child struct {
	Server string
	PID    int
}

// Manager owns the connections to the configured servers.
type Manager struct {
	opts    Options
	log     *slog.Logger
	getenv  Getenv
	servers map[string]*server
	names   []string
	m       mcpMetrics

	stop      context.CancelFunc
	wg        sync.WaitGroup
	closed    chan struct{}
	closeOnce sync.Once
}

// New checks nothing (config.Parse did) and connects nothing: Start does.
func New(cfgs []ServerConfig, o Options) *Manager {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Getenv == nil {
		o.Getenv = os.LookupEnv
	}
	if o.RetryBase <= 0 {
		o.RetryBase = time.Second
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 30 * time.Second
	}
	if o.TestSignals == nil {
		o.TestSignals = &TestSignals{}
	}
	m := &Manager{opts: o, log: o.Logger, getenv: o.Getenv, servers: map[string]*server{}, closed: make(chan struct{})}
	for _, c := range cfgs {
		d, _ := c.timeout()
		if c.Chats == "" {
			c.Chats = ChatsOptIn
		}
		s := &server{cfg: c, timeout: d, m: m, log: m.log.With(slog.String("mcp_server", c.Name)),
			changed: make(chan struct{}), wake: make(chan struct{}, 1)}
		m.servers[c.Name] = s
		m.names = append(m.names, c.Name)
	}
	m.instrument(o.Metrics)
	return m
}

// Start connects every server in the background and keeps reconnecting,
// with backoff, until Close.
func (m *Manager) Start(ctx context.Context) {
	if m == nil {
		return
	}
	ctx, m.stop = context.WithCancel(context.WithoutCancel(ctx))
	for _, name := range m.names {
		s := m.servers[name]
		m.wg.Go(func() { s.supervise(ctx) })
	}
}

// Close disconnects every server and stops its process.
func (m *Manager) Close() {
	if m == nil || m.stop == nil {
		return
	}
	m.closeOnce.Do(func() {
		m.stop()
		m.wg.Wait()
		close(m.closed)
	})
}

// Names are the configured servers.
func (m *Manager) Names() []string {
	if m == nil {
		return nil
	}
	return m.names
}

// Usable says why a chat of model cannot opt into name, or nil.
func (m *Manager) Usable(name, model string) error {
	s := m.server(name)
	if s == nil {
		return fmt.Errorf("%q is not a configured MCP server", name)
	}
	if len(s.cfg.Models) > 0 && !slices.Contains(s.cfg.Models, model) {
		return fmt.Errorf("MCP server %q is not available to model %q", name, model)
	}
	return nil
}

// Reserves reports whether a client tool name falls in a server's
// namespace (name__...).
func (m *Manager) Reserves(tool string) bool {
	server, _, ok := strings.Cut(tool, Separator)
	return ok && m.server(server) != nil
}

// Tools are the tools a chat of model that opted into optIn is offered.
func (m *Manager) Tools(model string, optIn []string) []Tool {
	if m == nil {
		return nil
	}
	var out []Tool
	for _, name := range m.names {
		s := m.servers[name]
		if s.cfg.usableBy(model, optIn) {
			out = append(out, s.listed()...)
		}
	}
	return out
}

// Lookup finds a namespaced tool the chat may call.
func (m *Manager) Lookup(model string, optIn []string, name string) (Tool, bool) {
	server, tool, ok := strings.Cut(name, Separator)
	s := m.server(server)
	if !ok || s == nil || !s.cfg.usableBy(model, optIn) {
		return Tool{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tools[tool]
	return t, ok
}

// Changed returns a channel closed at the next change of the server's
// connection or tool list (nil for an unknown server).
func (m *Manager) Changed(server string) <-chan struct{} {
	s := m.server(server)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Up reports whether chatd holds a live connection to the server.
func (m *Manager) Up(server string) bool {
	s := m.server(server)
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session != nil && !s.session.closed()
}

// Idempotent reports the server's at-least-once rule.
func (m *Manager) Idempotent(server string) bool {
	s := m.server(server)
	return s != nil && s.cfg.Idempotent
}

func (m *Manager) server(name string) *server {
	if m == nil {
		return nil
	}
	return m.servers[name]
}

// ErrCancelled is returned when ctx ended the call: nothing is known of
// its outcome and nothing should be recorded.
var ErrCancelled = errors.New("mcp call cancelled")

// Call calls a tool found by Lookup within the server's timeout. Every
// failure of the server — unreachable, too slow, crashed, an oversized or
// unusable answer — is an error Result for the model; only ctx ending
// returns an error.
func (m *Manager) Call(ctx context.Context, t Tool, args json.RawMessage) (Result, error) {
	s := m.server(t.Server)
	if s == nil {
		return errorResult(fmt.Sprintf("The MCP server %q is not configured.", t.Server)), nil
	}
	start := time.Now()
	res, outcome := s.call(ctx, t, args)
	if ctx.Err() != nil {
		m.m.calls.WithLabelValues(t.Server, t.Tool, "cancelled").Inc()
		return Result{}, ErrCancelled
	}
	m.m.calls.WithLabelValues(t.Server, t.Tool, outcome).Inc()
	m.m.latency.WithLabelValues(t.Server, t.Tool).Observe(time.Since(start).Seconds())
	return res, nil
}

// NotRepeated counts a call its caller answered with an error instead of
// sending it again: an earlier send was cut off with its worker, and the
// server is not idempotent.
func (m *Manager) NotRepeated(t Tool) {
	if m != nil {
		m.m.calls.WithLabelValues(t.Server, t.Tool, outcomeNotRepeated).Inc()
	}
}

// Call outcomes, the label of chatd_mcp_calls_total.
const (
	outcomeOK          = "ok"
	outcomeToolError   = "tool_error"   // the tool answered isError
	outcomeTimeout     = "timeout"      // no answer within the timeout
	outcomeUnavailable = "unavailable"  // no connection, or it broke
	outcomeError       = "error"        // a protocol error from the server
	outcomeTooLarge    = "too_large"    // over MaxResultBytes (or the message cap)
	outcomeNotRepeated = "not_repeated" // cut off with its worker, not sent again
)

func (s *server) call(ctx context.Context, t Tool, args json.RawMessage) (Result, string) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	sess, err := s.await(ctx)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return errorResult(fmt.Sprintf("The MCP server %q could not be reached within %s: %s.", s.cfg.Name, s.timeout, s.lastError())), outcomeUnavailable
		}
		return Result{}, outcomeUnavailable
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	s.m.opts.TestSignals.Sending.Signal(t)
	res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: t.Tool, Arguments: args})
	var wire *jsonrpc.Error
	switch {
	case err == nil:
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		s.log.Warn("mcp call timed out", slog.String("tool", t.Tool), slog.Duration("timeout", s.timeout))
		return errorResult(fmt.Sprintf("The MCP server %q did not answer within %s; the call was abandoned.", s.cfg.Name, s.timeout)), outcomeTimeout
	case ctx.Err() != nil:
		return Result{}, outcomeUnavailable
	case errors.As(err, &wire):
		s.log.Info("mcp call refused", slog.String("tool", t.Tool), slog.String("error", err.Error()))
		return errorResult(fmt.Sprintf("The MCP server %q answered with an error: %s", s.cfg.Name, cut(wire.Message, 1024))), outcomeError
	default:
		// The connection broke (the process died, the stream was cut, a
		// message was too large): the call's effect is unknown.
		s.log.Warn("mcp connection failed during a call", slog.String("tool", t.Tool), slog.String("error", err.Error()))
		sess.breakOff()
		return errorResult(fmt.Sprintf("The MCP server %q closed the connection during the call (it may have crashed); "+
			"whether the call took effect is unknown.", s.cfg.Name)), outcomeUnavailable
	}
	out, err := encodeResult(res)
	if err != nil {
		return errorResult(fmt.Sprintf("The result of %s cannot be used: %s.", t.Name, err)), outcomeTooLarge
	}
	if out.IsError {
		return out, outcomeToolError
	}
	return out, outcomeOK
}

// server is one configured server and its current connection.
type server struct {
	cfg     ServerConfig
	timeout time.Duration
	m       *Manager
	log     *slog.Logger

	mu      sync.Mutex
	session *session
	tools   map[string]Tool // admitted, by the server's names; kept while disconnected
	order   []string
	lastErr string
	changed chan struct{} // closed when session changes
	wake    chan struct{} // a call waits for a connection: retry now

	refreshMu sync.Mutex
}

// session is a connection and whether it ended.
type session struct {
	*sdk.ClientSession
	done chan struct{}
	// broken: a call found the connection failed, before Wait noticed
	// (until then a call would be sent on a dead connection).
	broken atomic.Bool
}

func (s *session) closed() bool {
	if s.broken.Load() {
		return true
	}
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// breakOff marks the session failed and closes it: the next call waits for
// the supervisor's new connection instead of failing on this one.
func (s *session) breakOff() {
	if s.broken.CompareAndSwap(false, true) {
		go func() { _ = s.Close() }()
	}
}

func (s *server) listed() []Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Tool, 0, len(s.order))
	for _, n := range s.order {
		out = append(out, s.tools[n])
	}
	return out
}

func (s *server) lastError() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastErr == "" {
		return "not connected yet"
	}
	return s.lastErr
}

func (s *server) setSession(sess *session, errText string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.session = sess
	if errText != "" {
		s.lastErr = errText
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// await returns the live session, asking the supervisor to connect now if
// there is none, until ctx ends.
func (s *server) await(ctx context.Context) (*session, error) {
	for {
		s.mu.Lock()
		sess, changed := s.session, s.changed
		s.mu.Unlock()
		if sess != nil && !sess.closed() {
			return sess, nil
		}
		select {
		case s.wake <- struct{}{}:
		default:
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		case <-s.m.closed:
			return nil, errors.New("closed")
		}
	}
}

// connectTimeout bounds the start of a server: process or HTTP handshake,
// initialize and the first tool listing.
const connectTimeout = 30 * time.Second

// supervise connects, waits for the connection to end and reconnects with
// backoff, until ctx ends; then it closes the connection (stopping a stdio
// server's process).
func (s *server) supervise(ctx context.Context) {
	failures := 0
	for ctx.Err() == nil {
		began := time.Now()
		sess, err := s.connect(ctx)
		if err != nil {
			failures++
			s.m.m.connects.WithLabelValues(s.cfg.Name, "error").Inc()
			s.log.Warn("mcp server connection failed", slog.Int("failures", failures), slog.String("error", err.Error()))
			s.setSession(nil, err.Error())
		} else {
			s.m.m.connects.WithLabelValues(s.cfg.Name, "ok").Inc()
			s.setSession(sess, "")
			select {
			case <-ctx.Done():
				_ = sess.Close()
				<-sess.done
				s.setSession(nil, "")
				return
			case <-sess.done:
			}
			s.setSession(nil, "the connection ended")
			s.log.Warn("mcp server disconnected", slog.Duration("after", time.Since(began)))
			if time.Since(began) > time.Minute {
				failures = 0
			}
			failures++
		}
		if !s.pause(ctx, failures) {
			return
		}
	}
}

// pause waits out the backoff of the n-th failure in a row; a waiting call
// shortens it to the minimum.
func (s *server) pause(ctx context.Context, n int) bool {
	d := s.m.opts.RetryBase << min(n-1, 16)
	d = min(d, s.m.opts.RetryMax)
	d += time.Duration(rand.Int64N(int64(d)/4 + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-s.wake:
		// Someone needs the server: retry after the base delay only.
		select {
		case <-ctx.Done():
			return false
		case <-time.After(min(d, s.m.opts.RetryBase)):
		}
	}
	return true
}

func (s *server) connect(ctx context.Context) (*session, error) {
	tr, err := s.transport()
	if err != nil {
		return nil, err
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "chatd", Version: "1"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(_ context.Context, req *sdk.ToolListChangedRequest) {
			go s.refresh(ctx, req.Session, "list_changed")
		},
	})
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	cs, err := client.Connect(cctx, tr, nil)
	if err != nil {
		return nil, err
	}
	sess := &session{ClientSession: cs, done: make(chan struct{})}
	go func() {
		_ = cs.Wait()
		close(sess.done)
	}()
	if err := s.list(cctx, cs, ""); err != nil {
		_ = cs.Close()
		<-sess.done
		return nil, fmt.Errorf("list tools: %w", err)
	}
	return sess, nil
}

// refresh lists the tools again (the server said they changed).
func (s *server) refresh(ctx context.Context, sess *sdk.ClientSession, why string) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := s.list(ctx, sess, why); err != nil {
		s.log.Warn("mcp tool refresh failed", slog.String("error", err.Error()))
	}
}

// list reads every page of tools/list and admits the tools. why, when set,
// is counted as a refresh before the change is announced: a waiter woken by
// the announcement sees the count (it once came after, and a test waiting
// for both could sleep through the only wake-up).
func (s *server) list(ctx context.Context, sess *sdk.ClientSession, why string) error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	tools := map[string]Tool{}
	var order []string
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		if !s.cfg.offers(t.Name) {
			continue
		}
		if len(order) >= MaxTools {
			s.m.m.refused.WithLabelValues(s.cfg.Name, refusedTooMany).Inc()
			continue
		}
		a, reason, err := admit(s.cfg.Name, t, s.m.opts.Reserved)
		if err != nil {
			s.m.m.refused.WithLabelValues(s.cfg.Name, reason).Inc()
			s.log.Warn("mcp tool refused", slog.String("tool", cut(t.Name, 128)), slog.String("reason", reason), slog.String("error", err.Error()))
			continue
		}
		if _, dup := tools[t.Name]; dup {
			continue
		}
		tools[t.Name] = a
		order = append(order, t.Name)
	}
	if why != "" {
		s.m.m.refreshes.WithLabelValues(s.cfg.Name, why).Inc()
	}
	s.mu.Lock()
	s.tools, s.order = tools, order
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	s.log.Info("mcp tools listed", slog.Int("tools", len(order)))
	return nil
}
