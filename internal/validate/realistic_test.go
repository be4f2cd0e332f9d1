package validate

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// realisticFamily grows a valid value of a real generator's schema (or of
// a shape seen in the field) with n.
type realisticFamily struct {
	name   string
	schema string
	value  func(n int) string
}

var sensors = []string{"temp", "rh", "wind", "rain", "snow", "sun"}

func realisticFamilies(t testing.TB) []realisticFamily {
	schemas := map[string]string{}
	for _, f := range loadGeneratorFixtures(t) {
		schemas[f.name] = string(f.schema)
	}
	line := func(i int) string {
		return fmt.Sprintf(`{"sku":"SKU-%05d","quantity":%d,"unit_price":%d.25}`, i, 1+i%7, i%100)
	}
	order := func(n int) string {
		return `{"id":"6f1c2b7e-3d4a-4b5c-8d9e-0a1b2c3d4e5f","status":"paid","customer":{"name":"Ada","email":"ada@example.invalid",` +
			`"address":{"street":"1 Main St","city":"Oslo","country":"NO"}},"lines":` + arr(n, line) +
			`,"note":"rush","metadata":{"channel":"web"},"created_at":"2026-05-01T10:00:00Z"}`
	}
	shape := func(i int) string {
		switch i % 3 {
		case 0:
			return fmt.Sprintf(`{"kind":"circle","radius":%d.5}`, 1+i%9)
		case 1:
			return fmt.Sprintf(`{"kind":"rect","width":%d,"height":2.25}`, 1+i%9)
		}
		return `{"kind":"polygon","points":[{"x":0,"y":0},{"x":1.5,"y":0},{"x":0,"y":2}]}`
	}
	drawing := func(n int) string { return `{"name":"d","shapes":` + arr(n, shape) + `}` }
	tree := func(n int) string {
		return `{"name":"root","children":` + arr(n, func(i int) string {
			return fmt.Sprintf(`{"name":"c%d","children":[{"name":"g%d-a"},{"name":"g%d-b","children":[]}]}`, i, i, i)
		}) + `}`
	}
	measure := `{"type":"array","items":{"type":"number","minimum":-100,"maximum":1000},"minItems":1,"maxItems":4,` +
		`"oneOf":[{"maxItems":2},{"minItems":3}],"if":{"minItems":3},"then":{"items":{"multipleOf":0.25}}}`
	series := `{"type":"object","additionalProperties":false,"minProperties":1,"patternProperties":{` +
		repeatJoin(6, func(i int) string { return fmt.Sprintf(`"^%s_[0-9]+$":%s`, sensors[i], measure) }) +
		`},"if":{"required":["temp_0"]},"then":{"required":["rh_1"]}}`
	seriesValue := func(n int) string {
		return "{" + repeatJoin(n, func(i int) string {
			if i%2 == 0 {
				return fmt.Sprintf(`"%s_%d":[%d.5,%d,3.25]`, sensors[i%6], i, i%40, i%7)
			}
			return fmt.Sprintf(`"%s_%d":[%d.5,%d]`, sensors[i%6], i, i%40, i%7)
		}) + "}"
	}
	// Objects keyed by patternProperties holding short number arrays,
	// with oneOf and if/then: the shape the old estimator refused at 6 KB.
	// The same with one pattern and the oneOf/if on each number.
	readings := `{"type":"object","patternProperties":{"^[a-z]+_[0-9]+$":{"type":"array","maxItems":8,"items":` +
		`{"oneOf":[{"type":"integer"},{"type":"number","multipleOf":0.25,"not":{"multipleOf":1}}],"if":{"minimum":0},"then":{"maximum":1000},"else":{"minimum":-100}}}},` +
		`"additionalProperties":false}`
	readingsValue := func(n int) string {
		return "{" + repeatJoin(n, func(i int) string {
			return fmt.Sprintf(`"%s_%d":[%d,%d.25,-%d.5]`, sensors[i%6], i, i%90, i%9, i%50)
		}) + "}"
	}
	var out []realisticFamily
	out = append(out, realisticFamily{"readings (patternProperties, oneOf, if on numbers)", readings, readingsValue})
	for _, k := range []string{"pydantic/order", "zod4/order", "zod-to-json-schema/order", "invopop/order"} {
		out = append(out, realisticFamily{k + " ×lines", schemas[k], order})
	}
	for _, k := range []string{"pydantic/drawing", "zod4/drawing", "zod4/drawing-draft7", "zod-to-json-schema/drawing", "invopop/drawing"} {
		out = append(out, realisticFamily{k + " ×shapes", schemas[k], drawing})
	}
	for _, k := range []string{"pydantic/category", "zod4/category", "zod-to-json-schema/category", "invopop/category"} {
		out = append(out, realisticFamily{k + " ×children", schemas[k], tree})
	}
	out = append(out, realisticFamily{"series (patternProperties, oneOf, if)", series, seriesValue},
		realisticFamily{"order (bench schema) ×items", realisticSchema, realisticValue})
	return out
}

// grow returns the largest n whose value is at most limit bytes.
func grow(f realisticFamily, limit int) int {
	lo, hi := 1, 1
	for len(f.value(hi)) <= limit && hi < 1<<16 {
		lo, hi = hi, 2*hi
	}
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if len(f.value(mid)) <= limit {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// TestRealisticValuesAccepted: valid values of real generators' schemas
// (and of the field shape the old estimator refused) of 4, 16 and 64 KiB
// are never refused by the budget unless their real validation takes
// 10 ms or more. With CHATD_CALIBRATE=1 it prints the estimator's
// accuracy: predicted against measured, end to end.
func TestRealisticValuesAccepted(t *testing.T) {
	if raceEnabled {
		t.Skip("it measures the library, which -race slows tenfold; make test runs it without -race")
	}
	t.Parallel()
	calibrate := os.Getenv("CHATD_CALIBRATE") != ""
	var b strings.Builder
	for _, f := range realisticFamilies(t) {
		if f.schema == "" {
			t.Fatalf("%s: no schema", f.name)
		}
		s := mustCompile(t, f.schema)
		for _, limit := range []int{4 << 10, 16 << 10, 64 << 10} {
			raw := []byte(f.value(grow(f, limit)))
			if !json.Valid(raw) {
				t.Fatalf("%s: invalid JSON", f.name)
			}
			r := s.Validate(raw)
			v, _ := decodeTree(raw, ValueLimits)
			if !r.Valid() {
				// Refusing is allowed only for a value whose real validation
				// takes 10 ms or more.
				lib, _ := measureLib(s, v, 3)
				if r.Errors[0].Message != TooExpensive || lib < 10e6 {
					t.Errorf("%s at %d bytes (the library alone: %.1f ms): %s", f.name, len(raw), lib/1e6, truncate(r.Summary(), 300))
				} else {
					t.Logf("%s at %d bytes: refused by the budget; the library alone takes %.1f ms", f.name, len(raw), lib/1e6)
				}
				continue
			}
			if !calibrate {
				continue
			}
			e := estimateCost(s.model, v, len(raw))
			ns, bytes := measure(func() { s.Validate(raw) }, 5)
			fmt.Fprintf(&b, "| %s | %d | %.2f | %.2f | %.1f | %.2f | %.2f |\n", f.name, len(raw), e.ns/1e6, ns/1e6, e.ns/ns, e.bytes/(1<<20), bytes/(1<<20))
		}
	}
	if calibrate {
		t.Log("\n| family | value bytes | predicted ms | measured ms | ratio | predicted MiB | measured MiB |\n|---|---|---|---|---|---|---|\n" + b.String())
	}
}
