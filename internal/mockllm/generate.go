package mockllm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"regexp"
	"slices"
)

// Limits that keep generation bounded for any input (the fuzz target relies
// on them): nesting depth, total work, and the sizes we are willing to build.
const (
	maxDepth    = 32
	softDepth   = 6 // below this, only what the schema demands: keeps recursive values small
	maxSteps    = 50000
	maxVariants = 64
	maxLen      = 1 << 14 // longest string / largest collection we build
	maxExponent = 400     // numbers like 1e999999999 would make big.Rat explode
)

var (
	errTooComplex = errors.New("mockllm: schema too complex to generate a value for")
	errTooDeep    = errors.New("mockllm: schema nested too deeply")
)

// GenerateValue returns a JSON value that satisfies the Draft-07 JSON schema,
// on a best-effort basis: every candidate is checked by a small built-in
// validator before it is returned, so an error means that no candidate the
// generator knows how to build passed. See the package documentation for
// what is and is not supported.
func GenerateValue(schema json.RawMessage) (json.RawMessage, error) {
	root, err := decodeJSON(schema)
	if err != nil {
		return nil, fmt.Errorf("mockllm: parse schema: %w", err)
	}
	g := newGenerator(root)
	v, err := g.value(root, 0, 0)
	if err != nil {
		return nil, err
	}
	return encodeJSON(v)
}

// GenerateInvalid returns a JSON value that does NOT satisfy the schema,
// preferring a realistic mistake (one nested property of the wrong type, a
// missing required property) over a top-level value of the wrong type. It
// fails for schemas that accept everything, such as {} or true.
func GenerateInvalid(schema json.RawMessage) (json.RawMessage, error) {
	root, err := decodeJSON(schema)
	if err != nil {
		return nil, fmt.Errorf("mockllm: parse schema: %w", err)
	}
	g := newGenerator(root)
	v, err := g.invalid(root, 0)
	if err != nil {
		return nil, err
	}
	return encodeJSON(v)
}

// decodeJSON keeps numbers as json.Number so that they are compared exactly
// and re-emitted verbatim (const and enum values in particular).
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func encodeJSON(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// generator holds per-call state: the root document (for "$ref"), a work
// counter and a cache of compiled patterns.
type generator struct {
	root     any
	steps    int
	patterns map[string]*regexp.Regexp // nil entry: pattern Go cannot compile
	// gaveUp records that valid hit a limit, so its "false" means "unknown".
	gaveUp bool
}

func newGenerator(root any) *generator {
	return &generator{root: root, patterns: map[string]*regexp.Regexp{}}
}

// tick charges one unit of work; past the budget every call fails fast so a
// pathological schema unwinds instead of running for minutes.
func (g *generator) tick(depth int) error {
	g.steps++
	if g.steps > maxSteps {
		return errTooComplex
	}
	if depth > maxDepth {
		return errTooDeep
	}
	return nil
}

// value returns the nth distinct candidate (0-based) that satisfies s. The
// nth parameter is how uniqueItems gets different elements from one schema.
func (g *generator) value(s any, depth, nth int) (any, error) {
	if err := g.tick(depth); err != nil {
		return nil, err
	}
	s, err := g.deref(s)
	if err != nil {
		return nil, err
	}
	if b, ok := s.(bool); ok {
		if !b {
			return nil, errors.New("mockllm: schema false accepts no value")
		}
		s = map[string]any{}
	}
	m, ok := s.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("mockllm: a schema must be an object or a boolean, not %T", s)
	}
	seen := map[string]bool{} // distinct valid candidates, by encoding
	for _, v := range g.variants(m, depth) {
		for c := range g.candidates(v, depth, nth) {
			if err := g.tick(depth); err != nil {
				return nil, err
			}
			if !g.valid(m, c, depth) {
				continue
			}
			key, err := encodeJSON(c)
			if err != nil || seen[string(key)] {
				continue
			}
			seen[string(key)] = true
			if len(seen) > nth {
				return c, nil
			}
		}
	}
	if g.steps > maxSteps {
		return nil, errTooComplex
	}
	return nil, errors.New("mockllm: found no value satisfying the schema")
}

