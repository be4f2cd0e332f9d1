// Package httpapi serves the public HTTP API under /api/v1 plus /healthz and
// /readyz. Handlers return errors; one renderer turns them into the single
// JSON error shape. Rows are projected to the public types of package client
// here, and internal parts and fields never leave this layer.
package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/provider"
	"github.com/chatd/chatd/internal/store"
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
	// MaxBodyBytes caps request bodies (default 1 MiB).
	MaxBodyBytes int64
	Logger       *slog.Logger
}

// Server is the HTTP API.
type Server struct {
	store       *store.Store
	models      *provider.Registry
	hub         *notify.Hub
	experiments map[string]bool
	serverTools map[string]bool
	maxBody     int64
	log         *slog.Logger
	mux         *http.ServeMux

	feeds        *feeds
	streams      atomic.Int64
	shutdown     chan struct{}
	shutdownOnce sync.Once
}

// New builds the API.
func New(o Options) *Server {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{store: o.Store, models: o.Models, hub: o.Hub, experiments: o.Experiments,
		serverTools: map[string]bool{}, maxBody: o.MaxBodyBytes, log: o.Logger, mux: http.NewServeMux(),
		shutdown: make(chan struct{})}
	for _, n := range o.ServerTools {
		s.serverTools[n] = true
	}
	s.feeds = &feeds{s: s, m: map[uuid.UUID]*feed{}}
	s.routes()
	return s
}

// route is one documented endpoint.
type route struct {
	method, pattern string
	auth            bool
	h               handlerFunc
}

func (s *Server) routeTable() []route {
	return []route{
		{"GET", "/healthz", false, s.healthz},
		{"GET", "/readyz", false, s.readyz},
		{"POST", "/api/v1/chats", true, s.createChat},
		{"GET", "/api/v1/chats", true, s.listChats},
		{"GET", "/api/v1/chats/watch", true, s.watch},
		{"GET", "/api/v1/chats/{chat}", true, s.getChat},
		{"PATCH", "/api/v1/chats/{chat}", true, s.updateChat},
		{"GET", "/api/v1/chats/{chat}/messages", true, s.listMessages},
		{"GET", "/api/v1/chats/{chat}/stream", true, s.stream},
		{"POST", "/api/v1/chats/{chat}/messages", true, s.sendMessage},
		{"PATCH", "/api/v1/chats/{chat}/messages/{message}", true, s.editMessage},
		{"DELETE", "/api/v1/chats/{chat}/queue/{queued}", true, s.deleteQueued},
		{"POST", "/api/v1/chats/{chat}/interrupt", true, s.interrupt},
		{"POST", "/api/v1/chats/{chat}/compact", true, s.compact},
		{"POST", "/api/v1/chats/{chat}/tool-results", true, s.toolResults},
		{"GET", "/api/v1/structured-outputs/{request_id}", true, s.getStructuredOutput},
	}
}

func (s *Server) routes() {
	for _, rt := range s.routeTable() {
		h := rt.h
		var handler http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := h(w, r); err != nil {
				s.render(w, r, err)
			}
		})
		if rt.auth {
			handler = s.authenticate(handler)
		}
		s.mux.Handle(rt.method+" "+rt.pattern, handler)
	}
}

// ServeHTTP routes the request; the mux's own 404 and 405 answers are
// replaced by the JSON error shape.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r) // sets the path values Handler does not
		return
	}
	probe := &statusProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if allow := probe.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if probe.status == http.StatusMethodNotAllowed {
		s.render(w, r, errorf(http.StatusMethodNotAllowed, "Method %s is not allowed here.", r.Method))
		return
	}
	s.render(w, r, errorf(http.StatusNotFound, "No route for %s %s.", r.Method, r.URL.Path))
}

// statusProbe records what the mux's fallback handler would answer.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(code int)        { p.status = code }

type ctxKey int

const userKey ctxKey = 0

// user is the authenticated caller.
type user struct {
	ID   uuid.UUID
	Name string
}

func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		token = strings.TrimSpace(token)
		if !ok || token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="chatd"`)
			s.render(w, r, errorf(http.StatusUnauthorized, "Authorization: Bearer <token> is required."))
			return
		}
		row, err := s.store.Authenticate(r.Context(), token)
		if err != nil {
			if isNotFound(err) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="chatd", error="invalid_token"`)
				s.render(w, r, errorf(http.StatusUnauthorized, "The token is not valid."))
				return
			}
			s.render(w, r, err)
			return
		}
		ctx := context.WithValue(r.Context(), userKey, user{ID: row.ID, Name: row.Name})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func currentUser(r *http.Request) user { return r.Context().Value(userKey).(user) }

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, client.Error{Message: "The database is not reachable."})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}
