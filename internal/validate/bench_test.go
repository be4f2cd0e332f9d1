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
		// four enums the library checks, at the cap of those (a value that
		// is not a string in each)
		"enums4x2048": `{"properties":{` + repeatJoin(4, func(i int) string {
			return fmt.Sprintf(`"e%d":{"enum":[null,`, i) + repeatJoin(MaxMixedEnums-1, func(j int) string { return fmt.Sprintf(`"%d-%s"`, j, strings.Repeat("v", 6)) }) + `]}`
		}) + `}}`,
		// two enums of strings checked as sets, at the cap
		"enumsets2x8192": `{"properties":{` + repeatJoin(2, func(i int) string {
			return fmt.Sprintf(`"e%d":{"enum":[`, i) + repeatJoin(MaxEnumEntries-8, func(j int) string { return fmt.Sprintf(`"%c%d"`, 'a'+i, j) }) + `]}`
		}) + `}}`,
		// 16,384 JSON values in required lists at their cap
		"nodes16384": `{"allOf":[` + repeatJoin(32, func(j int) string {
			return `{"required":[` + repeatJoin(MaxNames-8, func(i int) string { return fmt.Sprintf(`"%x"`, i) }) + `]}`
		}) + `]}`,
		// 16 levels, 16 branches per level where the subschema count allows
		"deep16": allOfChain(MaxSubschemaDepth-1, `{"anyOf":[`+repeatJoin(16, constant(leaf))+`]}`),
		// the pattern count at its cap, every one run by the ECMAScript
		// engine, each at the source cap
		"ecma256x1k": `{"properties":{` + repeatJoin(MaxPatterns, func(i int) string {
			body := fmt.Sprintf(`^(?!x%d)`, i)
			for len(body) < MaxPatternBytes-16 {
				body += `(?=[a-z])[a-z]{1,2}`
			}
			return fmt.Sprintf(`"p%d":{"pattern":%q}`, i, body)
		}) + `}}`,
		// a reference graph at the schemas-to-build cap
		"compiled8192": compiledAtCap(),
	}
}

// compiledAtCap references each level of a deep definition so that the
// library builds about MaxCompiled schemas.
func compiledAtCap() string {
	def := `true`
	for range 15 {
		def = `{"properties":{"n":` + def + `,` + repeatJoin(59, func(j int) string { return fmt.Sprintf(`"s%d":{"type":"string"}`, j) }) + `}}`
	}
	return `{"definitions":{"big":` + def + `},"properties":{` + repeatJoin(15, func(i int) string {
		return fmt.Sprintf(`"r%d":{"$ref":"#/definitions/big%s"}`, i, strings.Repeat("/properties/n", i))
	}) + `}}`
}

func BenchmarkCompile(b *testing.B) {
	cases := worstSchemas()
	cases["realistic"] = realisticSchema
	for _, name := range []string{"realistic", "subschemas1024", "patterns32x500", "enums4x2048", "enumsets2x8192", "nodes16384", "deep16", "ecma256x1k", "compiled8192"} {
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

// BenchmarkRefused: schemas one step past a cap are refused at admission,
// and quickly, whatever the caps' size.
func BenchmarkRefused(b *testing.B) {
	props := func(n int) string {
		return `{"properties":{` + repeatJoin(n, func(i int) string { return fmt.Sprintf(`"p%d":{"type":"string","format":"email"}`, i) }) + `}}`
	}
	cases := map[string]string{
		"subschemas":   props(MaxSubschemas),
		"patterns":     `{"properties":{` + repeatJoin(MaxPatterns+1, func(i int) string { return fmt.Sprintf(`"p%d":{"pattern":"^(?!a%d)b"}`, i, i) }) + `}}`,
		"patternTotal": `{"properties":{` + repeatJoin(MaxPatternTotal/1000+1, func(i int) string { return fmt.Sprintf(`"p%d":{"pattern":"^%c.{996}$"}`, i, 'a'+i%26) }) + `}}`,
		"enum":         `{"enum":[` + repeatJoin(MaxEnumEntries+1, func(i int) string { return fmt.Sprintf(`"e%d"`, i) }) + `]}`,
		// compiledAtCap builds 8,132 schemas: 61 more targets of one schema each
		"compiled": strings.Replace(compiledAtCap(), `"r0"`, repeatJoin(61, func(j int) string {
			return fmt.Sprintf(`"x%d":{"$ref":"#/definitions/big/properties/%s"}`, j, []string{fmt.Sprintf("s%d", j), fmt.Sprintf("n/properties/s%d", j-59)}[min(j/59, 1)])
		})+`,"r0"`, 1),
	}
	for _, name := range []string{"subschemas", "patterns", "patternTotal", "enum", "compiled"} {
		raw := []byte(cases[name])
		if _, err := Compile(raw); err == nil {
			b.Fatalf("%s: admitted", name)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = Compile(raw)
			}
		})
	}
}
