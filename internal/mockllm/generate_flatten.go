package mockllm

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Flattening a schema for generation: following $ref (deref) and turning
// allOf / anyOf / oneOf / if-then-else into plain schemas to build
// candidates from (variants, merge).

// deref follows "$ref" (local JSON pointers only). Keywords beside "$ref"
// apply too, as in 2020-12 (chatd refuses assertions beside a Draft-07
// "$ref", whose siblings would be ignored, so the two readings agree on
// every schema it admits): the result is then {"allOf": [target, rest]}.
func (g *generator) deref(s any) (any, error) {
	for hops := 0; ; hops++ {
		m, ok := s.(map[string]any)
		if !ok {
			return s, nil
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return s, nil
		}
		if hops == maxDepth {
			return nil, fmt.Errorf("mockllm: $ref cycle at %q", ref)
		}
		target, err := resolvePointer(g.root, ref)
		if err != nil {
			return nil, err
		}
		if rest := refSiblings(m); rest != nil {
			return map[string]any{"allOf": []any{target, rest}}, nil
		}
		s = target
	}
}

// refSiblings returns the assertions beside a "$ref" (nil if there are
// none): everything but the reference, definitions and annotations.
func refSiblings(m map[string]any) map[string]any {
	var rest map[string]any
	for k, v := range m {
		switch k {
		case "$ref", "$defs", "definitions", "$id", "$schema", "$comment", "title", "description", "default", "examples",
			"readOnly", "writeOnly", "deprecated":
			continue
		}
		if strings.HasPrefix(k, "x-") {
			continue
		}
		if rest == nil {
			rest = map[string]any{}
		}
		rest[k] = v
	}
	return rest
}

// resolvePointer finds the local JSON pointer ref (#/a/b) in root.
func resolvePointer(root any, ref string) (any, error) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("mockllm: only local $ref (#/...) is supported, got %q", ref)
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return nil, fmt.Errorf("mockllm: bad $ref %q: %w", ref, err)
	}
	if frag == "" {
		return root, nil
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, fmt.Errorf("mockllm: unsupported $ref %q", ref)
	}
	cur := root
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			if cur, ok = c[tok]; !ok {
				return nil, fmt.Errorf("mockllm: $ref %q not found", ref)
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("mockllm: $ref %q not found", ref)
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("mockllm: $ref %q not found", ref)
		}
	}
	return cur, nil
}

// variants flattens allOf / anyOf / oneOf / if-then-else into plain schemas
// to generate from. Merging is conservative and may be imprecise; that is
// fine because every candidate is checked against the original schema.
func (g *generator) variants(m map[string]any, depth int) []map[string]any {
	base := map[string]any{}
	for k, v := range m {
		switch k {
		case "allOf", "anyOf", "oneOf", "if", "then", "else":
		default:
			base[k] = v
		}
	}
	out := []map[string]any{base}
	if all, ok := m["allOf"].([]any); ok {
		for _, sub := range all {
			out = cross(out, g.branchVariants(sub, depth))
		}
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if branches, ok := m[kw].([]any); ok {
			var alts []map[string]any
			for _, sub := range branches {
				alts = append(alts, g.branchVariants(sub, depth)...)
			}
			out = cross(out, alts)
		}
	}
	if cond, ok := m["if"]; ok {
		then, ok := m["then"]
		if !ok {
			then = true
		}
		els, ok := m["else"]
		if !ok {
			els = true
		}
		alts := cross(g.branchVariants(cond, depth), g.branchVariants(then, depth))
		out = cross(out, append(alts, g.branchVariants(els, depth)...))
	}
	return out
}

// branchVariants flattens one branch of a combinator; none when it is
// false or cannot be read.
func (g *generator) branchVariants(s any, depth int) []map[string]any {
	if g.tick(depth+1) != nil {
		return nil
	}
	s, err := g.deref(s)
	if err != nil {
		return nil
	}
	switch s := s.(type) {
	case bool:
		if s {
			return []map[string]any{{}}
		}
	case map[string]any:
		return g.variants(s, depth+1)
	}
	return nil
}

// cross merges every schema of a with every schema of b, up to
// maxVariants.
func cross(a, b []map[string]any) []map[string]any {
	var out []map[string]any
	for _, x := range a {
		for _, y := range b {
			if len(out) == maxVariants {
				return out
			}
			out = append(out, merge(x, y))
		}
	}
	return out
}

// merge combines two flat schemas into one that (roughly) requires both.
func merge(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	for k, bv := range b {
		av, ok := out[k]
		if !ok {
			out[k] = bv
			continue
		}
		if v, ok := mergeKeyword(k, av, bv); ok {
			out[k] = v
		}
	}
	return out
}

// mergeKeyword combines two values of keyword k: the stricter bound, the
// union of required, the intersection of types, subschemas both apply...
// Otherwise (enum, const, pattern, format, ...) it keeps the first (false):
// the final validity check rejects candidates that break the second.
func mergeKeyword(k string, av, bv any) (any, bool) {
	switch k {
	case "properties":
		am, ok1 := av.(map[string]any)
		bm, ok2 := bv.(map[string]any)
		if !ok1 || !ok2 {
			return nil, false
		}
		pm := maps.Clone(am)
		for pk, pv := range bm {
			if x, ok := pm[pk]; ok {
				pv = map[string]any{"allOf": []any{x, pv}}
			}
			pm[pk] = pv
		}
		return pm, true
	case "required":
		req := stringList(av)
		for _, r := range stringList(bv) {
			if !slices.Contains(req, r) {
				req = append(req, r)
			}
		}
		return toAnySlice(req), true
	case "type":
		return intersectTypes(typeList(av), typeList(bv)), true
	case "minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties":
		x, y, ok := bothRats(av, bv)
		return bv, ok && y.Cmp(x) > 0
	case "maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties":
		x, y, ok := bothRats(av, bv)
		return bv, ok && y.Cmp(x) < 0
	case "multipleOf":
		if x, y, ok := bothRats(av, bv); ok && x.Sign() > 0 && y.Sign() > 0 {
			return json.Number(ratString(ratLCM(x, y))), true
		}
	case "items", "additionalItems", "additionalProperties", "contains", "propertyNames":
		_, arr1 := av.([]any)
		_, arr2 := bv.([]any)
		return map[string]any{"allOf": []any{av, bv}}, !arr1 && !arr2
	case "not":
		return map[string]any{"anyOf": []any{av, bv}}, true
	case "uniqueItems":
		return av == true || bv == true, true
	}
	return nil, false
}

var allTypes = []string{"string", "integer", "number", "boolean", "null", "object", "array"}

func typeList(t any) []string {
	switch t := t.(type) {
	case string:
		return []string{t}
	case []any:
		return stringList(t)
	}
	return nil
}

// intersectTypes keeps the types both lists allow (integer where one says
// number and the other integer).
func intersectTypes(a, b []string) []any {
	out := []any{}
	for _, t := range a {
		switch {
		case slices.Contains(b, t):
			out = append(out, t)
		case t == "integer" && slices.Contains(b, "number"), t == "number" && slices.Contains(b, "integer"):
			out = append(out, "integer")
		}
	}
	return out
}
