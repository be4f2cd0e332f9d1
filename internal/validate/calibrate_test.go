package validate

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// measureLib runs the library alone on a decoded value: median time and
// bytes allocated per validation over reps runs.
func measureLib(s *Schema, v *vnode, reps int) (float64, float64) {
	run := func() { _, _ = s.compiled.Validate(docLoader{v.val}) }
	return measure(run, reps)
}

// measure returns the median CPU time (process-wide, see processCPU) and
// the mean bytes allocated per run. CPU time, not wall time: the shared
// machine's load would otherwise inflate every figure. Short runs are
// batched so that each measurement spans at least 5 ms.
func measure(run func(), reps int) (float64, float64) {
	run() // warm up (templates, pools)
	batch := 1
	for t0 := time.Now(); time.Since(t0) < 5*time.Millisecond; batch++ {
		run()
	}
	times := make([]float64, reps)
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	for i := range times {
		c0, t0 := processCPU(), time.Now()
		for range batch {
			run()
		}
		times[i] = float64((processCPU() - c0).Nanoseconds())
		if times[i] == 0 { // no rusage on this platform
			times[i] = float64(time.Since(t0).Nanoseconds())
		}
		times[i] /= float64(batch)
	}
	runtime.ReadMemStats(&ms1)
	sort.Float64s(times)
	return times[len(times)/2], float64(ms1.TotalAlloc-ms0.TotalAlloc) / float64(reps*batch)
}

// TestCalibrate prints, for every adversarial family at the largest value
// the budget accepts and at a quarter of it, the estimator's prediction
// next to the library's actual median time and allocation. Run it on the
// target machine with CHATD_CALIBRATE=1 to check or refit the
// coefficients in cost.go; the ratios actual/predicted must stay below 1
// (bytes) and well below 1 (time).
func TestCalibrate(t *testing.T) {
	if os.Getenv("CHATD_CALIBRATE") == "" {
		t.Skip("set CHATD_CALIBRATE=1")
	}
	only := os.Getenv("CHATD_CALIBRATE_ONLY")
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-28s %8s %10s %10s %10s %10s %6s %6s %8s\n", "family", "n", "pred ms", "act ms", "pred MiB", "act MiB", "t ratio", "b ratio", "evals")
	for _, f := range families {
		if only != "" && !strings.Contains(f.name, only) {
			continue
		}
		s := mustCompile(t, f.schema)
		nmax := largestAccepted(t, f, s)
		for _, n := range []int{max(1, nmax/4), nmax} {
			raw := []byte(f.value(n))
			v, err := decodeTree(raw, ValueLimits)
			if err != nil {
				t.Fatal(err)
			}
			e := estimateCost(s.model, v, len(raw))
			ns, bytes := measureLib(s, v, 5)
			fmt.Fprintf(&b, "%-28s %8d %10.2f %10.2f %10.2f %10.2f %6.2f %6.2f %8d\n", f.name, n, e.ns/1e6, ns/1e6, e.bytes/(1<<20), bytes/(1<<20), ns/e.ns, bytes/e.bytes, e.evals)
		}
	}
	t.Log(b.String())
}

func TestCalibrateNumeric(t *testing.T) {
	if os.Getenv("CHATD_CALIBRATE") == "" {
		t.Skip("set CHATD_CALIBRATE=1")
	}
	xs := []string{"5", "12.34", "-0.000001", strings.Repeat("9", 64), num64, "0." + strings.Repeat("0", 30) + strings.Repeat("7", 32), "1e63", "1e-62",
		numMax, numTiny, "1.5e300", "1e-320", "-1.7976931348623157e308"}
	ms := []string{"7", "0.01", "1e-20", "1e-50", "0." + strings.Repeat("0", 30) + strings.Repeat("3", 32), strings.Repeat("3", 32) + "e31", strings.Repeat("3", 64), "1e-62", "1e63",
		"3e-300", "1e-310", "1e-320", "1.7976931348623157e308", "1e300", numMax}
	var b strings.Builder
	for _, kw := range []string{"multipleOf", "maximum", "minimum"} {
		for _, m := range ms {
			s := mustCompile(t, fmt.Sprintf(`{"items":{%q:%s}}`, kw, m))
			for _, x := range xs {
				v, _ := decodeTree([]byte(arr(20, constant(x))), ValueLimits)
				ns, bytes := measureLib(s, v, 5)
				res := s.Validate([]byte(arr(1, constant(x))))
				e := estimateCost(s.model, v, int(v.size))
				fmt.Fprintf(&b, "%-10s m=%-12.12s x=%-12.12s fail=%-5v %8.1f us %8.0f B  pred %8.1f us %8.0f B  ratio %4.2f %4.2f\n", kw, m, x, !res.Valid(), ns/20/1e3, bytes/20, e.ns/20/1e3, e.bytes/20, ns/e.ns, bytes/e.bytes)
			}
		}
	}
	t.Log("\n" + b.String())
}

