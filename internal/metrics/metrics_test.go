package metrics

import (
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestExposition(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("test_events_total", "Events by kind.\nSecond line with a \\.", "kind", "code")
	g := r.Gauge("test_level", "A level.")
	h := r.Histogram("test_seconds", "Durations.", []float64{0.1, 1}, "route")
	r.GaugeFunc("test_func", "Read at scrape time.", func() float64 { return 7 })
	r.Collect("test_rows", "Rows by state.", TypeGauge, []string{"state"}, func() []Sample {
		return []Sample{{Values: []string{"b"}, Value: 2}, {Values: []string{"a"}, Value: 1}}
	})

	c.Inc("x", "")
	c.Add(2, "x", "")
	c.Inc(`q"uo\te`+"\n", "y")
	g.Set(3.5)
	g.Add(-1)
	h.Observe(0.05, "/a")
	h.Observe(0.1, "/a") // on a bound: counted in that bucket (le is inclusive)
	h.Observe(5, "/a")

	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); ct != ContentType {
		t.Errorf("Content-Type %q", ct)
	}
	want := `# HELP test_events_total Events by kind.\nSecond line with a \\.
# TYPE test_events_total counter
test_events_total{kind="q\"uo\\te\n",code="y"} 1
test_events_total{kind="x",code=""} 3
# HELP test_func Read at scrape time.
# TYPE test_func gauge
test_func 7
# HELP test_level A level.
# TYPE test_level gauge
test_level 2.5
# HELP test_rows Rows by state.
# TYPE test_rows gauge
test_rows{state="a"} 1
test_rows{state="b"} 2
# HELP test_seconds Durations.
# TYPE test_seconds histogram
test_seconds_bucket{route="/a",le="0.1"} 2
test_seconds_bucket{route="/a",le="1"} 2
test_seconds_bucket{route="/a",le="+Inf"} 3
test_seconds_sum{route="/a"} 5.15
test_seconds_count{route="/a"} 3
`
	if got := rec.Body.String(); got != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", got, want)
	}

	s, err := Parse(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Get("test_events_total", "kind", `q"uo\te`+"\n"); !ok || v != 1 {
		t.Errorf("escaped label value did not round-trip: %v %v", v, ok)
	}
	if v, _ := s.Get("test_events_total"); v != 4 {
		t.Errorf("sum over series = %v, want 4", v)
	}
	if q, ok := s.Quantile("test_seconds", 0.5); !ok || q <= 0 || q > 0.1 {
		t.Errorf("p50 = %v %v, want within the first bucket", q, ok)
	}
	if q, _ := s.Quantile("test_seconds", 0.99); q != 1 {
		t.Errorf("p99 = %v, want the highest finite bound", q)
	}
}

func TestParseRefusesMalformed(t *testing.T) {
	for name, text := range map[string]string{
		"no TYPE":          "a 1\n",
		"bad name":         "# TYPE 1a gauge\n1a 1\n",
		"bad value":        "# TYPE a gauge\na one\n",
		"unquoted label":   "# TYPE a gauge\na{x=1} 1\n",
		"bad escape":       "# TYPE a gauge\na{x=\"\\t\"} 1\n",
		"unterminated":     "# TYPE a gauge\na{x=\"1} 1\n",
		"duplicate":        "# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n",
		"two TYPEs":        "# TYPE a gauge\n# TYPE a counter\n",
		"not cumulative":   "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n",
		"inf is not count": "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 3\n",
		"no space":         "# TYPE a gauge\na{x=\"1\"}1\n",
	} {
		if _, err := Parse(strings.NewReader(text)); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func TestNilIsANoOp(t *testing.T) {
	var r *Registry
	c := r.Counter("a_total", "")
	c.Inc()
	r.Gauge("b", "").Set(1)
	r.Histogram("c", "", LatencyBuckets).Observe(1)
	r.GaugeFunc("d", "", func() float64 { return 1 })
	if err := r.WriteText(nil); err != nil {
		t.Fatal(err)
	}
	if c.Value() != 0 {
		t.Fatal("a nil counter counted")
	}
}

func TestRegistrationPanics(t *testing.T) {
	for name, f := range map[string]func(r *Registry){
		"other type":  func(r *Registry) { r.Gauge("a", ""); r.Counter("a", "") },
		"other label": func(r *Registry) { r.Gauge("a", "", "x"); r.Gauge("a", "", "y") },
		"other kind":  func(r *Registry) { r.Gauge("a", ""); r.GaugeFunc("a", "", func() float64 { return 0 }) },
		"buckets":     func(r *Registry) { r.Histogram("h", "", []float64{1}); r.Histogram("h", "", []float64{2}) },
		"bad name":    func(r *Registry) { r.Gauge("a-b", "") },
		"le label":    func(r *Registry) { r.Histogram("h", "", LatencyBuckets, "le") },
		"label count": func(r *Registry) { r.Counter("c_total", "", "x").Inc() },
		"negative":    func(r *Registry) { r.Counter("c_total", "").Add(-1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f(NewRegistry())
		}()
	}
}

// A component registered again (a runner started after a restart) keeps
// counting in the same family, and the latest value function wins.
func TestRegisterAgain(t *testing.T) {
	r := NewRegistry()
	r.Counter("c_total", "", "k").Inc("a")
	r.Counter("c_total", "", "k").Inc("a")
	r.Histogram("h", "", []float64{1}).Observe(1)
	r.Histogram("h", "", []float64{1}).Observe(1)
	r.GaugeFunc("g", "", func() float64 { return 1 })
	r.GaugeFunc("g", "", func() float64 { return 2 })
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	s, err := Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want float64
	}{{"c_total", 2}, {"h_count", 2}, {"g", 2}} {
		if v, _ := s.Get(c.name); v != c.want {
			t.Errorf("%s = %v, want %v", c.name, v, c.want)
		}
	}
}

func TestConcurrentUpdates(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("n_total", "", "k")
	h := r.Histogram("h_seconds", "", []float64{1}, "k")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 1000 {
				c.Inc([]string{"a", "b"}[i%2])
				h.Observe(0.5, "x")
			}
		})
	}
	var scrapes sync.WaitGroup
	scrapes.Go(func() {
		for range 20 {
			var b strings.Builder
			_ = r.WriteText(&b)
			if _, err := Parse(strings.NewReader(b.String())); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	scrapes.Wait()
	if got := c.Value("a") + c.Value("b"); got != 8000 {
		t.Fatalf("counted %v, want 8000", got)
	}
	if h.Count("x") != 8000 {
		t.Fatalf("observed %d", h.Count("x"))
	}
	if v := math.Float64frombits(h.v.get([]string{"x"}).sum.bits.Load()); v != 4000 {
		t.Fatalf("sum %v", v)
	}
}
