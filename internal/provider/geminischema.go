package provider

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Gemini takes a function's parameters either in its OpenAPI subset
// (parameters), into which fantasy v0.41.2 converts a tool's schema keeping
// only type, description, properties, items and the root's required, or
// as JSON Schema (parametersJsonSchema), which keeps the schema as written.
// chatd sends parametersJsonSchema (the transport replaces fantasy's
// parameters), in the form geminiSchema gives it. The Gemini API reference
// (GenerationConfig.responseJsonSchema, whose list parametersJsonSchema
// shares) documents what the API carries and two hard rules: beside a
// $ref only keywords starting with "$" may be set (its error message adds
// description and default), and cyclic references are unrolled only
// within properties that are not required. Keywords outside its list are
// accepted and not enforced; chatd validates every value against the
// caller's schema itself.

// errRefBesideCombinator: a $ref beside anyOf or oneOf has no equivalent
// Gemini carries (the $ref would have to join the combinator).
var errRefBesideCombinator = errors.New("a $ref beside anyOf or oneOf in the same schema object")

// geminiSchema returns the schema as chatd sends it to Gemini, a copy of s
// changed only in form:
//
//   - every local reference is "#/$defs/NAME", NAME defined at the root: a
//     reference to a definition of the root's $defs keeps it, any other
//     target (a nested definition, a property, the root) becomes a root
//     definition named after its last pointer segment;
//   - definition containers ($defs, definitions) below the root are
//     removed, the root's definitions moved into $defs;
//   - a $ref with sibling keywords becomes {"anyOf":[{"$ref":R}], siblings}
//     (a one-branch anyOf means the same), and so does a one-branch allOf
//     beside no anyOf (Gemini's list has no allOf);
//   - the root's $schema is dropped.
//
// It fails on a reference it cannot resolve and on a $ref beside anyOf or
// oneOf, naming the schema object (a JSON Pointer).
func geminiSchema(s map[string]any) (map[string]any, error) {
	root := deepCopy(s).(map[string]any)
	delete(root, "$schema")
	defs, names, err := hoistDefinitions(root)
	if err != nil {
		return nil, err
	}
	delete(root, "definitions")
	delete(root, "$defs")
	strip := func(m map[string]any, at string) error {
		if at != "" {
			delete(m, "$defs")
			delete(m, "definitions")
		}
		return nil
	}
	_ = walkSchema(root, "", strip)
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		_ = walkSchema(defs[name], "/$defs/"+escapeToken(name), strip)
	}
	if len(defs) > 0 {
		root["$defs"] = defs
	}
	if err := walkSchema(root, "", func(m map[string]any, at string) error { return refAlone(m, at, names) }); err != nil {
		return nil, err
	}
	return root, nil
}

// hoistDefinitions returns the root definitions of Gemini's form: the
// root's ($defs winning a clash with definitions) and one per other
// reference target; and the name each reference gets.
func hoistDefinitions(root map[string]any) (defs map[string]any, names map[string]string, err error) {
	targets := map[string]bool{}
	_ = walkSchema(root, "", func(m map[string]any, _ string) error {
		if ref, ok := m["$ref"].(string); ok && strings.HasPrefix(ref, "#") {
			targets[ref] = true
		}
		return nil
	})
	defs, names = map[string]any{}, map[string]string{}
	origin := map[string]string{} // root definition → its container
	for _, c := range []string{"definitions", "$defs"} {
		if d, ok := root[c].(map[string]any); ok {
			for k, v := range d {
				defs[k], origin[k] = v, c
			}
		}
	}
	for _, ref := range slices.Sorted(maps.Keys(targets)) {
		toks, ok := refTokens(ref)
		if !ok {
			return nil, nil, fmt.Errorf("the $ref %q is not a JSON Pointer into the schema", ref)
		}
		if len(toks) == 2 && origin[toks[1]] == toks[0] {
			names[ref] = toks[1]
			continue
		}
		target, ok := resolvePointer(root, toks)
		if !ok {
			return nil, nil, fmt.Errorf("the $ref %q does not resolve", ref)
		}
		if m, isMap := target.(map[string]any); isMap && len(toks) == 0 {
			target = withoutDefs(m) // the root, as a definition of itself
		}
		name := defName(toks, defs)
		defs[name], names[ref] = target, name
	}
	return defs, names, nil
}

// refAlone renames m's reference and leaves it alone in its object: its
// siblings stay, the reference moves into a one-branch anyOf (as does a
// one-branch allOf, which Gemini's list lacks).
func refAlone(m map[string]any, at string, names map[string]string) error {
	if ref, ok := m["$ref"].(string); ok {
		if name, ok := names[ref]; ok {
			ref = "#/$defs/" + escapeToken(name)
			m["$ref"] = ref
		}
		if len(m) > 1 {
			if m["anyOf"] != nil || m["oneOf"] != nil {
				return fmt.Errorf("%w (at %q)", errRefBesideCombinator, cmp.Or(at, "/"))
			}
			delete(m, "$ref")
			m["anyOf"] = []any{map[string]any{"$ref": ref}}
		}
	}
	if all, ok := m["allOf"].([]any); ok && len(all) == 1 && m["anyOf"] == nil {
		delete(m, "allOf")
		m["anyOf"] = all
	}
	return nil
}

