// Package httpapi serves the public HTTP API under /api/v1 plus /healthz and
// /readyz. Handlers return errors; one renderer turns them into the single
// JSON error shape. Rows are projected to the public types of package client
// here, and internal parts and fields never leave this layer.
package httpapi

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/handoff"
	"github.com/chatd/chatd/internal/jwtauth"
	"github.com/chatd/chatd/internal/longpoll"
	"github.com/chatd/chatd/internal/mcp"
	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/provider"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/testsignal"
)

var errEOF = io.EOF

// ExperimentStructuredOutput gates admission of new structured requests.
const ExperimentStructuredOutput = "chat-structured-output"

// Options configure the API.
type Options struct {
	Store       *store.Store
	Models      *provider.Registry
	Hub         *notify.Hub
	Experiments map[string]bool
	// ServerTools are the names of server-executed tools, which client
	// tools may not take.
	ServerTools []string
	// MCP are the operator's MCP servers: chats opt into them by name, and
	// client tools may not take a name in their namespace (may be nil).
	MCP *mcp.Manager
	// SpawnAgents: the server offers spawn_agent, so chats may opt in
	// ("spawn_agents": true); its name is then a server tool's.
	SpawnAgents bool
	// MaxBodyBytes caps request bodies (default 1 MiB).
	MaxBodyBytes int64
	// BodyReadTimeout bounds the reading of one request body (default
	// 30s): a client that stalls mid-body gets a 408 instead of holding a
	// connection and a handler. It is a per-request deadline, so event
	// streams, which have no body, are never cut by it.
	BodyReadTimeout time.Duration
	// MaxStreamsPerUser caps the event streams (chat streams and watches)
	// one user has open on this process (default 32; -1: no cap); one more
	// is answered 429 with Retry-After.
	MaxStreamsPerUser int
	// MaxRunnablePerUser caps one user's runnable chats (running or being
	// interrupted, on every replica): a create or a send that would start
	// one more is answered 429 with Retry-After (default
	// DefaultMaxRunnablePerUser; -1: no cap).
	MaxRunnablePerUser int
	Logger             *slog.Logger
	// AccessLogLevel is the level of the one access line per request (the
	// zero value is info); probes and scrapes are always at debug.
	AccessLogLevel slog.Level
	// CORSOrigins are the browser origins allowed to call the API
	// (ParseOrigins); empty: CORS is off.
	CORSOrigins []string
	// Metrics receives the API's metrics and is what GET /metrics serves
	// (the runner and the store register theirs on the same registry). Nil:
	// a registry of the API's own.
	Metrics *prometheus.Registry
	// Slots are this process's running slots (runner.Options.Slots): while
	// one is free, a new chat is claimed for it in its admission and
	// handed over. Nil: chats are announced to every replica (chatd_work).
	Slots *handoff.Slots[store.Turn]
	// JWT verifies the JWTs of the application's identity provider, which
	// then stand for its users beside API tokens; nil: API tokens only.
	JWT *jwtauth.Verifier
	// TestSignals are points tests fault or hear from; nil in production.
	TestSignals *TestSignals
}

// TestSignals are the API's points that tests fault, hold or hear from.
// Production leaves them nil.
type TestSignals struct {
	// StreamRead, when set, makes every read of a chat stream (its first,
	// its own catch-ups and its feed's) by calling read or not: tests fail
	// reads, or hold them, wrapping the real one.
	StreamRead func(ctx context.Context, q StreamQuery, read func(context.Context) (store.StreamRead, error)) (store.StreamRead, error)
	// Answered hears the route and status of every request a route
	// answered: tests check that each is documented.
	Answered testsignal.Signal[Answer]
	// TokenChecked hears each time the server asks the database whether a
	// token still works.
	TokenChecked testsignal.Signal[struct{}]
	// LongPoll are the structured-output long polls' signals.
	LongPoll longpoll.TestSignals
}

// Answer is a route's pattern and the status it answered a request with.
type Answer struct {
	Pattern string
	Status  int
}

// StreamQuery says which read of a stream TestSignals.StreamRead wraps.
type StreamQuery struct {
	ChatID    uuid.UUID
	Watermark int64
	Full      bool // the stream's first read (the history after after_id)
	Feed      bool // the chat's shared feed, not one stream
}

// Defaults of Options.
const (
	DefaultBodyReadTimeout   = 30 * time.Second
	DefaultMaxStreamsPerUser = 32
	// DefaultMaxRunnablePerUser is generous: one service token often
	// stands for all of an application's users.
	DefaultMaxRunnablePerUser = 5000
)

