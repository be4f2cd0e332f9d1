package httpapi

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/prom"
)

// ConnGate bounds the client connections an http.Server serves at once.
// Past the bound, a connection is still accepted (a refused accept would
// leave the client hanging, and a process out of descriptors cannot even
// accept), but its request is answered 503 with Retry-After and the
// connection closed: the process keeps the descriptors its running chats'
// provider connections need.
type ConnGate struct {
	max     int64
	open    atomic.Int64
	refused prometheus.Counter
}

// connOver marks a connection opened past the gate's bound.
type connOver struct{}

// NewConnGate returns a gate of max connections; its gauges go to reg
// (nil: none).
func NewConnGate(max int, reg *prometheus.Registry) *ConnGate {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	g := &ConnGate{max: int64(max)}
	prom.GaugeFunc(reg, "chatd_http_connections", "Client connections open on the API's listener.",
		func() float64 { return float64(g.open.Load()) })
	g.refused = prom.Counter(reg, "chatd_http_connections_refused_total",
		"Requests answered 503 because their connection was opened past chatd_http_max_connections.").WithLabelValues()
	return g
}

// Install makes srv count its connections and refuse the requests of
// those past the bound. Call it before srv serves.
func (g *ConnGate) Install(srv *http.Server) {
	// ConnContext runs on the accept loop, one connection at a time, so
	// the count it reads is exact; ConnState's StateNew comes after it.
	connContext := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if connContext != nil {
			ctx = connContext(ctx, c)
		}
		if g.open.Add(1) > g.max {
			ctx = context.WithValue(ctx, connOver{}, true)
		}
		return ctx
	}
	connState := srv.ConnState
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateClosed || st == http.StateHijacked {
			g.open.Add(-1)
		}
		if connState != nil {
			connState(c, st)
		}
	}
	next := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if over, _ := r.Context().Value(connOver{}).(bool); over {
			g.refuse(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Open counts the connections open now.
func (g *ConnGate) Open() int { return int(g.open.Load()) }

// refuse answers a request on a connection past the bound.
func (g *ConnGate) refuse(w http.ResponseWriter) {
	g.refused.Inc()
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Connection", "close")
	writeJSON(w, http.StatusServiceUnavailable, client.Error{
		Message: "The server holds as many connections as its file descriptors allow; retry after a moment."})
}
