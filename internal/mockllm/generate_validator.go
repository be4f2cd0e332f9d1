package mockllm

import (
	"encoding/json"
	"maps"
	"math/big"
	"net"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// valid is a compact Draft-07 validator, used to choose among generated
// candidates. It is deliberately permissive where it cannot decide: unknown
// keywords and formats pass, and so do patterns Go cannot compile.
func (g *generator) valid(s, v any, depth int) bool {
	if g.tick(depth) != nil {
		g.gaveUp = true
		return false
	}
	s, err := g.deref(s)
	if err != nil {
		return false
	}
	switch s := s.(type) {
	case bool:
		return s
	case map[string]any:
		return g.validType(s, v) &&
			validEnum(s, v) &&
			validNumber(s, v) &&
			g.validString(s, v) &&
			g.validArray(s, v, depth) &&
			g.validObject(s, v, depth) &&
			g.validCombinators(s, v, depth)
	}
	return false
}

// rejects reports whether s certainly rejects v: a check cut short by the
// limits does not count as a rejection.
func (g *generator) rejects(s, v any, depth int) bool {
	g.gaveUp = false
	return !g.valid(s, v, depth) && !g.gaveUp
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if r, ok := ratOf(v); ok && r.IsInt() {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return ""
}

func (g *generator) validType(s map[string]any, v any) bool {
	t, ok := s["type"]
	if !ok {
		return true
	}
	have := jsonType(v)
	for _, want := range typeList(t) {
		if want == have || want == "number" && have == "integer" {
			return true
		}
	}
	return false
}

func validEnum(s map[string]any, v any) bool {
	if c, ok := s["const"]; ok && !jsonEqual(c, v) {
		return false
	}
	if e, ok := s["enum"].([]any); ok {
		return slices.ContainsFunc(e, func(x any) bool { return jsonEqual(x, v) })
	}
	return true
}

func validNumber(s map[string]any, v any) bool {
	n, ok := v.(json.Number)
	if !ok {
		return true
	}
	r, ok := ratOf(n)
	if !ok {
		return false
	}
	for _, kw := range []string{"multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if x, isNum := s[kw].(json.Number); isNum {
			if _, ok := ratOf(x); !ok {
				return false // a bound we cannot read exactly is one we cannot honour
			}
		}
	}
	if m, ok := ratOf(s["multipleOf"]); ok && m.Sign() > 0 && !new(big.Rat).Quo(r, m).IsInt() {
		return false
	}
	return bounds(s).contains(r)
}

func (g *generator) validString(s map[string]any, v any) bool {
	str, ok := v.(string)
	if !ok {
		return true
	}
	n := utf8.RuneCountInString(str)
	if n < minCount(s, "minLength") {
		return false
	}
	if maxL := maxCount(s, "maxLength"); maxL >= 0 && n > maxL {
		return false
	}
	if p, ok := s["pattern"].(string); ok {
		if re := g.pattern(p); re != nil && !re.MatchString(str) {
			return false
		}
	}
	f, _ := s["format"].(string)
	return validFormat(f, str)
}

func (g *generator) validArray(s map[string]any, v any, depth int) bool {
	arr, ok := v.([]any)
	if !ok {
		return true
	}
	if len(arr) < minCount(s, "minItems") {
		return false
	}
	if maxI := maxCount(s, "maxItems"); maxI >= 0 && len(arr) > maxI {
		return false
	}
	switch items := s["items"].(type) {
	case nil:
	case []any:
		for i, x := range arr {
			sub, ok := s["additionalItems"]
			if i < len(items) {
				sub, ok = items[i], true
			}
			if ok && !g.valid(sub, x, depth+1) {
				return false
			}
		}
	default:
		for _, x := range arr {
			if !g.valid(items, x, depth+1) {
				return false
			}
		}
	}
	if s["uniqueItems"] == true {
		for i := range arr {
			if g.steps += len(arr); g.steps > maxSteps {
				g.gaveUp = true
				return false
			}
			for j := i + 1; j < len(arr); j++ {
				if jsonEqual(arr[i], arr[j]) {
					return false
				}
			}
		}
	}
	if c, ok := s["contains"]; ok {
		return slices.ContainsFunc(arr, func(x any) bool { return g.valid(c, x, depth+1) })
	}
	return true
}

func (g *generator) validObject(s map[string]any, v any, depth int) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return true
	}
	if len(obj) < minCount(s, "minProperties") {
		return false
	}
	if maxP := maxCount(s, "maxProperties"); maxP >= 0 && len(obj) > maxP {
		return false
	}
	for _, k := range stringList(s["required"]) {
		if !hasKey(obj, k) {
			return false
		}
	}
	props, _ := s["properties"].(map[string]any)
	pp, _ := s["patternProperties"].(map[string]any)
	names, hasNames := s["propertyNames"]
	deps, _ := s["dependencies"].(map[string]any)
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		x := obj[k]
		if hasNames && !g.valid(names, k, depth+1) {
			return false
		}
		matched := false
		if sub, ok := props[k]; ok {
			matched = true
			if !g.valid(sub, x, depth+1) {
				return false
			}
		}
		for p, sub := range pp {
			if re := g.pattern(p); re != nil && re.MatchString(k) {
				matched = true
				if !g.valid(sub, x, depth+1) {
					return false
				}
			}
		}
		if ap, ok := s["additionalProperties"]; ok && !matched && !g.valid(ap, x, depth+1) {
			return false
		}
		switch d := deps[k].(type) {
		case nil:
		case []any:
			for _, r := range stringList(d) {
				if !hasKey(obj, r) {
					return false
				}
			}
		default:
			if !g.valid(d, obj, depth+1) {
				return false
			}
		}
	}
	return true
}

