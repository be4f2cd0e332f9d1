// Package prom registers chatd's instruments on a client_golang registry
// and reads an exposition back (tests and the benchmark). Registration is
// idempotent: a component started again on the same registry (a runner
// after a restart, say) keeps counting where the last one stopped, and a
// value computed at scrape time comes from the newest source. A nil
// registry gives working instruments that nobody scrapes.
package prom

import (
	"errors"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// LatencyBuckets suit calls from a millisecond to a few minutes (seconds).
var LatencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// NewRegistry returns a registry with the Go runtime and process
// collectors (go_*, process_*), as /metrics serves it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Counter registers a counter vector, or returns the one registered under
// the same name and labels.
func Counter(reg *prometheus.Registry, name, help string, labels ...string) *prometheus.CounterVec {
	return register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// Gauge registers a gauge vector, or returns the one registered under the
// same name and labels.
func Gauge(reg *prometheus.Registry, name, help string, labels ...string) *prometheus.GaugeVec {
	return register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

// Histogram registers a histogram vector, or returns the one registered
// under the same name and labels.

func Histogram(reg *prometheus.Registry, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
}

func register[C prometheus.Collector](reg *prometheus.Registry, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var dup prometheus.AlreadyRegisteredError
		if errors.As(err, &dup) {
			if old, ok := dup.ExistingCollector.(C); ok {
				return old
			}
		}
		panic(err) // a programming error: one name, two shapes
	}
	return c
}

// GaugeFunc registers a gauge without labels read at scrape time.
func GaugeFunc(reg *prometheus.Registry, name, help string, f func() float64) {
	replace(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// Sample is one value of a Func family and its label values.
type Sample struct {
	Values []string
	Value  float64
}

// Func registers a family whose samples f computes at scrape time (typ is
// prometheus.GaugeValue or prometheus.CounterValue). f returning no samples
// leaves the family out of that scrape.
func Func(reg *prometheus.Registry, name, help string, typ prometheus.ValueType, labels []string, f func() []Sample) {
	replace(reg, &funcCollector{desc: prometheus.NewDesc(name, help, slices.Clone(labels), nil), typ: typ, f: f})
}

// replace registers c in place of a collector with the same descriptors:
// the newest source wins.
func replace(reg *prometheus.Registry, c prometheus.Collector) {
	if reg == nil {
		return
	}
	reg.Unregister(c)
	reg.MustRegister(c)
}

type funcCollector struct {
	desc *prometheus.Desc
	typ  prometheus.ValueType
	f    func() []Sample
}

func (c *funcCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *funcCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.f() {
		ch <- prometheus.MustNewConstMetric(c.desc, c.typ, s.Value, s.Values...)
	}
}
