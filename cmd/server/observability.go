package main

import (
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