// Timeouts of the http.Server that serves the API (NewHTTPServer).
const (
	// ReadHeaderTimeout bounds the request line and headers.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes a keep-alive connection with no request.
	IdleTimeout = 2 * time.Minute
)

// NewHTTPServer is the http.Server for the API: header and idle timeouts.
// It has no ReadTimeout or WriteTimeout, which would cut event streams;
// bodies are bounded per request (Options.BodyReadTimeout).
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, IdleTimeout: IdleTimeout}
}

// Server is the HTTP API.
type Server struct {
	store       *store.Store
	models      *provider.Registry
	hub         *notify.Hub
	experiments map[string]bool
	serverTools map[string]bool
	spawnAgents bool
	mcp         *mcp.Manager
	slots       *handoff.Slots[store.Turn]
	maxRunnable int // 0: no cap
	maxBody     int64
	bodyTimeout time.Duration
	maxStreams  int
	log         *slog.Logger
	accessLevel slog.Level
	corsOrigins []string
	jwt         *jwtauth.Verifier
	mux         *http.ServeMux
	openapi     []byte
	queryNames  map[string][]string // "METHOD pattern": the documented query parameters

	feeds        *feeds
	tokens       *tokenWatches
	streams      atomic.Int64
	userStreamMu sync.Mutex
	userStreams  map[uuid.UUID]int // open streams by user, for MaxStreamsPerUser
	shutdown     chan struct{}
	shutdownOnce sync.Once
	signals      *TestSignals

	metrics      http.Handler // promhttp over Options.Metrics
	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	scrapeMu     sync.Mutex // one scrape at a time; guards depths
	depths       store.Depths
	depthsOK     bool
}

