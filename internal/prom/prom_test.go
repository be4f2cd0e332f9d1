package prom_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/chatd/chatd/internal/prom"
)

// A component registered again on the same registry keeps the counts; a
// scrape-time value comes from the newest source; the exposition parses back.
func TestRegisterAgainAndScrape(t *testing.T) {
	t.Parallel()
	reg := prom.NewRegistry()
	a := prom.Counter(reg, "x_total", "X.", "kind")
	a.WithLabelValues("k").Inc()
	b := prom.Counter(reg, "x_total", "X.", "kind")
	b.WithLabelValues("k").Inc()
	if a != b {
		t.Error("a second registration made a second counter")
	}
	prom.GaugeFunc(reg, "g", "G.", func() float64 { return 1 })
	prom.GaugeFunc(reg, "g", "G.", func() float64 { return 2 })
	prom.Func(reg, "f", "F.", prometheus.GaugeValue, []string{"l"}, func() []prom.Sample {
		return []prom.Sample{{Values: []string{"a"}, Value: 3}, {Values: []string{"b"}, Value: 4}}
	})
	h := prom.Histogram(reg, "h_seconds", "H.", []float64{1, 2, 4}, "call")
	for _, v := range []float64{0.5, 1.5, 1.5, 3} {
		h.WithLabelValues("step").Observe(v)
	}

	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	s, err := prom.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"x_total", []string{"kind", "k"}, 2},
		{"g", nil, 2},
		{"f", nil, 7},
		{"f", []string{"l", "b"}, 4},
		{"h_seconds_count", nil, 4},
		{"h_seconds_sum", nil, 6.5},
	} {
		if got, ok := s.Get(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (%v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if s.Type("h_seconds") != "histogram" || s.Type("x_total") != "counter" || s.Type("go_goroutines") != "gauge" ||
		s.Type("process_start_time_seconds") != "gauge" {
		t.Error("types or collectors missing")
	}
	// Ranks: 4 observations, the median (rank 2) is in (1, 2], which holds
	// ranks 1..3: 1 + (2-1)*(2-1)/(3-1).
	if q, ok := s.Quantile("h_seconds", 0.5, "call", "step"); !ok || math.Abs(q-1.5) > 1e-9 {
		t.Errorf("p50 = %v (%v)", q, ok)
	}
	if _, err := prom.Parse(bytes.NewReader([]byte("x_total{kind=\"k\" 1\n"))); err == nil {
		t.Error("a malformed exposition parsed")
	}
}
