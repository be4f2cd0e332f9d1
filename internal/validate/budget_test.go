package validate

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// validateAlloc measures the bytes one Schema.Validate allocates, decoding
// and estimating included (the larger of two runs: map order changes the
// library's error order and slice growth).
func validateAlloc(s *Schema, raw []byte) float64 {
	var ms0, ms1 runtime.MemStats
	worst := 0.0
	for range 2 {
		runtime.ReadMemStats(&ms0)
		s.Validate(raw)
		runtime.ReadMemStats(&ms1)
		worst = max(worst, float64(ms1.TotalAlloc-ms0.TotalAlloc))
	}
	return worst
}

// TestBudgetFamilies grows each adversarial family to the largest value
// the budget accepts: that value is validated by the library, the next
// larger one is refused with TooExpensive before the library runs, and
// (outside -race, which changes allocation) Validate, decoding included,
// allocates no more than predicted and at most 32 MiB. Time is measured by
// BenchmarkFamilies.
func TestBudgetFamilies(t *testing.T) {
	for _, f := range families {
		s := mustCompile(t, f.schema)
		n := largestAccepted(t, f, s)
		raw := []byte(f.value(n))
		v, err := decodeTree(raw, ValueLimits)
		if err != nil {
			t.Fatal(err)
		}
		est := estimateCost(s.model, v, len(raw))
		runs := libraryRuns.Load()
		if r := s.Validate(raw); len(r.Errors) > 0 && r.Errors[0].Message == TooExpensive {
			t.Errorf("%s n=%d: refused", f.name, n)
		}
		if libraryRuns.Load() != runs+1 && est.imprecise == nil {
			t.Errorf("%s n=%d: the library did not run", f.name, n)
		}
		if n < f.maxN {
			bigger := []byte(f.value(n + 1))
			if _, err := decodeTree(bigger, ValueLimits); err == nil {
				runs := libraryRuns.Load()
				r := s.Validate(bigger)
				if r.Valid() || r.Errors[0].Message != TooExpensive || r.Errors[0].Location != "" {
					t.Errorf("%s n=%d: %s, want the budget refusal", f.name, n+1, r.Summary())
				}
				if libraryRuns.Load() != runs {
					t.Errorf("%s n=%d: refused value reached the library", f.name, n+1)
				}
			}
		}
		msg := fmt.Sprintf("%-28s n=%-6d value %7d B  predicted %5.1f ms %5.2f MiB", f.name, n, len(raw), est.ns/1e6, est.bytes/(1<<20))
		if !raceEnabled {
			actual := validateAlloc(s, raw)
			msg += fmt.Sprintf("  allocated %5.2f MiB", actual/(1<<20))
			if actual > est.bytes || actual > 32<<20 {
				t.Errorf("%s n=%d: allocated %.0f bytes, predicted %.0f (limit 32 MiB)", f.name, n, actual, est.bytes)
			}
		}
		t.Log(msg)
	}
}

