package metrics

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Parsed is one sample of a scrape.
type Parsed struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Scrape is a parsed exposition.
type Scrape struct {
	// Types maps each family name to its TYPE.
	Types   map[string]string
	Samples []Parsed
}

// Parse reads the text exposition format 0.0.4 strictly: every sample must
// belong to a family declared by a TYPE line before it, names and label
// names must be valid, label values properly escaped, no sample may repeat,
// and a histogram's buckets must be cumulative with +Inf equal to _count.
// chatd's tests use it on /metrics, and the benchmark to read the server's
// figures.
func Parse(r io.Reader) (*Scrape, error) {
	s := &Scrape{Types: map[string]string{}}
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if strings.TrimSpace(text) == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(text, "#"); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 && f[0] == "TYPE" {
				if len(f) != 3 || !nameRE.MatchString(f[1]) {
					return nil, fmt.Errorf("line %d: malformed TYPE line", line)
				}
				switch f[2] {
				case TypeCounter, TypeGauge, TypeHistogram, "summary", "untyped":
				default:
					return nil, fmt.Errorf("line %d: unknown type %q", line, f[2])
				}
				if _, dup := s.Types[f[1]]; dup {
					return nil, fmt.Errorf("line %d: second TYPE for %s", line, f[1])
				}
				s.Types[f[1]] = f[2]
			} else if len(f) >= 2 && f[0] == "HELP" && !nameRE.MatchString(f[1]) {
				return nil, fmt.Errorf("line %d: malformed HELP line", line)
			}
			continue
		}
		p, err := parseSample(text)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if familyOf(s.Types, p.Name) == "" {
			return nil, fmt.Errorf("line %d: sample %s has no TYPE line before it", line, p.Name)
		}
		key := p.Name + "{" + labelKey(p.Labels) + "}"
		if seen[key] {
			return nil, fmt.Errorf("line %d: duplicate sample %s", line, key)
		}
		seen[key] = true
		s.Samples = append(s.Samples, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return s, s.checkHistograms()
}

// familyOf returns the declared family a sample name belongs to.
func familyOf(types map[string]string, name string) string {
	if _, ok := types[name]; ok {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && types[base] == TypeHistogram {
			return base
		}
	}
	return ""
}

func labelKey(l map[string]string) string {
	keys := slices.Sorted(maps.Keys(l))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + strconv.Quote(l[k]) + ",")
	}
	return b.String()
}

func parseSample(text string) (Parsed, error) {
	p := Parsed{Labels: map[string]string{}}
	i := strings.IndexAny(text, "{ ")
	if i <= 0 {
		return p, fmt.Errorf("malformed sample %q", text)
	}
	p.Name = text[:i]
	if !nameRE.MatchString(p.Name) {
		return p, fmt.Errorf("invalid metric name %q", p.Name)
	}
	rest := text[i:]
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for !strings.HasPrefix(rest, "}") {
			eq := strings.IndexByte(rest, '=')
			if eq <= 0 {
				return p, fmt.Errorf("malformed labels in %q", text)
			}
			name := rest[:eq]
			if !labelRE.MatchString(name) {
				return p, fmt.Errorf("invalid label name %q", name)
			}
			rest = rest[eq+1:]
			if !strings.HasPrefix(rest, `"`) {
				return p, fmt.Errorf("label %s: value not quoted", name)
			}
			val, n, err := unescapeLabel(rest[1:])
			if err != nil {
				return p, fmt.Errorf("label %s: %w", name, err)
			}
			if _, dup := p.Labels[name]; dup {
				return p, fmt.Errorf("label %s repeated", name)
			}
			p.Labels[name] = val
			rest = rest[1+n:]
			if strings.HasPrefix(rest, ",") {
				rest = rest[1:]
			} else if !strings.HasPrefix(rest, "}") {
				return p, fmt.Errorf("malformed labels in %q", text)
			}
		}
		rest = rest[1:]
	}
	f := strings.Fields(rest)
	if len(f) < 1 || len(f) > 2 || !strings.HasPrefix(rest, " ") {
		return p, fmt.Errorf("malformed value in %q", text)
	}
	v, err := parseFloat(f[0])
	if err != nil {
		return p, fmt.Errorf("value %q: %w", f[0], err)
	}
	p.Value = v
	if len(f) == 2 {
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			return p, fmt.Errorf("timestamp %q: %w", f[1], err)
		}
	}
	return p, nil
}

