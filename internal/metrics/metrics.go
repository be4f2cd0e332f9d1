// Package metrics is a small Prometheus registry: counters, gauges and
// histograms with labels, plus values computed when scraped, written in the
// text exposition format 0.0.4. It is what chatd needs and no more (no
// summaries, no exemplars, no protobuf).
//
// Every method is safe on a nil receiver and then does nothing, so code can
// be instrumented unconditionally and run without a registry in tests.
package metrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// ContentType is the media type of the text exposition format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Metric types.
const (
	TypeCounter   = "counter"
	TypeGauge     = "gauge"
	TypeHistogram = "histogram"
)

var (
	nameRE  = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// Registry holds metric families and writes them.
type Registry struct {
	mu       sync.Mutex
	families map[string]family
}

// family is one metric name: its HELP, TYPE and samples.
type family interface {
	header() (name, help, typ string)
	// write appends the family's sample lines.
	write(b *strings.Builder)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{families: map[string]family{}} }

// register adds f, or returns the family already registered under its name
// when it has the same type and labels (a component started again, say a
// runner after a restart, keeps counting where the last one stopped). A
// different family under the same name panics.
func (r *Registry) register(f family, labels []string) family {
	name, _, typ := f.header()
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, dup := r.families[name]; dup {
		_, _, oldTyp := old.header()
		if oldTyp != typ || !slices.Equal(labelsOf(old), labels) || fmt.Sprintf("%T", old) != fmt.Sprintf("%T", f) {
			panic("metrics: " + name + " registered twice with different types or labels")
		}
		if c, ok := old.(*collected); ok {
			c.swap(f.(*collected).collect) // the newest source wins
		}
		return old
	}
	r.families[name] = f
	return f
}

func labelsOf(f family) []string {
	switch f := f.(type) {
	case *vec[value]:
		return f.labels
	case *vec[histogram]:
		return f.labels
	case *collected:
		return f.labels
	}
	return nil
}

func checkNames(name string, labels []string) {
	if !nameRE.MatchString(name) {
		panic("metrics: invalid metric name " + strconv.Quote(name))
	}
	for _, l := range labels {
		if !labelRE.MatchString(l) || strings.HasPrefix(l, "__") || l == "le" {
			panic("metrics: invalid label name " + strconv.Quote(l) + " on " + name)
		}
	}
}

// vec keeps one value per combination of label values.
type vec[T any] struct {
	name, help, typ string
	labels          []string
	mu              sync.RWMutex
	children        map[string]*child[T]
	newValue        func() *T
	writeValue      func(b *strings.Builder, name string, labels []string, values []string, v *T)
}

type child[T any] struct {
	values []string
	v      *T
}

func (v *vec[T]) header() (string, string, string) { return v.name, v.help, v.typ }

func (v *vec[T]) get(values []string) *T {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", v.name, len(v.labels), len(values)))
	}
	key := strings.Join(values, "\xff")
	v.mu.RLock()
	c, ok := v.children[key]
	v.mu.RUnlock()
	if ok {
		return c.v
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.children[key]; ok {
		return c.v
	}
	c = &child[T]{values: slices.Clone(values), v: v.newValue()}
	v.children[key] = c
	return c.v
}

func (v *vec[T]) write(b *strings.Builder) {
	v.mu.RLock()
	kids := make([]*child[T], 0, len(v.children))
	for _, c := range v.children {
		kids = append(kids, c)
	}
	v.mu.RUnlock()
	sort.Slice(kids, func(i, j int) bool { return slices.Compare(kids[i].values, kids[j].values) < 0 })
	for _, c := range kids {
		v.writeValue(b, v.name, v.labels, c.values, c.v)
	}
}

// value is a float64 updated atomically.
type value struct{ bits atomic.Uint64 }

func (x *value) add(d float64) {
	for {
		old := x.bits.Load()
		if x.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

func (x *value) set(f float64) { x.bits.Store(math.Float64bits(f)) }
func (x *value) get() float64  { return math.Float64frombits(x.bits.Load()) }

func writeScalar(b *strings.Builder, name string, labels, values []string, x *value) {
	writeSample(b, name, labels, values, "", "", x.get())
}

// CounterVec is a counter with labels.
type CounterVec struct{ v *vec[value] }

// Counter registers a counter. By convention its name ends in _total.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	if r == nil {
		return nil
	}
	checkNames(name, labels)
	v := &vec[value]{name: name, help: help, typ: TypeCounter, labels: labels,
		children: map[string]*child[value]{}, newValue: func() *value { return &value{} }, writeValue: writeScalar}
	return &CounterVec{v: r.register(v, labels).(*vec[value])}
}

// Inc adds one to the counter with these label values.
func (c *CounterVec) Inc(values ...string) { c.Add(1, values...) }

// Add adds d (which must not be negative) to the counter with these label
// values.
func (c *CounterVec) Add(d float64, values ...string) {
	if c == nil {
		return
	}
	if d < 0 {
		panic("metrics: counter " + c.v.name + " decreased")
	}
	c.v.get(values).add(d)
}

// Value returns the counter's current value (for tests).
func (c *CounterVec) Value(values ...string) float64 {
	if c == nil {
		return 0
	}
	return c.v.get(values).get()
}

// GaugeVec is a gauge with labels.
type GaugeVec struct{ v *vec[value] }

// Gauge registers a gauge.
func (r *Registry) Gauge(name, help string, labels ...string) *GaugeVec {
	if r == nil {
		return nil
	}
	checkNames(name, labels)
	v := &vec[value]{name: name, help: help, typ: TypeGauge, labels: labels,
		children: map[string]*child[value]{}, newValue: func() *value { return &value{} }, writeValue: writeScalar}
	return &GaugeVec{v: r.register(v, labels).(*vec[value])}
}

// Set sets the gauge with these label values.
func (g *GaugeVec) Set(f float64, values ...string) {
	if g == nil {
		return
	}
	g.v.get(values).set(f)
}

// Add adds d (possibly negative) to the gauge with these label values.
func (g *GaugeVec) Add(d float64, values ...string) {
	if g == nil {
		return
	}
	g.v.get(values).add(d)
}

// Histogram buckets.
var (
	// LatencyBuckets suit calls from a millisecond to a few minutes (seconds).
	LatencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
)

type histogram struct {
	bounds []float64
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum    value
	count  atomic.Uint64
}

// HistogramVec is a histogram with labels.
type HistogramVec struct {
	v      *vec[histogram]
	bounds []float64
}

// Registering a family again with the same name, type and labels returns
// the existing one (see register).

// Histogram registers a histogram with the given upper bounds (ascending;
// +Inf is implicit).
func (r *Registry) Histogram(name, help string, buckets []float64, labels ...string) *HistogramVec {
	if r == nil {
		return nil
	}
	checkNames(name, labels)
	if !sort.Float64sAreSorted(buckets) || len(buckets) == 0 {
		panic("metrics: histogram " + name + " needs ascending buckets")
	}
	bounds := slices.Clone(buckets)
	v := &vec[histogram]{name: name, help: help, typ: TypeHistogram, labels: labels,
		children: map[string]*child[histogram]{},
		newValue: func() *histogram {
			return &histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
		},
		writeValue: writeHistogram}
	got := r.register(v, labels).(*vec[histogram])
	if got != v {
		if old := got.newValue(); !slices.Equal(old.bounds, bounds) {
			panic("metrics: histogram " + name + " registered twice with different buckets")
		}
	}
	return &HistogramVec{v: got, bounds: bounds}
}

// Observe records one value in the histogram with these label values.
func (h *HistogramVec) Observe(f float64, values ...string) {
	if h == nil {
		return
	}
	x := h.v.get(values)
	i := sort.SearchFloat64s(x.bounds, f) // first bound >= f
	x.counts[i].Add(1)
	x.sum.add(f)
	x.count.Add(1)
}

// Count returns how many values were observed with these label values (for
// tests).
func (h *HistogramVec) Count(values ...string) uint64 {
	if h == nil {
		return 0
	}
	return h.v.get(values).count.Load()
}

func writeHistogram(b *strings.Builder, name string, labels, values []string, x *histogram) {
	// Read the count first: concurrent observations may make the buckets
	// run ahead of it, never behind, and +Inf is written as the count so the
	// series stays consistent.
	count := x.count.Load()
	var cum uint64
	for i, bound := range x.bounds {
		cum += x.counts[i].Load()
		writeSample(b, name+"_bucket", labels, values, "le", formatFloat(bound), float64(min(cum, count)))
	}
	writeSample(b, name+"_bucket", labels, values, "le", "+Inf", float64(count))
	writeSample(b, name+"_sum", labels, values, "", "", x.sum.get())
	writeSample(b, name+"_count", labels, values, "", "", float64(count))
}

// Sample is one value of a collected family.
type Sample struct {
	Values []string // label values, in the family's label order
	Value  float64
}

// collected is a family whose samples are computed at scrape time.
type collected struct {
	name, help, typ string
	labels          []string
	mu              sync.Mutex
	collect         func() []Sample
}

func (c *collected) header() (string, string, string) { return c.name, c.help, c.typ }

func (c *collected) swap(f func() []Sample) {
	c.mu.Lock()
	c.collect = f
	c.mu.Unlock()
}

func (c *collected) write(b *strings.Builder) {
	c.mu.Lock()
	collect := c.collect
	c.mu.Unlock()
	samples := collect()
	sort.Slice(samples, func(i, j int) bool { return slices.Compare(samples[i].Values, samples[j].Values) < 0 })
	for _, s := range samples {
		if len(s.Values) != len(c.labels) {
			continue
		}
		writeSample(b, c.name, c.labels, s.Values, "", "", s.Value)
	}
}

// GaugeFunc registers a gauge without labels whose value is read at scrape
// time.
func (r *Registry) GaugeFunc(name, help string, f func() float64) {
	r.Collect(name, help, TypeGauge, nil, func() []Sample { return []Sample{{Value: f()}} })
}

// Collect registers a family whose samples f computes at scrape time (for
// example from one database query). f returning no samples omits the
// family's samples from that scrape.
func (r *Registry) Collect(name, help, typ string, labels []string, f func() []Sample) {
	if r == nil {
		return
	}
	checkNames(name, labels)
	if typ != TypeGauge && typ != TypeCounter {
		panic("metrics: Collect supports gauges and counters")
	}
	r.register(&collected{name: name, help: help, typ: typ, labels: slices.Clone(labels), collect: f}, labels)
}

// WriteText writes every family in the text exposition format, families
// ordered by name and samples by label values.
func (r *Registry) WriteText(w io.Writer) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	fams := make([]family, 0, len(r.families))
	for _, f := range r.families {
		fams = append(fams, f)
	}
	r.mu.Unlock()
	sort.Slice(fams, func(i, j int) bool {
		a, _, _ := fams[i].header()
		b, _, _ := fams[j].header()
		return a < b
	})
	bw := bufio.NewWriter(w)
	for _, f := range fams {
		var b strings.Builder
		name, help, typ := f.header()
		b.WriteString("# HELP " + name + " " + escapeHelp(help) + "\n")
		b.WriteString("# TYPE " + name + " " + typ + "\n")
		f.write(&b)
		if _, err := bw.WriteString(b.String()); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ServeHTTP answers a scrape.
func (r *Registry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", ContentType)
	var b strings.Builder
	_ = r.WriteText(&b)
	_, _ = io.WriteString(w, b.String())
}

func writeSample(b *strings.Builder, name string, labels, values []string, extraLabel, extraValue string, v float64) {
	b.WriteString(name)
	if len(labels) > 0 || extraLabel != "" {
		b.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l + `="` + escapeLabel(values[i]) + `"`)
		}
		if extraLabel != "" {
			if len(labels) > 0 {
				b.WriteByte(',')
			}
			b.WriteString(extraLabel + `="` + extraValue + `"`)
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(formatFloat(v))
	b.WriteByte('\n')
}

func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }
