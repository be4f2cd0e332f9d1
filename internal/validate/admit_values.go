package validate

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

func checkType(v any, kp string) error {
	if name, ok := v.(string); ok {
		if !simpleTypes[name] {
			return fail(kp, "unknown type %q", name)
		}
		return nil
	}
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return fail(kp, "must be a type name or a non-empty array of type names")
	}
	seen := map[string]bool{}
	for i, t := range arr {
		name, _ := t.(string)
		if !simpleTypes[name] {
			return fail(kp+"/"+strconv.Itoa(i), "must be one of array, boolean, integer, null, number, object, string")
		}
		if seen[name] {
			return fail(kp+"/"+strconv.Itoa(i), "type %q is listed twice", name)
		}
		seen[name] = true
	}
	return nil
}

func stringSet(v any, kp string) error {
	arr, ok := v.([]any)
	if !ok {
		return fail(kp, "must be an array of strings")
	}
	if len(arr) > MaxNames {
		return fail(kp, "has %d names, more than the limit of %d", len(arr), MaxNames)
	}
	seen := make(map[string]bool, len(arr))
	for i, e := range arr {
		str, ok := e.(string)
		if !ok {
			return fail(kp+"/"+strconv.Itoa(i), "must be a string")
		}
		if seen[str] {
			return fail(kp+"/"+strconv.Itoa(i), "%q is listed twice", str)
		}
		seen[str] = true
	}
	return nil
}

func literalSize(v any, kp string) error {
	if n := jsonSize(v); n > MaxLiteralBytes {
		return fail(kp, "value is %d bytes as compact JSON, more than the limit of %d", n, MaxLiteralBytes)
	}
	return nil
}

// checkEnum: a bounded, non-empty array of distinct values (in 2019-09
// and 2020-12, whose meta-schemas allow a value twice, of values).
// Two numbers that differ only beyond float64 precision are refused too:
// the library compares enum values as float64, so it could not tell them
// apart.
func checkEnum(v any, kp string, modern bool) error {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return fail(kp, "must be a non-empty array")
	}
	if len(arr) > MaxEnumEntries {
		return fail(kp, "has %d values, more than the limit of %d", len(arr), MaxEnumEntries)
	}
	if len(arr) > MaxMixedEnums && setEnum(v) == nil {
		return fail(kp, "has %d values, more than the limit of %d for an enum with a value that is not a string", len(arr), MaxMixedEnums)
	}
	if err := literalSize(v, kp); err != nil {
		return err
	}
	exact := make(map[string]int, len(arr))
	approx := make(map[string]int, len(arr))
	for i, e := range arr {
		ek, fk := canonical(e, true), canonical(e, false)
		if j, dup := exact[ek]; dup {
			if modern {
				continue // allowed there; the library is given each value once (prepare)
			}
			return fail(kp+"/"+strconv.Itoa(i), "duplicates enum value %d (the meta-schemas of Draft-04 to Draft-07 require distinct values)", j)
		}
		if j, dup := approx[fk]; dup {
			return fail(kp+"/"+strconv.Itoa(i), "differs from enum value %d only beyond 64-bit float precision, which the validator cannot distinguish", j)
		}
		exact[ek], approx[fk] = i, i
	}
	return nil
}

// countValue reads a count keyword (minLength, maxItems, ...): an integral
// number ≥ 0, possibly written 2.0 or 1e2. Values beyond maxCount are
// clamped: no value is that large.
func countValue(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	ni, err := parseNumber(string(n))
	if err != nil || !ni.isInt() || (ni.neg && !ni.isZero()) {
		return 0, false
	}
	if ni.isZero() {
		return 0, true
	}
	if len(ni.digits)+ni.exp > 10 {
		return maxCount, true
	}
	c, err := strconv.ParseInt(ni.digits+strings.Repeat("0", ni.exp), 10, 64)
	if err != nil || c > maxCount {
		return maxCount, true
	}
	return int(c), true
}

// countOrder rejects min > max for the two keyword pairs gojsonschema
// refuses to compile (the schema could never match a string/object).
func countOrder(obj map[string]any, ptr, lo, hi string) error {
	l, okl := obj[lo]
	h, okh := obj[hi]
	if !okl || !okh {
		return nil
	}
	a, _ := countValue(l)
	b, _ := countValue(h)
	if a > b {
		return fail(ptr+"/"+lo, "%s is greater than %s, which the validator does not support", lo, hi)
	}
	return nil
}

// canonical renders a JSON value with sorted keys. Numbers are rendered
// as their exact decimal value (exact) or as the float64 the library
// compares (!exact).
func canonical(v any, exact bool) string {
	var b strings.Builder
	writeCanonical(&b, v, exact)
	return b.String()
}

func writeCanonical(b *strings.Builder, v any, exact bool) {
	switch t := v.(type) {
	case map[string]any:
		b.WriteByte('{')
		for i, k := range sortedKeys(t) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(k))
			b.WriteByte(':')
			writeCanonical(b, t[k], exact)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, e, exact)
		}
		b.WriteByte(']')
	case json.Number:
		ni, err := parseNumber(string(t))
		switch {
		case err != nil:
			b.WriteString(string(t))
		case ni.isZero():
			b.WriteByte('0')
		case exact:
			if ni.neg {
				b.WriteByte('-')
			}
			b.WriteString(ni.digits)
			b.WriteByte('e')
			b.WriteString(strconv.Itoa(ni.exp))
		default:
			b.WriteString(strconv.FormatFloat(ni.f, 'g', -1, 64))
		}
	case string:
		b.WriteString(strconv.Quote(t))
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case nil:
		b.WriteString("null")
	}
}

// jsonSize is an upper bound of the compact encoding of v by encoding/json.
func jsonSize(v any) int {
	switch t := v.(type) {
	case map[string]any:
		n := 2 + max(len(t)-1, 0)
		for k, e := range t {
			n += stringSize(k) + 1 + jsonSize(e)
		}
		return n
	case []any:
		n := 2 + max(len(t)-1, 0)
		for _, e := range t {
			n += jsonSize(e)
		}
		return n
	case json.Number:
		return max(len(t), maxFloatTextLen)
	case string:
		return stringSize(t)
	case bool:
		return 5
	}
	return 4
}

func stringSize(s string) int {
	n := 2
	for _, r := range s {
		n += encodedRuneSize(r)
	}
	return n
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func jsonTypeOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "null"
}

func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
