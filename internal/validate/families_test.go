package validate

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// Adversarial families: schemas at or near the caps paired with values that
// grow with n. The verification test and the benchmarks grow each value to
// the largest n the budget accepts (TestBudgetFamilies, BenchmarkFamilies).
type family struct {
	name   string
	schema string
	value  func(n int) string
	maxN   int // the search bound
}

// tree128 is a 129-node allOf tree: 16 branches of 7 leaves.
func tree128(leaf string) string {
	inner := `{"allOf":[` + repeatJoin(7, constant(leaf)) + `]}`
	return `{"allOf":[` + repeatJoin(16, constant(inner)) + `]}`
}

// num64 is a 64-character number literal, written and in the plain
// decimal notation jsonb stores.
var num64 = strings.Repeat("7", 32) + "." + strings.Repeat("7", 31)

// numMax is a MaxNumberLen-character literal, the longest the scan admits
// now; numTiny is the smallest float64, 343 characters in plain notation.
var (
	numMax  = strings.Repeat("7", MaxNumberLen/2) + "." + strings.Repeat("7", MaxNumberLen/2-1)
	numTiny = "-4.9406564584124654e-324"
)

func longName(i int, n int) string {
	s := fmt.Sprintf("p%03d", i)
	return s + strings.Repeat("x", n-len(s))
}

func distinctPatterns(n, reps int) map[string]string {
	out := map[string]string{}
	for i := range n {
		out[fmt.Sprintf("^%c.{%d}[a-z]+%d$", 'a'+i, reps, i)] = "{}"
	}
	return out
}

func jsonObj(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, strconv.Quote(k)+":"+v)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