// unescapeLabel reads a label value up to its closing quote; n is the
// number of bytes consumed including the quote.
func unescapeLabel(s string) (string, int, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), i + 1, nil
		case '\n':
			return "", 0, fmt.Errorf("raw newline in value")
		case '\\':
			if i+1 >= len(s) {
				return "", 0, fmt.Errorf("dangling backslash")
			}
			i++
			switch s[i] {
			case '\\':
				b.WriteByte('\\')
			case '"':
				b.WriteByte('"')
			case 'n':
				b.WriteByte('\n')
			default:
				return "", 0, fmt.Errorf("unknown escape \\%c", s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("unterminated value")
}

func parseFloat(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
}

// checkHistograms verifies that buckets are cumulative and end in +Inf
// equal to _count.
func (s *Scrape) checkHistograms() error {
	type series struct {
		buckets map[float64]float64
		count   float64
		counted bool
	}
	all := map[string]*series{}
	get := func(name string, labels map[string]string) *series {
		l := maps.Clone(labels)
		delete(l, "le")
		k := name + "{" + labelKey(l) + "}"
		if all[k] == nil {
			all[k] = &series{buckets: map[float64]float64{}}
		}
		return all[k]
	}
	for _, p := range s.Samples {
		base := familyOf(s.Types, p.Name)
		if s.Types[base] != TypeHistogram {
			continue
		}
		switch p.Name {
		case base + "_bucket":
			le, ok := p.Labels["le"]
			if !ok {
				return fmt.Errorf("%s: bucket without le", p.Name)
			}
			bound, err := parseFloat(le)
			if err != nil {
				return fmt.Errorf("%s: le %q: %w", p.Name, le, err)
			}
			get(base, p.Labels).buckets[bound] = p.Value
		case base + "_count":
			ser := get(base, p.Labels)
			ser.count, ser.counted = p.Value, true
		}
	}
	for k, ser := range all {
		inf, ok := ser.buckets[math.Inf(1)]
		if !ok || !ser.counted {
			return fmt.Errorf("histogram %s lacks its +Inf bucket or _count", k)
		}
		if inf != ser.count {
			return fmt.Errorf("histogram %s: +Inf bucket %v differs from _count %v", k, inf, ser.count)
		}
		bounds := slices.Sorted(maps.Keys(ser.buckets))
		for i := 1; i < len(bounds); i++ {
			if ser.buckets[bounds[i]] < ser.buckets[bounds[i-1]] {
				return fmt.Errorf("histogram %s: buckets are not cumulative at le=%v", k, bounds[i])
			}
		}
	}
	return nil
}

// Get returns the value of the sample with this name whose labels include
// every given name=value pair, summed over all matching samples, and whether
// any matched. labels alternate names and values.
func (s *Scrape) Get(name string, labels ...string) (float64, bool) {
	var sum float64
	found := false
	for _, p := range s.Samples {
		if p.Name != name || !matches(p.Labels, labels) {
			continue
		}
		sum += p.Value
		found = true
	}
	return sum, found
}

func matches(have map[string]string, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		if have[want[i]] != want[i+1] {
			return false
		}
	}
	return true
}

// Quantile estimates quantile q (0..1) of a histogram from its buckets, summed
// over the series whose labels include the given pairs, interpolating
// linearly inside the bucket as Prometheus's histogram_quantile does. ok is
// false when the histogram has no observations.
func (s *Scrape) Quantile(name string, q float64, labels ...string) (float64, bool) {
	buckets := map[float64]float64{}
	for _, p := range s.Samples {
		if p.Name != name+"_bucket" || !matches(p.Labels, labels) {
			continue
		}
		le, err := parseFloat(p.Labels["le"])
		if err != nil {
			continue
		}
		buckets[le] += p.Value
	}
	bounds := slices.Sorted(maps.Keys(buckets))
	if len(bounds) == 0 {
		return 0, false
	}
	total := buckets[bounds[len(bounds)-1]]
	if total == 0 {
		return 0, false
	}
	rank := q * total
	prevBound, prevCount := 0.0, 0.0
	for _, b := range bounds {
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
