package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chatd/chatd/internal/prom"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/tracing"
)

// RequestIDHeader carries the request id: taken from the request when it is
// acceptable (see acceptableRequestID), minted otherwise, and always echoed
// in the response.
const RequestIDHeader = "X-Request-ID"

// maxRequestIDLen bounds an accepted request id.
const maxRequestIDLen = 128

// reqInfo is what the logs of one HTTP request carry.
type reqInfo struct {
	id string

	mu      sync.Mutex
	chatID  string
	userID  string
	auth    authMethod
	tokenID string
	actorID string
}

const infoKey ctxKey = 1

func infoFrom(ctx context.Context) *reqInfo {
	info, _ := ctx.Value(infoKey).(*reqInfo)
	return info
}

// noteChat records the chat a request is about, for its log lines.
func noteChat(r *http.Request, id uuid.UUID) {
	if info := infoFrom(r.Context()); info != nil {
		info.mu.Lock()
		info.chatID = id.String()
		info.mu.Unlock()
	}
}

// noteIdentity records who the request is for and how it proved it, for
// its access line: the user, and the token and its own user when the token
// acts for another (never a secret or a JWT).
func noteIdentity(r *http.Request, u user) {
	info := infoFrom(r.Context())
	if info == nil {
		return
	}
	info.mu.Lock()
	defer info.mu.Unlock()
	info.userID, info.auth = u.ID.String(), u.Via
	if u.TokenID != uuid.Nil {
		info.tokenID = u.TokenID.String()
	}
	if u.ActorID != uuid.Nil {
		info.actorID = u.ActorID.String()
	}
}

// identityAttrs are the access line's attributes of the caller.
func (i *reqInfo) identityAttrs() []slog.Attr {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.userID == "" {
		return nil
	}
	attrs := []slog.Attr{slog.String("user_id", i.userID), slog.String("auth", string(i.auth))}
	if i.tokenID != "" {
		attrs = append(attrs, slog.String("token_id", i.tokenID))
	}
	if i.actorID != "" {
		attrs = append(attrs, slog.String("acting_user_id", i.actorID))
	}
	return attrs
}

func (i *reqInfo) ids() (chat, user string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.chatID, i.userID
}

// acceptableRequestID allows what a proxy or client may reasonably send: 1
// to 128 visible ASCII characters other than quotes and backslashes.
func acceptableRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// contextHandler adds request_id, and chat_id when known, to every record
// logged with the context of an HTTP request.
type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, rec slog.Record) error {
	if info := infoFrom(ctx); info != nil {
		rec = rec.Clone()
		rec.AddAttrs(slog.String("request_id", info.id))
		if chat, _ := info.ids(); chat != "" {
			rec.AddAttrs(slog.String("chat_id", chat))
		}
	}
	return h.Handler.Handle(ctx, rec)
}

func (h contextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(as)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}

// quietRoutes are logged at debug level: probes and scrapes.
var quietRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// serveObserved serves one request with its id, then counts and logs it.
func (s *Server) serveObserved(w http.ResponseWriter, r *http.Request, serve func(http.ResponseWriter, *http.Request) string) {
	start := time.Now()
	id := r.Header.Get(RequestIDHeader)
	if !acceptableRequestID(id) {
		id = uuid.NewString()
	}
	w.Header().Set(RequestIDHeader, id)
	info := &reqInfo{id: id}
	r, span := tracing.StartHTTP(r) // the caller's traceparent, when sent, is its parent
	r = r.WithContext(context.WithValue(r.Context(), infoKey, info))
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}

	pattern := serve(rec, r)

	took := time.Since(start)
	route := "unmatched"
	if pattern != "" {
		_, route, _ = strings.Cut(pattern, " ")
	}
	tracing.EndHTTP(span, r.Method, route, rec.status)
	status := strconv.Itoa(rec.status)
	s.httpRequests.WithLabelValues(route, r.Method, status).Inc()
	s.httpDuration.WithLabelValues(route, r.Method).Observe(took.Seconds())

	level := s.accessLevel
	if quietRoutes[route] {
		level = slog.LevelDebug
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("route", route), slog.String("path", r.URL.Path),
		slog.Int("status", rec.status), slog.Float64("duration_ms", float64(took.Microseconds())/1000),
		slog.Int64("bytes", rec.bytes),
	}
	attrs = append(attrs, info.identityAttrs()...)
	s.log.LogAttrs(r.Context(), level, "http request", attrs...)
}

// instrument registers the API's metrics.
func (s *Server) instrument(reg *prometheus.Registry) {
	s.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	s.httpRequests = prom.Counter(reg, "chatd_http_requests_total",
		"HTTP requests answered, by route pattern (\"unmatched\" for 404/405 outside the routes), method and status.",
		"route", "method", "status")
	s.httpDuration = prom.Histogram(reg, "chatd_http_request_duration_seconds",
		"Time to answer HTTP requests, by route pattern and method (for streams: how long they stayed open).",
		prom.LatencyBuckets, "route", "method")
	prom.GaugeFunc(reg, "chatd_open_streams", "Open event streams (chat streams and watches) served by this process.",
		func() float64 { return float64(s.Streams()) })
	depth := func(name, help string, field func(store.Depths) int64) {
		prom.Func(reg, name, help, prometheus.GaugeValue, nil, func() []prom.Sample {
			if !s.depthsOK {
				return nil
			}
			return []prom.Sample{{Value: float64(field(s.depths))}}
		})
	}
	depth("chatd_queued_messages", "Messages waiting in chat queues behind a running turn (all replicas; read from the database at scrape time).",
		func(d store.Depths) int64 { return d.QueuedMessages })
	depth("chatd_runnable_chats", "Chats with a turn to run (running or interrupting), claimed or not (all replicas; read at scrape time).",
		func(d store.Depths) int64 { return d.RunnableChats })
	depth("chatd_unclaimed_chats", "Runnable chats no worker holds a live lease on: the workers' backlog (all replicas; read at scrape time).",
		func(d store.Depths) int64 { return d.UnclaimedChats })
	depth("chatd_structured_requests_pending", "Structured requests not finished yet, queued ones included (all replicas; read at scrape time).",
		func(d store.Depths) int64 { return d.PendingRequests })
	depth("chatd_webhook_deliveries_pending", "Receipt webhook deliveries not yet delivered nor dead, in backoff or in flight (all replicas; read at scrape time).",
		func(d store.Depths) int64 { return d.WebhookDeliveriesPending })
	prom.GaugeFunc(reg, "chatd_metrics_database_up", "1 if this scrape's database read succeeded (the depth gauges are missing otherwise).",
		func() float64 {
			if s.depthsOK {
				return 1
			}
			return 0
		})
}

// scrapeTimeout bounds the database read of a scrape.
const scrapeTimeout = 2 * time.Second

// serveMetrics answers GET /metrics in the Prometheus text format 0.0.4.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	s.scrapeMu.Lock()
	defer s.scrapeMu.Unlock()
	s.depthsOK = false
	if s.store != nil {
		ctx, cancel := context.WithTimeout(r.Context(), scrapeTimeout)
		d, err := s.store.Depths(ctx)
		cancel()
		if err != nil {
			s.log.WarnContext(r.Context(), "metrics: reading queue depths failed", slog.String("error", err.Error()))
		} else {
			s.depths, s.depthsOK = d, true
		}
	}
	s.metrics.ServeHTTP(w, r)
	return nil
}