// TestCalibrateErrors measures the library's cost per error of each type
// (one error per array item, 400 items, minus a passing baseline), next
// to the estimator's charge for the same array.
func TestCalibrateErrors(t *testing.T) {
	if os.Getenv("CHATD_CALIBRATE") == "" {
		t.Skip("set CHATD_CALIBRATE=1")
	}
	const n = 400
	cases := []struct{ name, item, pass, fail string }{
		{"false", `false`, ``, `1`},
		{"type", `{"type":"string"}`, `"a"`, `1`},
		{"required", `{"required":["abc"]}`, `{"abc":1}`, `{}`},
		{"minProperties", `{"minProperties":1}`, `{"a":1}`, `{}`},
		{"additional", `{"additionalProperties":false}`, `{}`, `{"a":1}`},
		{"enum5", `{"enum":[1,"a",{"a":[1,2]},null,2.5]}`, `1`, `"b"`},
		{"const", `{"const":"abc"}`, `"abc"`, `"b"`},
		{"minLength", `{"minLength":2}`, `"ab"`, `"a"`},
		{"pattern", `{"pattern":"^a+$"}`, `"a"`, `"b"`},
		{"format-email", `{"type":"string","format":"email"}`, `"a@b.c"`, `"b"`},
		{"format-untyped", `{"format":"email"}`, `"a@b.c"`, `"b"`},
		{"minItems", `{"minItems":1}`, `[1]`, `[]`},
		{"unique", `{"uniqueItems":true}`, `[1,2]`, `[1,1]`},
		{"contains", `{"contains":{"type":"string"}}`, `["a"]`, `[1]`},
		{"maximum", `{"maximum":1}`, `1`, `2`},
		{"multipleOf", `{"multipleOf":2}`, `2`, `3`},
		{"not", `{"not":{}}`, ``, `1`},
		{"anyOf", `{"anyOf":[{"type":"string"},{"type":"null"}]}`, `"a"`, `1`},
		{"oneOf", `{"oneOf":[{"type":"string"},{"type":"null"}]}`, `"a"`, `1`},
		{"allOf", `{"allOf":[{"type":"string"}]}`, `"a"`, `1`},
		{"ifthen", `{"if":{"type":"integer"},"then":{"minimum":5}}`, `6`, `1`},
		{"dependency", `{"dependencies":{"a":["b"]}}`, `{"a":1,"b":1}`, `{"a":1}`},
		{"propertyNames", `{"propertyNames":{"maxLength":1}}`, `{"a":1}`, `{"ab":1}`},
	}
	var b strings.Builder
	for _, c := range cases {
		s := mustCompile(t, `{"items":`+c.item+`}`)
		pass := c.pass
		if pass == "" {
			pass = "null"
			if c.item == "false" || c.name == "not" {
				pass = ""
			}
		}
		var pns, pb, ppred, ppredB float64
		if pass != "" {
			v, _ := decodeTree([]byte(arr(n, constant(pass))), ValueLimits)
			pns, pb = measureLib(s, v, 5)
			e := estimateCost(s.model, v, int(v.size))
			ppred, ppredB = e.ns, e.bytes
		}
		v, _ := decodeTree([]byte(arr(n, constant(c.fail))), ValueLimits)
		fns, fb := measureLib(s, v, 5)
		e := estimateCost(s.model, v, int(v.size))
		fmt.Fprintf(&b, "%-15s per error: %6.2f us %6.0f B   estimator: %6.2f us %6.0f B\n", c.name,
			(fns-pns)/n/1e3, (fb-pb)/n, (e.ns-ppred)/n/1e3, (e.bytes-ppredB)/n)
	}
	t.Log("\n" + b.String())
}

// TestCalibrateFormats measures each format checker over several input
// shapes: the marginal cost per byte (between 4 KiB and 64 KiB inputs) and
// the cost of a 256-byte input, next to the estimator's charges.
func TestCalibrateFormats(t *testing.T) {
	if os.Getenv("CHATD_CALIBRATE") == "" {
		t.Skip("set CHATD_CALIBRATE=1")
	}
	shapes := map[string]string{
		"alnum": "a1", "dots": "a.", "braces": "{a}", "pct": "%2", "at": "a@", "colon": "1:", "digits": "12",
		"dash": "a-", "slash": "/a", "tilde": "~0", "mixed": "a.b-c/d:e@f{g}h%20", "space": "a ", "quote": `a"`,
		"ipv6": "ab:", "time": "12:34:56", "brackets": "[a]", "comment": "(a)", "utf8": "é",
	}
	cost := func(s *Schema, unit string, l int) (float64, float64, float64, float64) {
		raw := []byte(strconv.Quote(strings.Repeat(unit, l/len(unit))))
		v, err := decodeTree(raw, ValueLimits)
		if err != nil {
			t.Fatal(err)
		}
		ns, b := measureLib(s, v, 3)
		e := estimateCost(s.model, v, len(raw))
		return ns, b, e.ns, e.bytes
	}
	var b strings.Builder
	for _, f := range Formats {
		s := mustCompile(t, `{"type":"string","format":"`+f+`"}`)
		var worstNs, worstB, worstFix, predNs, predB, predFix float64
		for _, unit := range shapes {
			ns4, b4, p4, pb4 := cost(s, unit, 4096)
			ns64, b64, p64, pb64 := cost(s, unit, 65536)
			ns256, _, p256, _ := cost(s, unit, 256)
			const d = 65536 - 4096
			worstNs, worstB = max(worstNs, (ns64-ns4)/d), max(worstB, (b64-b4)/d)
			predNs, predB = (p64-p4)/d, (pb64-pb4)/d
			worstFix, predFix = max(worstFix, ns256), p256
		}
		fmt.Fprintf(&b, "%-22s %7.1f ns/B %6.2f B/B  256 B input %6.1f us   estimator %7.1f ns/B %6.2f B/B %6.1f us\n",
			f, worstNs, worstB, worstFix/1e3, predNs, predB, predFix/1e3)
	}
	t.Log("\n" + b.String())
}
