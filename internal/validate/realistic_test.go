package validate

import (
	"fmt"
	"os"
	"sort"
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
	// with oneOf and if/then: a pricing of every branch as failing would
	// refuse it at 6 KB.
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
	return append(out, fieldFamilies()...)
}

// lineKinds name the line layers of a map, one patternProperties entry each.
var lineKinds = []string{"road", "river", "rail", "trail", "coast", "border", "pipe", "cable",
	"canal", "ferry", "wall", "fence", "power", "tram", "bus", "bike"}

// fieldFamilies are catalogue-style shapes: maps keyed by patternProperties
// holding short number arrays, with not, if or oneOf on each position (the
// library validates 6 KB of it in about a millisecond; an estimate that
// applied every pattern's schema to every key and priced not, if and oneOf
// as failing would refuse it), a time series keyed by date and a
// translations map.
func fieldFamilies() []realisticFamily {
	lines := func(kinds int, position string) string {
		return `{"type":"object","additionalProperties":false,"patternProperties":{` +
			repeatJoin(kinds, func(i int) string {
				return fmt.Sprintf(`"^%s_[0-9]+$":{"type":"array","minItems":2,"items":%s}`, lineKinds[i], position)
			}) + `}}`
	}
	// four lines of n positions each
	linesValue := func(kinds int) func(n int) string {
		return func(n int) string {
			return "{" + repeatJoin(4, func(k int) string {
				return fmt.Sprintf(`"%s_%d":[`, lineKinds[k*kinds/4], k) + repeatJoin(max(n, 2), func(j int) string {
					return fmt.Sprintf(`[%d.%04d,%d.%04d]`, (k*7+j)%180, j*37%10000, (k+j)%90, j*91%10000)
				}) + "]"
			}) + "}"
		}
	}
	notNull := `{"type":"array","minItems":2,"maxItems":3,"items":{"type":"number","not":{"type":"null"}}}`
	if3D := `{"type":"array","items":{"type":"number"},"minItems":2,"maxItems":3,"if":{"minItems":3},` +
		`"then":{"items":[{"minimum":-180,"maximum":180},{"minimum":-90,"maximum":90}]},` +
		`"else":{"items":[{"minimum":-180,"maximum":180},{"minimum":-90,"maximum":90}]}}`
	oneOf2D3D := `{"oneOf":[{"type":"array","items":{"type":"number"},"minItems":2,"maxItems":2},` +
		`{"type":"array","items":{"type":"number"},"minItems":3,"maxItems":3}]}`
	date := func(i int) string { return fmt.Sprintf("%04d-%02d-%02d", 2000+i/336, 1+i/28%12, 1+i%28) }
	daily := `{"type":"object","additionalProperties":false,"patternProperties":{"^[0-9]{4}-[0-9]{2}-[0-9]{2}$":` +
		`{"oneOf":[{"type":"number"},{"type":"array","items":{"type":"number"},"minItems":2,"maxItems":2}]}}}`
	dailyValue := func(n int) string {
		return "{" + repeatJoin(n, func(i int) string {
			if i%2 == 0 {
				return fmt.Sprintf(`"%s":%d.5`, date(i), i%40)
			}
			return fmt.Sprintf(`"%s":[%d.5,%d]`, date(i), i%40, i%40+3)
		}) + "}"
	}
	i18n := `{"type":"object","additionalProperties":false,"patternProperties":{"^[a-z]{2,3}(-[A-Z]{2})?$":{"type":"string","minLength":1,"maxLength":500}}}`
	i18nValue := func(n int) string {
		return "{" + repeatJoin(n, func(i int) string {
			return fmt.Sprintf(`"%c%c-%c%c":"Your order %d has shipped and will arrive within three to five working days; track it from your account page."`,
				'a'+i%26, 'a'+i/26%26, 'A'+i/676%26, 'A'+i%26, i)
		}) + "}"
	}
	return append([]realisticFamily{
		{"map lines (16 kinds, not null on numbers) ×positions", lines(16, notNull), linesValue(16)},
		{"map lines (8 kinds, if 3D on positions) ×positions", lines(8, if3D), linesValue(8)},
		{"map lines (16 kinds, oneOf 2D/3D positions) ×positions", lines(16, oneOf2D3D), linesValue(16)},
		{"daily series keyed by date (oneOf number, range) ×days", daily, dailyValue},
		{"translations keyed by locale ×locales", i18n, i18nValue},
	}, contactFamilies()...)
}

