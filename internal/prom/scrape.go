package prom

import (
	"io"
	"maps"
	"math"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape is a parsed text exposition.
type Scrape struct {
	Families map[string]*dto.MetricFamily
}

// Parse reads the text exposition format with expfmt (which refuses
// malformed lines, samples without a family and repeated families).
func Parse(r io.Reader) (*Scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	return &Scrape{Families: fams}, nil
}

// Type returns the family's type in lower case ("counter", "gauge",
// "histogram"), or "" when the scrape has no such family.
func (s *Scrape) Type(name string) string {
	f, ok := s.Families[name]
	if !ok {
		return ""
	}
	switch f.GetType() {
	case dto.MetricType_COUNTER:
		return "counter"
	case dto.MetricType_GAUGE:
		return "gauge"
	case dto.MetricType_HISTOGRAM:
		return "histogram"
	case dto.MetricType_SUMMARY:
		return "summary"
	}
	return "untyped"
}

// series returns the metrics of the family whose labels include every
// given name=value pair (labels alternate names and values).
func (s *Scrape) series(name string, labels []string) []*dto.Metric {
	f, ok := s.Families[name]
	if !ok {
		return nil
	}
	var out []*dto.Metric
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				match = false
			}
		}
		if match {
			out = append(out, m)
		}
	}
	return out
}

// Get returns the value of the family's samples whose labels include the
// given pairs, summed, and whether any matched. For a histogram it is the
// observation count; name may also be a histogram's name_count or name_sum.
func (s *Scrape) Get(name string, labels ...string) (float64, bool) {
	part := ""
	if _, ok := s.Families[name]; !ok {
		for _, suffix := range []string{"_count", "_sum"} {
			if base, ok := cutSuffix(name, suffix); ok && s.Type(base) == "histogram" {
				name, part = base, suffix
			}
		}
	}
	ms := s.series(name, labels)
	var sum float64
	for _, m := range ms {
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		case m.Histogram != nil && part == "_sum":
			sum += m.GetHistogram().GetSampleSum()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, len(ms) > 0
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix {
		return s[:len(s)-len(suffix)], true
	}
	return s, false
}

// Quantile estimates quantile q (0..1) of a histogram from its buckets,
// summed over the series whose labels include the given pairs,
// interpolating linearly inside the bucket as Prometheus's
// histogram_quantile does. ok is false when the histogram has no
// observations.
func (s *Scrape) Quantile(name string, q float64, labels ...string) (float64, bool) {
	buckets := map[float64]float64{}
	var total float64
	for _, m := range s.series(name, labels) {
		h := m.GetHistogram()
		if h == nil {
			continue
		}
		for _, b := range h.GetBucket() {
			buckets[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		}
		total += float64(h.GetSampleCount())
	}
	if total == 0 {
		return 0, false
	}
	buckets[math.Inf(1)] = total
	rank := q * total
	prevBound, prevCount := 0.0, 0.0
	for _, b := range slices.Sorted(maps.Keys(buckets)) {
		c := buckets[b]
		if c >= rank {
			if math.IsInf(b, 1) {
				return prevBound, true // beyond the highest finite bound
			}
			if c == prevCount {
				return b, true
			}
			return prevBound + (b-prevBound)*(rank-prevCount)/(c-prevCount), true
		}
		prevBound, prevCount = b, c
	}
	return prevBound, true
}

// Gather reads reg's families directly, as a scrape would (for tests).
func Gather(reg prometheus.Gatherer) (*Scrape, error) {
	fams, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	s := &Scrape{Families: map[string]*dto.MetricFamily{}}
	for _, f := range fams {
		s.Families[f.GetName()] = f
	}
	return s, nil
}

// Series is one series of a counter or gauge family.
type Series struct {
	Labels map[string]string
	Value  float64
}

// Series lists the counter or gauge family's series.
func (s *Scrape) Series(name string) []Series {
	var out []Series
	for _, m := range s.series(name, nil) {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		out = append(out, Series{Labels: l, Value: v})
	}
	return out
}
