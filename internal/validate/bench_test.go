package validate

import (
	"fmt"
	"strings"
	"testing"
)

// worstSchemas sit at the schema caps; they bound the cost of Compile
// (scan, screening, meta-validation, adaptation, library compile, cost
// model).
func worstSchemas() map[string]string {
	leaf := `{"type":"string","minLength":1,"maxLength":9,"format":"email","enum":["a","b"],"title":"t"}`
	smallLeaf := `{"type":"string","maxLength":9,"format":"email"}`
	return map[string]string{
		// 512 subschemas, each with several keywords
		"subschemas1024": `{"properties":{` + repeatJoin(MaxSubschemas-1, func(i int) string { return fmt.Sprintf(`"p%d":%s`, i, smallLeaf) }) + `}}`,
		// 32 patterns of about 500 instructions
		"patterns32x500": `{"properties":{` + repeatJoin(MaxPatternTotal/512, func(i int) string { return fmt.Sprintf(`"p%d":{"pattern":"^%c.{490}$"}`, i, 'a'+i%26) }) + `}}`,
		// four enums of 256 entries, 16 KiB each
		"enums4x1024": `{"properties":{` + repeatJoin(4, func(i int) string {
			return fmt.Sprintf(`"e%d":{"enum":[`, i) + repeatJoin(MaxEnumEntries, func(j int) string { return fmt.Sprintf(`"%d-%s"`, j, strings.Repeat("v", 6)) }) + `]}`
		}) + `}}`,
		// 16,384 JSON values in required lists at their cap
		"nodes16384": `{"allOf":[` + repeatJoin(32, func(j int) string {
			return `{"required":[` + repeatJoin(MaxNames-8, func(i int) string { return fmt.Sprintf(`"%x"`, i) }) + `]}`
		}) + `]}`,
		// 16 levels, 16 branches per level where the subschema count allows
		"deep16": allOfChain(MaxSubschemaDepth-1, `{"anyOf":[`+repeatJoin(16, constant(leaf))+`]}`),
	}
}

func BenchmarkCompile(b *testing.B) {
	cases := worstSchemas()
	cases["realistic"] = realisticSchema
	for _, name := range []string{"realistic", "subschemas1024", "patterns32x500", "enums4x1024", "nodes16384", "deep16"} {
		raw := []byte(cases[name])
		if _, err := Compile(raw); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := Compile(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// realisticInvalid breaks five fields of realisticValue.
func realisticInvalid() string {
	v := realisticValue(15)
	for _, r := range [][2]string{
		{`"ada@example.com"`, `"ada-at-example"`}, {`"quantity":1,`, `"quantity":0,`}, {`"currency":"EUR"`, `"currency":"XXX"`},
		{`"country":"GB"`, `"country":"gb"`}, {`"status":"paid"`, `"status":"lost"`},
	} {
		v = strings.Replace(v, r[0], r[1], 1)
	}
	return v
}

func BenchmarkValidate(b *testing.B) {
	s := mustCompile(b, realisticSchema)
	for _, c := range []struct{ name, value string }{
		{"realistic-valid", realisticValue(15)},
		{"realistic-invalid", realisticInvalid()},
	} {
		raw := []byte(c.value)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				s.Validate(raw)
			}
		})
	}
}

// BenchmarkFamilies validates each adversarial family at the largest value
// the budget accepts, end to end (scan, estimate, library). The accepted
// size n and the prediction are reported as extra metrics.
func BenchmarkFamilies(b *testing.B) {
	for _, f := range families {
		s := mustCompile(b, f.schema)
		n := largestAccepted(b, f, s)
		raw := []byte(f.value(n))
		v, _ := decodeTree(raw, ValueLimits)
		est := estimateCost(s.model, v, len(raw))
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				if r := s.Validate(raw); len(r.Errors) == 1 && r.Errors[0].Message == TooExpensive {
					b.Fatal("refused")
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
			b.ReportMetric(float64(n), "n")
			b.ReportMetric(float64(len(raw)), "value-B")
			b.ReportMetric(est.ns/1e6, "pred-ms")
			b.ReportMetric(est.bytes/(1<<20), "pred-MiB")
		})
	}
}

// BenchmarkRefusal is the cost of refusing a value the budget does not
// admit: the scan plus the estimator up to the point it exceeds the budget.
func BenchmarkRefusal(b *testing.B) {
	for _, f := range families[:4] {
		s := mustCompile(b, f.schema)
		raw := []byte(f.value(min(f.maxN, ValueLimits.MaxNodes-100)))
		if len(raw) > ValueLimits.MaxBytes {
			continue
		}
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r := s.Validate(raw); r.Valid() || r.Errors[0].Message != TooExpensive {
					b.Fatal(r.Summary())
				}
			}
		})
	}
}

// BenchmarkDecode scans the largest values the caps admit.
func BenchmarkDecode(b *testing.B) {
	for name, raw := range map[string]string{
		"object16k":  obj(ValueLimits.MaxNodes-1, constant(`"v"`)),
		"numbers16k": arr(4000, constant(num64)),
		"string256k": `"` + strings.Repeat(`\u00e9`, (ValueLimits.MaxBytes-2)/6) + `"`,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := decodeTree([]byte(raw), ValueLimits); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
