package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/prom"
)

// newMetrics is the registry GET /metrics serves; the API, the runner and
// the store register their own families on it. The Go runtime's and the
// process's collectors (go_*, process_*) and the build come with it here.
func newMetrics() *prometheus.Registry {
	reg := prom.NewRegistry()
	prom.Func(reg, "chatd_build_info", "Always 1; the Go version this binary was built with.", prometheus.GaugeValue,
		[]string{"go_version"}, func() []prom.Sample {
			return []prom.Sample{{Values: []string{runtime.Version()}, Value: 1}}
		})
	return reg
}

// serveDebug serves Go's profiler on a listener of its own (--debug-listen),
// never on the API's: an operator turns it on for a while, on a private
// address, to see where the CPU goes.
func serveDebug(addr string, logger *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	logger.Warn("profiler listening", slog.String("addr", "http://"+ln.Addr().String()+"/debug/pprof/"))
	return srv, nil
}
