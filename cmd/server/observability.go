package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"github.com/chatd/chatd/internal/metrics"
)

// newMetrics is the registry GET /metrics serves; the API, the runner and
// the store register their own families on it. Process-wide figures are
// registered here.
func newMetrics() *metrics.Registry {
	reg := metrics.NewRegistry()
	started := float64(time.Now().Unix())
	reg.GaugeFunc("process_start_time_seconds", "When this process started, in seconds since the Unix epoch.",
		func() float64 { return started })
	reg.Collect("chatd_build_info", "Always 1; the Go version this binary was built with.", metrics.TypeGauge,
		[]string{"go_version"}, func() []metrics.Sample {
			return []metrics.Sample{{Values: []string{runtime.Version()}, Value: 1}}
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