// contactFamilies: lists of records whose strings carry formats and short
// patterns, and the same with the patterns zod 4 emits for its uuid and
// datetime (94-116 instructions).
func contactFamilies() []realisticFamily {
	const zodUUID = `^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$`
	const zodDateTime = `^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))T(?:(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d+)?(?:Z))$`
	contacts := func(id, created string) string {
		return `{"type":"array","items":{"type":"object","additionalProperties":false,"required":["id","name","email","created"],"properties":{` +
			`"id":` + id + `,"name":{"type":"string","pattern":"^[a-z ]+$"},"handle":{"type":"string","pattern":"^[a-z][a-z0-9_]{2,30}$"},` +
			`"email":{"type":"string","format":"email"},"site":{"type":"string","format":"uri"},"created":` + created + `,` +
			`"ip":{"type":"string","format":"ipv4"},"code":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"}}}}`
	}
	value := func(n int) string {
		return arr(n, func(i int) string {
			return fmt.Sprintf(`{"id":"6f1c2b7e-3d4a-4b5c-8d9e-%012d","name":"ada lovelace","handle":"ada%d","email":"ada%d@example.com",`+
				`"site":"https://example.com/u/%d","created":"2026-05-%02dT10:00:00Z","ip":"10.0.%d.%d","code":"ABC-%04d"}`,
				i, i, i, i, 1+i%28, i%250, i%250, i%10000)
		})
	}
	return []realisticFamily{
		{"contacts (formats, short patterns) ×contacts",
			contacts(`{"type":"string","format":"uuid"}`, `{"type":"string","format":"date-time"}`), value},
		{"contacts (formats, zod 4's uuid and datetime patterns) ×contacts",
			contacts(`{"type":"string","format":"uuid","pattern":"`+zodUUID+`"}`, `{"type":"string","format":"date-time","pattern":"`+zodDateTime+`"}`), value},
	}
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
// and of field shapes, of 4, 16 and 64 KiB, are never refused by the
// budget unless their real validation takes 10 ms or more.
//
// Whether the estimator accepts a value is deterministic, so most values
// need no clock. A refused value must cost the library (alone) at least
// refusalFloor times what it costs on the yardstick, measured in the same
// run, alternately, the median of 7 ratios: a ratio, which neither a faster
// machine nor a loaded one moves much, instead of a wall-time threshold.
// With CHATD_CALIBRATE=1 it prints the estimator's accuracy: predicted
// against measured, end to end.
//
// Not parallel, on purpose: the yardstick counts the process's CPU time
// (the collector's included, a real part of the cost), so a parallel test
// of this package would add to one side of a ratio and not the other.
func TestRealisticValuesAccepted(t *testing.T) {
	calibrate := os.Getenv("CHATD_CALIBRATE") != ""
	yard := newYardstick(t)
	var b strings.Builder
	for _, f := range realisticFamilies(t) {
		if f.schema == "" {
			t.Fatalf("%s: no schema", f.name)
		}
		s := mustCompile(t, f.schema)
		for _, limit := range []int{4 << 10, 16 << 10, 64 << 10} {
			raw := []byte(f.value(grow(f, limit)))
			v, err := decodeTree(raw, ValueLimits)
			if err != nil {
				t.Fatalf("%s: %v", f.name, err)
			}
			if res, _ := s.compiled.Validate(docLoader{v.val}); !res.Valid() {
				t.Fatalf("%s at %d bytes: the library finds the value invalid: %v", f.name, len(raw), res.Errors())
			}
			e := estimateCost(s.model, v, len(raw))
			if e.over {
				// larger values of the family are refused a fortiori
				yard.justify(t, fmt.Sprintf("%s at %d bytes", f.name, len(raw)), s, v)
				break
			}
			if r := s.Validate(raw); !r.Valid() {
				t.Errorf("%s at %d bytes: %s", f.name, len(raw), truncate(r.Summary(), 300))
				continue
			}
			if calibrate {
				ns, bytes := measure(func() { s.Validate(raw) }, 5)
				fmt.Fprintf(&b, "| %s | %d | %.2f | %.2f | %.1f | %.2f | %.2f |\n", f.name, len(raw), e.ns/1e6, ns/1e6, e.ns/ns, e.bytes/(1<<20), bytes/(1<<20))
			}
		}
	}
	if calibrate {
		t.Log("\n| family | value bytes | predicted ms | measured ms | ratio | predicted MiB | measured MiB |\n|---|---|---|---|---|---|---|\n" + b.String())
	}
}

// The yardstick is the library validating the 64 KiB order value
// (realisticSchema): 4.6 ms of CPU time at the least on the reference
// machine (2 vCPUs), 4.6-15 ms under load. A refused value must take the
// library at least refusalFloor times as long: about 10 ms and more on that
// machine, and proportionally on a faster or slower one.
const refusalFloor = 2

type yardstick struct {
	s *Schema
	v *vnode
}

func newYardstick(t *testing.T) *yardstick {
	s := mustCompile(t, realisticSchema)
	f := realisticFamily{value: realisticValue}
	v, err := decodeTree([]byte(f.value(grow(f, 64<<10))), ValueLimits)
	if err != nil {
		t.Fatal(err)
	}
	return &yardstick{s, v}
}

// justify fails the test unless the library takes at least refusalFloor
// times the yardstick on v. Race instrumentation slows the two unequally,
// so under -race it measures nothing (make test runs this test without
// -race too).
func (y *yardstick) justify(t *testing.T, what string, s *Schema, v *vnode) {
	t.Helper()
	if raceEnabled {
		t.Logf("%s: refused by the budget (not measured under -race)", what)
		return
	}
	ratios, got, yard := make([]float64, 7), make([]float64, 7), make([]float64, 7)
	lib := func(s *Schema, v *vnode) float64 {
		c0 := processCPU()
		_, _ = s.compiled.Validate(docLoader{v.val})
		return float64(processCPU() - c0)
	}
	lib(s, v)
	lib(y.s, y.v)
	for i := range got {
		got[i], yard[i] = lib(s, v), lib(y.s, y.v)
		ratios[i] = got[i] / yard[i]
	}
	for _, xs := range [][]float64{ratios, got, yard} {
		sort.Float64s(xs)
	}
	ratio := ratios[3]
	msg := fmt.Sprintf("%s: refused by the budget; the library takes %.1f× the yardstick (medians of 7 alternate runs, CPU time: %.1f ms against %.1f ms)",
		what, ratio, got[3]/1e6, yard[3]/1e6)
	if ratio < refusalFloor {
		t.Errorf("%s, below the %d× floor", msg, refusalFloor)
		return
	}
	t.Log(msg)
}