var families = []family{
	{name: "V1-allOf128-valid", schema: `{"additionalProperties":` + tree128(`{"type":"string"}`) + `}`,
		value: func(n int) string { return obj(n, constant(`"x"`)) }, maxN: 16384},
	{name: "V2-allOf128-mismatch", schema: `{"additionalProperties":` + tree128(`{"type":"string"}`) + `}`,
		value: func(n int) string { return obj(n, constant(`1`)) }, maxN: 16384},
	{name: "V3-numeric-errors", schema: `{"additionalProperties":{"allOf":[` + repeatJoin(16, constant(`{"allOf":[`+repeatJoin(2, constant(`{"multipleOf":7,"maximum":0,"exclusiveMaximum":0,"minimum":100,"exclusiveMinimum":100}`))+`]}`)) + `]}}`,
		value: func(n int) string { return obj(n, constant(`1.5`)) }, maxN: 16384},
	{name: "V4-big-numbers", schema: `{"items":{"allOf":[` + repeatJoin(8, constant(`{"type":"number"}`)) + `]}}`,
		value: func(n int) string { return arr(n, constant(num64)) }, maxN: 16383},
	{name: "V5-const-root", schema: `{"allOf":[` + repeatJoin(16, func(i int) string { return fmt.Sprintf(`{"const":%d}`, i) }) + `]}`,
		value: func(n int) string { return obj(n, constant(`"abcdefgh"`)) }, maxN: 16383},
	{name: "V6-patternProperties", schema: `{"patternProperties":` + jsonObj(distinctPatterns(16, 240)) + `}`,
		value: func(n int) string { return obj(n, constant(`0`)) }, maxN: 16383},
	{name: "V7-patterns-one-string", schema: `{"allOf":[` + repeatJoin(16, func(i int) string { return fmt.Sprintf(`{"pattern":".{245}x%d"}`, i) }) + `]}`,
		value: func(n int) string { return `"` + strings.Repeat("a", n) + `"` }, maxN: 256 << 10},
	{name: "V8-uri-template", schema: `{"allOf":[` + repeatJoin(16, constant(`{"type":"string","format":"uri-template"}`)) + `]}`,
		value: func(n int) string { return `"` + strings.Repeat("{a}", n/3) + `"` }, maxN: 256 << 10},
	{name: "V9-required", schema: `{"items":{"allOf":[` + repeatJoin(16, func(int) string {
		return `{"required":[` + repeatJoin(32, func(i int) string { return strconv.Quote(longName(i, 64)) }) + `]}`
	}) + `]}}`,
		value: func(n int) string { return arr(n, constant(`{}`)) }, maxN: 16383},
	{name: "V10-uniqueItems-nested", schema: nestedUnique(8),
		value: func(n int) string { return nestedDupArrays(8, n) }, maxN: 64},
	{name: "V11-realistic", schema: realisticSchema,
		value: realisticValue, maxN: 3000},
	{name: "V12-long-paths", schema: nestedAP(15, `{"items":{"type":"string"}}`),
		value: func(n int) string {
			return nested(15, strings.Repeat("k", 256), arr(n, constant(`1`)))
		}, maxN: 16000},
	{name: "V13-enum16k", schema: `{"items":{"enum":[` + repeatJoin(250, func(i int) string { return strconv.Quote(longName(i, 60)) }) + `]}}`,
		value: func(n int) string { return arr(n, constant(`"miss"`)) }, maxN: 16383},
	{name: "V14-properties500", schema: `{"properties":{` + repeatJoin(500, func(i int) string { return fmt.Sprintf(`"p%d":{}`, i) }) + `}}`,
		value: func(n int) string { return obj(n, constant(`0`)) }, maxN: 16383},
	{name: "V15-allOf-chain16", schema: allOfChain(15, `{"items":{"type":"string"}}`),
		value: func(n int) string { return arr(n, constant(`1`)) }, maxN: 16383},
	{name: "V16-anyOf-discarded", schema: `{"items":{"anyOf":[` + repeatJoin(16, func(i int) string {
		return `{"anyOf":[` + repeatJoin(16, func(j int) string { return fmt.Sprintf(`{"required":["a%d_%d","b","c","d"]}`, i, j) }) + `]}`
	}) + `]}}`,
		value: func(n int) string { return arr(n, constant(`{}`)) }, maxN: 16383},
	{name: "V17-propertyNames-pattern", schema: `{"propertyNames":{"allOf":[` + repeatJoin(16, func(i int) string { return fmt.Sprintf(`{"pattern":"^.{200}y%d","maxLength":1}`, i) }) + `]}}`,
		value: func(n int) string {
			return "{" + repeatJoin(n, func(i int) string { return strconv.Quote(longName(i, 256)) + ":0" }) + "}"
		}, maxN: 1000},
	{name: "V18-dependencies", schema: `{"dependencies":{` + repeatJoin(100, func(i int) string { return fmt.Sprintf(`"k%d":{"additionalProperties":false}`, i) }) + `}}`,
		value: func(n int) string { return obj(n, constant(`0`)) }, maxN: 16383},
	{name: "V19-hostname", schema: `{"items":{"allOf":[` + repeatJoin(16, constant(`{"type":"string","format":"hostname"}`)) + `]}}`,
		value: func(n int) string { return `["` + strings.Repeat("a.", n/2) + `"]` }, maxN: 256 << 10},
	{name: "V20-multipleOf-big", schema: `{"items":{"allOf":[` + repeatJoin(16, constant(`{"multipleOf":0.`+strings.Repeat("0", 30)+strings.Repeat("3", 32)+`,"maximum":-1e62}`)) + `]}}`,
		value: func(n int) string { return arr(n, constant(num64)) }, maxN: 16383},
	{name: "V21-lengths-copies", schema: `{"allOf":[` + repeatJoin(16, func(i int) string { return []string{`{"minLength":300000}`, `{"maxLength":1}`}[i%2] }) + `]}`,
		value: func(n int) string { return `"` + strings.Repeat("é", n/2) + `"` }, maxN: 256 << 10},
	{name: "V22-contains", schema: `{"contains":` + tree128(`{"type":"string"}`) + `}`,
		value: func(n int) string { return arr(n, constant(`1`)) }, maxN: 16383},
	{name: "V23-enum-marshal", schema: `{"allOf":[` + repeatJoin(16, constant(`{"enum":[{"a":1},[1,2],"zz"]}`)) + `]}`,
		value: func(n int) string { return arr(n, constant(`{"a":[0.1,"<&>",true,null]}`)) }, maxN: 16383},
	// patternProperties patterns the library recompiles for every key,
	// costly to parse for what their program size does not show: Unicode
	// tables, a long alternation, a case-folded range
	{name: "V24-unicode-keys", schema: `{"patternProperties":{"^[\\p{L}\\p{N}]+$":{},"^\\pL\\pL\\pL\\pL":{}}}`,
		value: func(n int) string { return obj(n, constant(`0`)) }, maxN: 16383},
	{name: "V25-alternation-keys", schema: `{"patternProperties":{"^(` + strings.ReplaceAll(repeatJoin(60, func(i int) string { return fmt.Sprintf("a%d", i) }), ",", "|") + `)$":{}}}`,
		value: func(n int) string { return obj(n, constant(`0`)) }, maxN: 16383},
	{name: "V26-folded-range-keys", schema: `{"patternProperties":{"(?i)[\\x{42}-\\x{1e942}]":{}}}`,
		value: func(n int) string { return obj(n, constant(`0`)) }, maxN: 16383},
	// every float64 is admitted: the longest literals, and
	// numbers whose exact values have 300-digit denominators, compared,
	// divided and rendered in errors
	{name: "V27-longest-numbers", schema: `{"items":{"allOf":[` + repeatJoin(8, constant(`{"type":"number"}`)) + `]}}`,
		value: func(n int) string { return arr(n, constant(numMax)) }, maxN: 16383},
	{name: "V28-tiny-numbers", schema: `{"items":{"allOf":[` + repeatJoin(4, constant(`{"multipleOf":3e-300,"maximum":-1e-310,"exclusiveMinimum":1e-320}`)) + `]}}`,
		value: func(n int) string { return arr(n, constant(numTiny)) }, maxN: 16383},
}

func nestedUnique(depth int) string {
	s := `{"uniqueItems":true}`
	for range depth - 1 {
		s = `{"uniqueItems":true,"items":` + s + `}`
	}
	return s
}

// nestedDupArrays: depth levels of arrays, each holding width equal copies.
func nestedDupArrays(depth, width int) string {
	s := arr(width, constant(`"dup"`))
	for range depth - 1 {
		s = arr(2, constant(s))
	}
	return s
}

// largestAccepted finds the largest n whose value the estimator accepts
// (validation-scan and budget), by exponential then binary search.
func largestAccepted(tb testing.TB, f family, s *Schema) int {
	tb.Helper()
	ok := func(n int) bool {
		raw := []byte(f.value(n))
		v, err := decodeTree(raw, ValueLimits)
		if err != nil {
			return false
		}
		return !estimateCost(s.model, v, len(raw)).over
	}
	if !ok(1) {
		tb.Fatalf("%s: n=1 is already refused", f.name)
	}
	lo, hi := 1, 2
	for hi <= f.maxN && ok(hi) {
		lo, hi = hi, hi*2
	}
	hi = min(hi, f.maxN+1)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