// New builds the API.
func New(o Options) *Server {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.BodyReadTimeout <= 0 {
		o.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if o.MaxStreamsPerUser == 0 {
		o.MaxStreamsPerUser = DefaultMaxStreamsPerUser
	}
	if o.MaxRunnablePerUser == 0 {
		o.MaxRunnablePerUser = DefaultMaxRunnablePerUser
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Logger = slog.New(contextHandler{o.Logger.Handler()})
	if o.Metrics == nil {
		o.Metrics = prometheus.NewRegistry()
	}
	s := &Server{store: o.Store, models: o.Models, hub: o.Hub, experiments: o.Experiments,
		serverTools: map[string]bool{}, mcp: o.MCP, maxBody: o.MaxBodyBytes, bodyTimeout: o.BodyReadTimeout, maxStreams: o.MaxStreamsPerUser,
		userStreams: map[uuid.UUID]int{}, log: o.Logger, accessLevel: o.AccessLogLevel, corsOrigins: o.CORSOrigins, mux: http.NewServeMux(),
		shutdown: make(chan struct{}), signals: o.TestSignals}
	if s.signals == nil {
		s.signals = &TestSignals{}
	}
	s.spawnAgents, s.slots, s.jwt = o.SpawnAgents, o.Slots, o.JWT
	s.maxRunnable = max(o.MaxRunnablePerUser, 0)
	if o.SpawnAgents {
		s.serverTools[store.SpawnTool] = true
	}
	for _, n := range o.ServerTools {
		s.serverTools[n] = true
	}
	s.feeds = &feeds{s: s, m: map[uuid.UUID]*feed{}}
	s.tokens = &tokenWatches{s: s, m: map[uuid.UUID]*tokenWatch{}}
	s.instrument(o.Metrics)
	s.routes()
	s.openapi = openAPIDocument(s.routeTable(), routeDocs())
	return s
}

// route is one documented endpoint and the scope a caller needs for it
// ("": no credential at all). authorize is the one gate: a route's scope
// is all it takes to protect it.
type route struct {
	method, pattern string
	scope           client.Scope
	h               handlerFunc
}

// Scopes of the route table.
const (
	scopeNone  = client.Scope("")
	scopeRead  = client.ScopeRead
	scopeWrite = client.ScopeWrite
	scopeAdmin = client.ScopeAdmin
)

// routeTable is every route of the API. Each needs its entry in routeDocs
// (routedocs.go); TestEveryRouteIsDocumented fails otherwise.
func (s *Server) routeTable() []route {
	return []route{
		{"GET", "/healthz", scopeNone, s.healthz},
		{"GET", "/readyz", scopeNone, s.readyz},
		{"GET", "/metrics", scopeNone, s.serveMetrics},
		{"GET", "/api/v1/openapi.json", scopeNone, s.openAPI},
		{"POST", "/api/v1/chats", scopeWrite, s.createChat},
		{"GET", "/api/v1/chats", scopeRead, s.listChats},
		{"GET", "/api/v1/chats/watch", scopeRead, s.watch},
		{"GET", "/api/v1/chats/{chat}", scopeRead, s.getChat},
		{"PATCH", "/api/v1/chats/{chat}", scopeWrite, s.updateChat},
		{"DELETE", "/api/v1/chats/{chat}", scopeWrite, s.deleteChat},
		{"GET", "/api/v1/chats/{chat}/export", scopeRead, s.exportChat},
		{"GET", "/api/v1/chats/{chat}/messages", scopeRead, s.listMessages},
		{"GET", "/api/v1/chats/{chat}/stream", scopeRead, s.stream},
		{"POST", "/api/v1/chats/{chat}/stream-ticket", scopeRead, s.streamTicket},
		{"POST", "/api/v1/chats/{chat}/messages", scopeWrite, s.sendMessage},
		{"PATCH", "/api/v1/chats/{chat}/messages/{message}", scopeWrite, s.editMessage},
		{"DELETE", "/api/v1/chats/{chat}/queue/{queued}", scopeWrite, s.deleteQueued},
		{"POST", "/api/v1/chats/{chat}/interrupt", scopeWrite, s.interrupt},
		{"POST", "/api/v1/chats/{chat}/compact", scopeWrite, s.compact},
		{"POST", "/api/v1/chats/{chat}/tool-results", scopeWrite, s.toolResults},
		{"GET", "/api/v1/structured-outputs/{request_id}", scopeRead, s.getStructuredOutput},
		{"POST", "/api/v1/tokens", scopeAdmin, s.createToken},
		{"GET", "/api/v1/tokens", scopeAdmin, s.listTokens},
		{"DELETE", "/api/v1/tokens/{token}", scopeAdmin, s.revokeToken},
		{"GET", "/api/v1/users", scopeAdmin, s.listUsers},
		{"DELETE", "/api/v1/users/{user}", scopeAdmin, s.eraseUser},
		{"GET", "/api/v1/users/{user}/export", scopeAdmin, s.exportUser},
	}
}

func (s *Server) routes() {
	docs := routeDocs()
	s.queryNames = map[string][]string{}
	for _, rt := range s.routeTable() {
		for _, q := range docs[rt.method+" "+rt.pattern].query {
			s.queryNames[rt.method+" "+rt.pattern] = append(s.queryNames[rt.method+" "+rt.pattern], q.name)
		}
		s.mux.Handle(rt.method+" "+rt.pattern, s.handler(rt))
	}
}

// handler wraps a route's handler: authentication, the error renderer, and
// a recovery that answers a panic with the JSON 500 instead of a dropped
// connection.
func (s *Server) handler(rt route) http.Handler {
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.ErrorContext(r.Context(), "handler panicked", slog.String("method", r.Method),
				slog.String("path", r.URL.Path), slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
			writeJSON(w, http.StatusInternalServerError, client.Error{Message: "Internal error."})
		}()
		if v := r.PathValue("chat"); v != "" {
			if id, err := uuid.Parse(v); err == nil {
				noteChat(r, id)
			}
		}
		if r.ContentLength != 0 {
			// A body that stalls is cut off (decodeBody answers 408; a
			// route that reads none would wait for it while discarding it).
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout))
		}
		if rt.scope != scopeNone {
			if err := s.checkQuery(r, rt); err != nil {
				s.render(w, r, err)
				return
			}
		}
		if err := rt.h(w, r); err != nil {
			s.render(w, r, err)
		}
	})
	if rt.scope != scopeNone {
		h = s.authorize(rt.scope, h)
	}
	return h
}

// checkQuery refuses query parameters the route does not document (a typo
// such as ?limt=5 would otherwise be ignored) and repeated ones.
func (s *Server) checkQuery(r *http.Request, rt route) error {
	q := r.URL.Query()
	allowed := s.queryNames[rt.method+" "+rt.pattern]
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(allowed, name) {
			return badField(name, "unknown query parameter")
		}
		if len(q[name]) > 1 {
			return badField(name, "given more than once")
		}
	}
	return nil
}

// ServeHTTP routes the request with its request id, counts it and writes
// its access log line; the mux's own 404 and 405 answers are replaced by the
// JSON error shape.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.serveObserved(w, r, s.route)
}
