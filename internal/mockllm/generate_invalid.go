package mockllm

import (
	"encoding/json"
	"errors"
	"iter"
	"maps"
	"math/big"
	"slices"
	"strings"
)

// invalid returns a value that fails s: first a near miss derived from a
// valid value, then plain values of the wrong type.
func (g *generator) invalid(s any, depth int) (any, error) {
	if err := g.tick(depth); err != nil {
		return nil, err
	}
	s, err := g.deref(s)
	if err != nil {
		return nil, err
	}
	if good, err := g.value(s, depth, 0); err == nil {
		for c := range g.mutations(s, good, depth) {
			if g.rejects(s, c, depth) {
				return c, nil
			}
		}
	}
	wrong := []any{"mockllm-invalid", json.Number("12345"), json.Number("0.5"), true, nil, []any{}, map[string]any{}, "", json.Number("-1")}
	for _, c := range wrong {
		if g.rejects(s, c, depth) {
			return c, nil
		}
	}
	if g.steps > maxSteps {
		return nil, errTooComplex
	}
	return nil, errors.New("mockllm: the schema accepts every value tried; cannot generate an invalid one")
}

// mutations yields near misses of good, a value s accepts: the kind of
// change depends on the value's type.
func (g *generator) mutations(s, good any, depth int) iter.Seq[any] {
	return func(yield func(any) bool) {
		m, _ := s.(map[string]any)
		switch good := good.(type) {
		case map[string]any:
			g.objectMutations(m, good, depth, yield)
		case []any:
			g.arrayMutations(m, good, depth, yield)
		case string:
			stringMutations(m, yield)
		case json.Number:
			numberMutations(m, good, yield)
		}
	}
}

// objectMutations: one property made invalid (required ones first), one
// required property left out, one unexpected property added.
func (g *generator) objectMutations(m, good map[string]any, depth int, yield func(any) bool) {
	req := stringList(m["required"])
	keys := slices.SortedFunc(maps.Keys(good), func(a, b string) int {
		ra, rb := slices.Contains(req, a), slices.Contains(req, b)
		if ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	// A few near misses are enough; wide objects must not eat the budget.
	const tries = 8
	for _, k := range keys[:min(len(keys), tries)] {
		if bad, err := g.invalid(g.propSchema(m, k), depth+1); err == nil {
			c := maps.Clone(good)
			c[k] = bad
			if !yield(c) {
				return
			}
		}
	}
	for _, k := range req[:min(len(req), tries)] {
		c := maps.Clone(good)
		delete(c, k)
		if !yield(c) {
			return
		}
	}
	c := maps.Clone(good)
	c["mockllm_unexpected"] = true
	yield(c)
}

// arrayMutations: the first element made invalid, the first element
// repeated (against uniqueItems), the array grown past maxItems.
func (g *generator) arrayMutations(m map[string]any, good []any, depth int, yield func(any) bool) {
	if len(good) > 0 {
		var items any = true
		if tuple, ok := m["items"].([]any); ok && len(tuple) > 0 {
			items = tuple[0]
		} else if it, ok := m["items"]; ok {
			items = it
		}
		if bad, err := g.invalid(items, depth+1); err == nil {
			c := slices.Clone(good)
			c[0] = bad
			if !yield(c) {
				return
			}
		}
		if !yield(append(slices.Clone(good), good[0])) {
			return
		}
	}
	if maxI := maxCount(m, "maxItems"); maxI >= 0 && maxI < maxLen && len(good) > 0 {
		c := slices.Clone(good)
		for len(c) <= maxI {
			c = append(c, good[0])
		}
		yield(c)
	}
}

// stringMutations: a string past maxLength, the empty string.
func stringMutations(m map[string]any, yield func(any) bool) {
	if maxL := maxCount(m, "maxLength"); maxL >= 0 && maxL < maxLen {
		if !yield(strings.Repeat("x", maxL+1)) {
			return
		}
	}
	yield("")
}

// numberMutations: just below the minimum, just above the maximum, and off
// an integer or coarse grid.
func numberMutations(m map[string]any, good json.Number, yield func(any) bool) {
	r, ok := ratOf(good)
	if !ok {
		return
	}
	one := big.NewRat(1, 1)
	rg := bounds(m)
	var near []*big.Rat
	if rg.lo != nil {
		near = append(near, subRat(rg.lo, one))
	}
	if rg.hi != nil {
		near = append(near, addRat(rg.hi, one))
	}
	near = append(near, addRat(r, big.NewRat(1, 8)))
	for _, c := range near {
		if !yield(json.Number(ratString(c))) {
			return
		}
	}
}