func (g *generator) validCombinators(s map[string]any, v any, depth int) bool {
	if all, ok := s["allOf"].([]any); ok {
		for _, sub := range all {
			if !g.valid(sub, v, depth+1) {
				return false
			}
		}
	}
	if anyOf, ok := s["anyOf"].([]any); ok && !slices.ContainsFunc(anyOf, func(sub any) bool { return g.valid(sub, v, depth+1) }) {
		return false
	}
	if oneOf, ok := s["oneOf"].([]any); ok {
		n := 0
		for _, sub := range oneOf {
			if g.valid(sub, v, depth+1) {
				n++
			}
		}
		if n != 1 {
			return false
		}
	}
	if not, ok := s["not"]; ok && g.valid(not, v, depth+1) {
		return false
	}
	if cond, ok := s["if"]; ok {
		branch, ok := s["else"]
		if g.valid(cond, v, depth+1) {
			branch, ok = s["then"]
		}
		if ok && !g.valid(branch, v, depth+1) {
			return false
		}
	}
	return true
}

// jsonEqual compares decoded JSON values, numbers by value (1 == 1.0).
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		x, ok1 := ratOf(a)
		y, ok2 := ratOf(b)
		if !ok1 || !ok2 {
			return a == b
		}
		return x.Cmp(y) == 0
	case []any:
		b, ok := b.([]any)
		return ok && slices.EqualFunc(a, b, jsonEqual)
	case map[string]any:
		b, ok := b.(map[string]any)
		return ok && maps.EqualFunc(a, b, jsonEqual)
	case nil, bool, string:
		return a == b
	}
	return false
}

// Format checks mirror the common Go validators (gojsonschema) so that a
// value we pick passes there too. Unknown formats are not checked.
var (
	rxHostname       = regexp.MustCompile(`^([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])(\.([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9\-]{0,61}[a-zA-Z0-9]))*$`)
	rxUUID           = regexp.MustCompile(`^[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$`)
	rxJSONPointer    = regexp.MustCompile(`^(?:/(?:[^~/]|~0|~1)*)*$`)
	rxRelJSONPointer = regexp.MustCompile(`^(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~0|~1)*)*)$`)
	rxURITemplate    = regexp.MustCompile(`^([^{]*({[^}]*})?)*$`)
)

func validFormat(format, s string) bool {
	parses := func(layout string) bool { _, err := time.Parse(layout, s); return err == nil }
	switch format {
	case "email", "idn-email":
		_, err := mail.ParseAddress(s)
		return err == nil
	case "date":
		return parses(time.DateOnly)
	case "date-time":
		return parses(time.RFC3339)
	case "time":
		return parses("15:04:05Z07:00") || parses(time.TimeOnly)
	case "uri", "iri":
		u, err := url.Parse(s)
		return err == nil && u.Scheme != "" && !strings.Contains(s, `\`)
	case "uri-reference", "iri-reference":
		_, err := url.Parse(s)
		return err == nil && !strings.Contains(s, `\`)
	case "uri-template":
		u, err := url.Parse(s)
		return err == nil && !strings.Contains(s, `\`) && rxURITemplate.MatchString(u.Path)
	case "uuid":
		return rxUUID.MatchString(s)
	case "ipv4":
		return net.ParseIP(s) != nil && strings.Contains(s, ".")
	case "ipv6":
		return net.ParseIP(s) != nil && strings.Contains(s, ":")
	case "hostname", "idn-hostname":
		return len(s) < 256 && rxHostname.MatchString(s)
	case "json-pointer":
		return rxJSONPointer.MatchString(s)
	case "relative-json-pointer":
		return rxRelJSONPointer.MatchString(s)
	case "regex":
		_, err := regexp.Compile(s)
		return err == nil
	}
	return true
}