func TestBudgetMessage(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"additionalProperties":`+tree128(`{"type":"string"}`)+`}`)
	r := s.Validate([]byte(obj(2000, constant(`1`))))
	if r.Valid() || r.Total != 1 || r.Errors[0].Location != "" {
		t.Fatalf("%+v", r)
	}
	if !strings.Contains(r.Summary(), "too expensive to validate against this schema") {
		t.Errorf("summary %q", r.Summary())
	}
	// the same value against a cheap schema is fine
	if r := mustCompile(t, `{"type":"object"}`).Validate([]byte(obj(2000, constant(`1`)))); !r.Valid() {
		t.Errorf("%s", r.Summary())
	}
}

// TestEstimatorBoundsAllocation checks on random schema/value pairs that
// the estimator never predicts fewer bytes than Validate allocates.
func TestEstimatorBoundsAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation differs under -race")
	}
	seeds, _ := strconv.Atoi(os.Getenv("CHATD_BOUND_SEEDS"))
	seeds = max(seeds, 1)
	checked := 0
	for i := range 400 * seeds {
		rng := rand.New(rand.NewPCG(uint64(i), 2))
		g := &gen{rng: rng}
		schema := g.root()
		s, err := Compile([]byte(schema))
		if err != nil {
			continue // the generator is loose; the screening decides
		}
		for j := range 3 {
			raw := g.value(0)
			v, err := decodeTree([]byte(raw), ValueLimits)
			if err != nil {
				t.Fatalf("generated value %s: %v", raw, err)
			}
			est := estimateCost(s.model, v, len(raw))
			if est.over || est.imprecise != nil {
				continue
			}
			checked++
			if actual := validateAlloc(s, []byte(raw)); actual > est.bytes {
				t.Errorf("case %d.%d: allocated %.0f > predicted %.0f bytes\nschema %s\nvalue %s", i, j, actual, est.bytes, schema, raw)
			}
		}
	}
	t.Logf("%d random pairs checked", checked)
	if checked < 300*seeds {
		t.Errorf("only %d pairs checked", checked)
	}
}

// gen makes random schemas and values over a small vocabulary so that
// values often meet the schema's keywords.
type gen struct{ rng *rand.Rand }

var genKeys = []string{"a", "b", "c", "$ref", "k1"}

func (g *gen) pick(xs ...string) string { return xs[g.rng.IntN(len(xs))] }

func (g *gen) schema(depth int) string {
	if depth > 3 || g.rng.IntN(8) == 0 {
		return g.pick("true", "false", "{}", `{"type":"string"}`, `{"type":"integer"}`)
	}
	var kws []string
	for range 1 + g.rng.IntN(4) {
		switch g.rng.IntN(27) {
		case 0:
			kws = append(kws, `"type":`+g.pick(`"object"`, `"array"`, `"string"`, `"number"`, `["string","null"]`, `["integer","object"]`))
		case 1:
			kws = append(kws, `"properties":{"a":`+g.schema(depth+1)+`,"b":`+g.schema(depth+1)+`}`)
		case 2:
			kws = append(kws, `"additionalProperties":`+g.schema(depth+1))
		case 3:
			kws = append(kws, `"items":`+g.schema(depth+1))
		case 4:
			kws = append(kws, `"items":[`+g.schema(depth+1)+`],"additionalItems":`+g.schema(depth+1))
		case 5:
			kws = append(kws, `"allOf":[`+g.schema(depth+1)+`,`+g.schema(depth+1)+`]`)
		case 6:
			kws = append(kws, `"anyOf":[`+g.schema(depth+1)+`,`+g.schema(depth+1)+`]`)
		case 7:
			kws = append(kws, `"oneOf":[`+g.schema(depth+1)+`,`+g.schema(depth+1)+`,`+g.schema(depth+1)+`]`)
		case 8:
			kws = append(kws, `"not":`+g.schema(depth+1))
		case 9:
			kws = append(kws, `"if":`+g.schema(depth+1)+`,"then":`+g.schema(depth+1)+`,"else":`+g.schema(depth+1))
		case 10:
			kws = append(kws, `"required":["a","c","`+strings.Repeat("r", g.rng.IntN(40))+`"]`)
		case 11:
			kws = append(kws, `"enum":[1,"a",{"a":[1,2]},null,2.5]`)
		case 12:
			kws = append(kws, `"const":`+g.pick(`1`, `"a"`, `{"a":1}`, `[true]`))
		case 13:
			kws = append(kws, `"minimum":`+g.pick("0", "1.5", "1e-30", "-1e60")+`,"multipleOf":`+g.pick("0.01", "3", "1e-20"))
		case 14:
			kws = append(kws, `"maxLength":2,"minLength":1,"pattern":"^[a-c]+$"`)
		case 15:
			kws = append(kws, `"format":`+g.pick(`"email"`, `"date-time"`, `"uri"`, `"hostname"`, `"uri-template"`, `"ipv6"`))
		case 16:
			kws = append(kws, `"patternProperties":{"^[ab]":`+g.schema(depth+1)+`,"c$":`+g.schema(depth+1)+`}`)
		case 17:
			kws = append(kws, `"propertyNames":`+g.schema(depth+1))
		case 18:
			kws = append(kws, `"dependencies":{"a":["b","c"],"b":`+g.schema(depth+1)+`}`)
		case 19:
			kws = append(kws, `"contains":`+g.schema(depth+1))
		case 20:
			kws = append(kws, `"uniqueItems":true`)
		case 21:
			kws = append(kws, `"minItems":2,"maxItems":3,"minProperties":1,"maxProperties":2`)
		case 22:
			kws = append(kws, `"exclusiveMaximum":`+g.pick("10", "0.5", "1e60")+`,"maximum":`+g.pick("3", "1e-60"))
		case 23:
			kws = append(kws, `"additionalProperties":false`)
		case 24:
			kws = append(kws, g.pick(`"$ref":"#"`, `"$ref":"#/definitions/d"`, `"$ref":"#/definitions/d"`, `"$id":"http://example.invalid/"`, `"id":"x"`, `"definitions":{}`, `"x-ext":1`, `"$schema":"http://json-schema.org/draft-07/schema#"`))
		case 25:
			kws = append(kws, `"default":{"$ref":"file:///etc/passwd"},"examples":[{"$id":"x"}],"title":"$ref"`)
		case 26:
			kws = append(kws, `"format":`+g.pick(`"regex"`, `"idn-hostname"`, `"date"`, `"uuid"`, `"json-pointer"`))
		}
	}
	seen := map[string]bool{}
	var uniq []string
	for _, k := range kws {
		name := k[:strings.Index(k, ":")]
		if !seen[name] {
			seen[name] = true
			uniq = append(uniq, k)
		}
	}
	return "{" + strings.Join(uniq, ",") + "}"
}

// root is a random schema, often with a definition that "$ref" names
// (recursion included: the definition may refer to itself or the root).
func (g *gen) root() string {
	s := g.schema(0)
	if strings.HasPrefix(s, "{") && s != "{}" && g.rng.IntN(2) == 0 {
		s = `{"definitions":{"d":` + g.schema(1) + `},` + s[1:]
	}
	return s
}

func (g *gen) value(depth int) string {
	k := g.rng.IntN(10)
	if depth > 4 {
		k = g.rng.IntN(6)
	}
	switch k {
	case 0:
		return "null"
	case 1:
		return g.pick("true", "false")
	case 2:
		return g.pick("0", "-0", "1", "2.5", "1e60", "0.01", "12345678901234567890123", "-7", "1."+strings.Repeat("3", 50)+"e-10")
	case 3, 4:
		return strconv.Quote(g.pick("a", "abc", "x@y.z", "2026-01-02T03:04:05Z", "http://h/{x}", "::1", strings.Repeat("é<", g.rng.IntN(50))))
	case 5:
		return strconv.Quote(g.pick(genKeys...))
	case 6, 7:
		n := g.rng.IntN(6)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = g.value(depth + 1)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	n := g.rng.IntN(5)
	used := map[string]bool{}
	var parts []string
	for range n {
		key := g.pick(genKeys...)
		if g.rng.IntN(4) == 0 {
			key = strings.Repeat("k", 1+g.rng.IntN(200))
		}
		if used[key] {
			continue
		}
		used[key] = true
		parts = append(parts, strconv.Quote(key)+":"+g.value(depth+1))
	}
	return "{" + strings.Join(parts, ",") + "}"
}