// types lists the JSON types to try, declared ones first; without "type" the
// keywords present hint at the intended type, then everything else follows.
func types(v map[string]any) []string {
	switch t := v["type"].(type) {
	case string, []any:
		return typeList(t)
	}
	hints := []struct {
		typ string
		kws []string
	}{
		{"object", []string{"properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties", "propertyNames", "dependencies"}},
		{"array", []string{"items", "minItems", "maxItems", "uniqueItems", "contains", "additionalItems"}},
		{"string", []string{"minLength", "maxLength", "pattern", "format"}},
		{"number", []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}},
	}
	var out []string
	for _, h := range hints {
		for _, kw := range h.kws {
			if _, ok := v[kw]; ok {
				out = append(out, h.typ)
				break
			}
		}
	}
	for _, t := range allTypes {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// candidates yields values to try for a flat schema, lazily, so that the
// expensive kinds (objects, arrays) are built only when cheaper ones failed.
func (g *generator) candidates(v map[string]any, depth, nth int) iter.Seq[any] {
	return func(yield func(any) bool) {
		if c, ok := v["const"]; ok {
			yield(c)
			return
		}
		if e, ok := v["enum"].([]any); ok {
			for _, c := range e {
				if !yield(c) {
					return
				}
			}
			return
		}
		for _, t := range types(v) {
			var cs iter.Seq[any]
			switch t {
			case "null":
				cs = slices.Values([]any{nil})
			case "boolean":
				cs = slices.Values([]any{true, false})
			case "integer", "number":
				cs = slices.Values(numbers(v, t == "integer", nth))
			case "string":
				cs = g.strings(v, nth)
			case "object":
				cs = g.objects(v, depth, nth)
			case "array":
				cs = g.arrays(v, depth, nth)
			default:
				continue
			}
			for c := range cs {
				if !yield(c) {
					return
				}
			}
		}
	}
}

// objects yields objects with every required property and every other
// declared one (within maxProperties), padded up to minProperties.
func (g *generator) objects(v map[string]any, depth, nth int) iter.Seq[any] {
	return func(yield func(any) bool) {
		props, _ := v["properties"].(map[string]any)
		var keys []string
		for _, k := range stringList(v["required"]) {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		nReq := len(keys)
		for _, k := range slices.Sorted(maps.Keys(props)) {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		minP, maxP := min(minCount(v, "minProperties"), maxLen), maxCount(v, "maxProperties")
		for j := 0; j <= nth; j++ {
			obj, ok := g.object(v, keys, nReq, minP, maxP, depth, j)
			if ok && !yield(obj) {
				return
			}
		}
	}
}

// object builds the nth object of objects: keys in order (the first nReq
// required, the others while maxP and the depth allow), then the
// properties dependencies ask for, then padding up to minP.
func (g *generator) object(v map[string]any, keys []string, nReq, minP, maxP, depth, nth int) (map[string]any, bool) {
	obj := map[string]any{}
	put := func(k string, required bool, n int) bool {
		val, err := g.value(g.propSchema(v, k), depth+1, n)
		if err != nil {
			return !required && g.steps <= maxSteps
		}
		obj[k] = val
		return true
	}
	for i, k := range keys {
		required := i < nReq
		if !required && (maxP >= 0 && len(obj) >= maxP || depth > softDepth) {
			break
		}
		n := 0
		if i == 0 {
			n = nth // vary the first property to get distinct objects
		}
		if !put(k, required, n) {
			return nil, false
		}
	}
	if deps, ok := v["dependencies"].(map[string]any); ok {
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			for _, d := range stringList(deps[k]) {
				if !hasKey(obj, d) && !put(d, true, 0) {
					return nil, false
				}
			}
		}
	}
	if len(obj) < minP {
		for k := range g.extraKeys(v, minP) {
			if len(obj) >= minP {
				break
			}
			if !hasKey(obj, k) {
				put(k, false, 0)
			}
		}
	}
	return obj, true
}

// extraKeys proposes property names for padding up to minProperties: names
// matching patternProperties first (the only ones allowed when
// additionalProperties is false), then extra_1, extra_2, ...
func (g *generator) extraKeys(v map[string]any, n int) iter.Seq[string] {
	return func(yield func(string) bool) {
		if pats, ok := v["patternProperties"].(map[string]any); ok {
			for _, p := range slices.Sorted(maps.Keys(pats)) {
				if g.pattern(p) == nil {
					continue
				}
				for k := range patternStrings(p, 1, n) {
					if !yield(k) {
						return
					}
				}
			}
		}
		for i := 1; i <= 2*n; i++ {
			if !yield(fmt.Sprintf("extra_%d", i)) {
				return
			}
		}
	}
}

// propSchema is the schema a property value must satisfy: its "properties"
// entry and every matching "patternProperties" entry, or, failing both,
// "additionalProperties".
func (g *generator) propSchema(v map[string]any, key string) any {
	var all []any
	if props, ok := v["properties"].(map[string]any); ok {
		if s, ok := props[key]; ok {
			all = append(all, s)
		}
	}
	if pp, ok := v["patternProperties"].(map[string]any); ok {
		for _, p := range slices.Sorted(maps.Keys(pp)) {
			if re := g.pattern(p); re != nil && re.MatchString(key) {
				all = append(all, pp[p])
			}
		}
	}
	switch len(all) {
	case 0:
		if ap, ok := v["additionalProperties"]; ok {
			return ap
		}
		return true
	case 1:
		return all[0]
	}
	return map[string]any{"allOf": all}
}

// arrays yields arrays of minItems elements (at least one, to be useful),
// honouring tuple items, additionalItems, contains and uniqueItems.
func (g *generator) arrays(v map[string]any, depth, nth int) iter.Seq[any] {
	return func(yield func(any) bool) {
		a := readArraySchema(v, depth)
		for j := 0; j <= nth; j++ {
			arr, ok := g.array(a, depth, j)
			if ok && !yield(arr) {
				return
			}
		}
		if a.minItems == 0 && !a.hasContains {
			yield([]any{}) // when the item schema is unsatisfiable
		}
	}
}

// arraySchema is what an array schema asks of the array to build.
type arraySchema struct {
	n, minItems int // n: the length to build
	items       any // the schema of every element, or of those past a tuple (additionalItems)
	tuple       []any
	isTuple     bool
	contains    any
	hasContains bool
	unique      bool
}

// readArraySchema reads the array keywords of v and the length to build:
// minItems (at least one above softDepth) or the tuple's, within maxItems
// (and the tuple when additionalItems is false).
func readArraySchema(v map[string]any, depth int) arraySchema {
	a := arraySchema{minItems: minCount(v, "minItems"), items: true, unique: v["uniqueItems"] == true}
	maxI := maxCount(v, "maxItems")
	a.tuple, a.isTuple = v["items"].([]any)
	if s, ok := v["items"]; ok && !a.isTuple {
		a.items = s
	}
	if a.isTuple {
		a.items = true
		if s, ok := v["additionalItems"]; ok {
			a.items = s
		}
	}
	a.contains, a.hasContains = v["contains"]
	a.n = a.minItems
	if a.isTuple {
		a.n = max(a.n, len(a.tuple))
	} else if a.n == 0 && depth <= softDepth {
		a.n = 1
	}
	if maxI >= 0 {
		a.n = min(a.n, maxI)
	}
	if a.isTuple && a.items == false {
		a.n = min(a.n, len(a.tuple))
	}
	a.n = min(a.n, maxLen)
	return a
}

// schemaAt is the schema of element i, and how many earlier elements drew
// from that schema.
func (a arraySchema) schemaAt(i int) (any, int) {
	switch {
	case !a.isTuple:
		return a.items, i
	case i < len(a.tuple):
		return a.tuple[i], 0
	}
	return a.items, i - len(a.tuple)
}

// array builds the jth variant: its first element varies with j (and
// satisfies contains); with uniqueItems each element differs from those
// drawn from the same schema before it.
func (g *generator) array(a arraySchema, depth, j int) ([]any, bool) {
	arr := make([]any, 0, a.n)
	for i := range a.n {
		s, k := a.schemaAt(i)
		if !a.unique {
			k = 0
		}
		if i == 0 {
			if j > 0 && a.unique {
				k = a.n - 1 + j // vary past the values the other elements use
			} else {
				k += j
			}
			if a.hasContains {
				s = map[string]any{"allOf": []any{s, a.contains}}
			}
		}
		val, err := g.value(s, depth+1, k)
		if err != nil {
			break
		}
		arr = append(arr, val)
	}
	return arr, len(arr) == a.n
}

func stringList(v any) []string {
	arr, _ := v.([]any)
	var out []string
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

func toAnySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