// requiredCycle finds, in a schema in geminiSchema's form, a reference
// cycle whose every property step is a required property: Gemini unrolls
// recursion only within optional properties. It returns the cycle's
// references ("" when there is none).
func requiredCycle(root map[string]any) string {
	defs, _ := root["$defs"].(map[string]any)
	edges := map[string][]string{} // "#" or a definition → referenced with only required steps
	var walk func(from string, node any, required bool)
	walk = func(from string, node any, required bool) {
		switch n := node.(type) {
		case map[string]any:
			if ref, ok := n["$ref"].(string); ok && required {
				edges[from] = append(edges[from], ref)
			}
			req := stringSet(n["required"])
			for k, v := range n {
				switch {
				case k == "$defs" || dataKeywords[k]:
				case k == "properties":
					props, _ := v.(map[string]any)
					for _, p := range slices.Sorted(maps.Keys(props)) {
						walk(from, props[p], required && req[p])
					}
				case k == "additionalProperties" || k == "patternProperties" || k == "propertyNames" || k == "unevaluatedProperties":
					walk(from, v, false) // no property of these is required
				default:
					walk(from, v, required)
				}
			}
		case []any:
			for _, v := range n {
				walk(from, v, required)
			}
		}
	}
	walk("#", root, true)
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		walk("#/$defs/"+escapeToken(name), defs[name], true)
	}
	state := map[string]int{} // 1: on the path, 2: done
	var path []string
	var visit func(n string) string
	visit = func(n string) string {
		state[n] = 1
		path = append(path, n)
		for _, m := range edges[n] {
			switch state[m] {
			case 1:
				i := slices.Index(path, m)
				return strings.Join(append(slices.Clone(path[i:]), m), " → ")
			case 0:
				if c := visit(m); c != "" {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[n] = 2
		return ""
	}
	for _, n := range append([]string{"#"}, slices.Sorted(maps.Keys(edges))...) {
		if state[n] == 0 {
			if c := visit(n); c != "" {
				return c
			}
		}
	}
	return ""
}

// dataKeywords hold instances, not schemas: nothing below them is a $ref.
var dataKeywords = map[string]bool{"enum": true, "const": true, "default": true, "examples": true}

// walkSchema calls f on every JSON object of node, once each (objects
// shared by several parents included), with its JSON Pointer; it stops at
// f's first error.
func walkSchema(node any, at string, f func(m map[string]any, at string) error) error {
	seen := map[uintptr]bool{}
	var walk func(node any, at string) error
	walk = func(node any, at string) error {
		switch n := node.(type) {
		case map[string]any:
			p := reflect.ValueOf(n).Pointer()
			if seen[p] {
				return nil
			}
			seen[p] = true
			if err := f(n, at); err != nil {
				return err
			}
			for _, k := range slices.Sorted(maps.Keys(n)) {
				if dataKeywords[k] {
					continue
				}
				if err := walk(n[k], at+"/"+escapeToken(k)); err != nil {
					return err
				}
			}
		case []any:
			for i, v := range n {
				if err := walk(v, at+"/"+strconv.Itoa(i)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(node, at)
}

// refTokens reads a local reference ("#/a/b", percent-encoded as a URI
// fragment) into JSON Pointer tokens.
func refTokens(ref string) ([]string, bool) {
	u, err := url.Parse(ref)
	if err != nil || u.Fragment != "" && u.Fragment[0] != '/' {
		return nil, false
	}
	if u.Fragment == "" {
		return nil, true
	}
	toks := strings.Split(u.Fragment[1:], "/")
	for i, t := range toks {
		toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
	}
	return toks, true
}

func resolvePointer(node any, toks []string) (any, bool) {
	for _, t := range toks {
		switch n := node.(type) {
		case map[string]any:
			v, ok := n[t]
			if !ok {
				return nil, false
			}
			node = v
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(n) {
				return nil, false
			}
			node = n[i]
		default:
			return nil, false
		}
	}
	return node, true
}

var nameUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// defName names a new root definition after the target's last pointer
// segment, unique among defs.
func defName(toks []string, defs map[string]any) string {
	base := "root"
	if len(toks) > 0 {
		base = nameUnsafe.ReplaceAllString(toks[len(toks)-1], "_")
	}
	if base == "" || base == "_" {
		base = "ref"
	}
	name := base
	for n := 2; ; n++ {
		if _, taken := defs[name]; !taken {
			return name
		}
		name = base + "_" + strconv.Itoa(n)
	}
}

func escapeToken(t string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(t)
}

func withoutDefs(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != "$defs" && k != "definitions" {
			out[k] = v
		}
	}
	return out
}

func deepCopy(v any) any {
	switch n := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(n))
		for k, x := range n {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(n))
		for i, x := range n {
			out[i] = deepCopy(x)
		}
		return out
	case []string:
		return slices.Clone(n)
	}
	return v
}

func stringSet(v any) map[string]bool {
	out := map[string]bool{}
	switch l := v.(type) {
	case []any:
		for _, x := range l {
			if s, ok := x.(string); ok {
				out[s] = true
			}
		}
	case []string:
		for _, s := range l {
			out[s] = true
		}
	}
	return out
}
