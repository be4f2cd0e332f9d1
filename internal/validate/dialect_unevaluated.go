package validate

import (
	"fmt"
	"maps"
	"regexp"
	"strings"
)

// unevaluatedProperties and unevaluatedItems (2019-09, 2020-12).
//
// They apply to the members (items) of a value that no schema applied to
// it in the same place has evaluated: its properties, patternProperties
// and additionalProperties (items and additionalItems), and those of the
// schemas its allOf, $ref, anyOf, oneOf, if/then/else and dependentSchemas
// applied successfully. When what those evaluate does not depend on which
// of them succeed, the set is known from the schema alone, and the keyword
// is exactly Draft-07's additionalProperties (additionalItems) beside a
// properties/patternProperties (items) list of that set, in an allOf
// entry of its own. That is the case beside properties and
// patternProperties only, through allOf and references, and through
// anyOf/oneOf branches, if/then/else outcomes and dependentSchemas that
// evaluate the same members as each other or as the rest. Anything else
// (branches that evaluate different members, contains in 2020-12, which
// evaluates the items it matches) is refused, naming the construct.

// evalSet is what a schema evaluates of a value, when known statically.
type evalSet struct {
	all    bool            // every member (item)
	names  map[string]bool // properties
	pats   map[string]bool // patternProperties keys
	prefix int             // the first items
}

// unevalPlan is the translation of one unevaluated keyword.
type unevalPlan struct {
	items bool // unevaluatedItems
	set   evalSet
}

func (a evalSet) covers(b evalSet) bool {
	if a.all {
		return true
	}
	if b.all || b.prefix > a.prefix {
		return false
	}
	for p := range b.pats {
		if !a.pats[p] {
			return false
		}
	}
	for n := range b.names {
		if !a.names[n] && !matchesAny(a.pats, n) {
			return false
		}
	}
	return true
}

func (a evalSet) equal(b evalSet) bool {
	return a.all == b.all && a.prefix == b.prefix && maps.Equal(a.names, b.names) && maps.Equal(a.pats, b.pats)
}

func (a *evalSet) add(b evalSet) {
	a.all = a.all || b.all
	a.prefix = max(a.prefix, b.prefix)
	for n := range b.names {
		a.names[n] = true
	}
	for p := range b.pats {
		a.pats[p] = true
	}
}

// matchesAny reports whether a name matches one of the patterns (RE2
// ones; an ECMAScript one makes no claim).
func matchesAny(pats map[string]bool, name string) bool {
	for p := range pats {
		if re, err := regexp.Compile(p); err == nil && re.MatchString(name) {
			return true
		}
	}
	return false
}

func newEvalSet() evalSet { return evalSet{names: map[string]bool{}, pats: map[string]bool{}} }

// planUnevaluated decides, for every unevaluated keyword, what it
// translates to, or refuses it.
func (s *screener) planUnevaluated() error {
	for _, kp := range s.unevaluated {
		i := strings.LastIndexByte(kp, '/')
		ptr, items := kp[:i], kp[i+1:] == "unevaluatedItems"
		set, why := s.evaluated(ptr, items, false)
		if why != "" {
			return fail(kp, "cannot be checked exactly: %s", why)
		}
		s.uneval[kp] = unevalPlan{items: items, set: set}
	}
	return nil
}

// evalKey names one question evaluated answers.
type evalKey struct {
	ptr         string
	items, self bool
}

// evalAnswer is its answer, kept: shared definitions may apply hundreds of
// times in place (MaxInPlace), under thousands of unevaluated keywords.
type evalAnswer struct {
	set evalSet
	why string
}

// evaluated is what the schema at ptr evaluates of a value, or why that
// depends on the value. self: count the schema's own unevaluated keyword
// (it evaluates everything, when the schema holding it succeeds). The sets
// it returns are shared: read them, never change them.
func (s *screener) evaluated(ptr string, items, self bool) (evalSet, string) {
	k := evalKey{ptr, items, self}
	if a, ok := s.evalMemo[k]; ok {
		return a.set, a.why
	}
	set, why := s.evaluate(ptr, items, self)
	if s.evalMemo == nil {
		s.evalMemo = map[evalKey]evalAnswer{}
	}
	s.evalMemo[k] = evalAnswer{set, why}
	return set, why
}

func (s *screener) evaluate(ptr string, items, self bool) (evalSet, string) {
	set := newEvalSet()
	obj, ok := s.positions[ptr].(map[string]any)
	if !ok {
		return set, ""
	}
	set.add(s.ownEvaluated(obj, items, self))
	if items && s.dialect == draft2020 && obj["contains"] != nil && !set.all {
		return set, fmt.Sprintf("%s evaluates the items it matches, which depend on the value", displayPointer(ptr+"/contains"))
	}
	var static []string
	for i := range asArray(obj["allOf"]) {
		static = append(static, fmt.Sprintf("%s/allOf/%d", ptr, i))
	}
	for _, e := range s.refEdge[ptr] {
		static = append(static, e.target)
	}
	for _, p := range static {
		sub, why := s.evaluated(p, items, true)
		if why != "" {
			return set, why
		}
		set.add(sub)
	}
	var pending []evalSet // conditional contributions not equal across outcomes
	var where []string
	for _, g := range s.outcomes(ptr, obj) {
		sets := make([]evalSet, len(g.paths))
		for i, alt := range g.paths {
			sets[i] = newEvalSet()
			for _, p := range alt {
				sub, why := s.evaluated(p, items, true)
				if why != "" {
					return set, why
				}
				sets[i].add(sub)
			}
		}
		if g.always && allEqual(sets) {
			set.add(sets[0])
			continue
		}
		pending = append(pending, sets...)
		for range sets {
			where = append(where, g.at)
		}
	}
	for i, p := range pending {
		if !set.covers(p) {
			what := "properties"
			if items {
				what = "items"
			}
			return set, fmt.Sprintf("the %s that %s evaluates depend on which of its schemas a value matches", what, displayPointer(where[i]))
		}
	}
	return set, ""
}

// ownEvaluated is what a schema's own keywords evaluate.
func (s *screener) ownEvaluated(obj map[string]any, items, self bool) evalSet {
	set := newEvalSet()
	if items {
		switch it := obj["items"].(type) {
		case []any:
			set.prefix = len(it)
			set.all = obj["additionalItems"] != nil
		case nil:
		default:
			set.all = true
		}
		set.all = set.all || (self && obj["unevaluatedItems"] != nil)
		return set
	}
	for n := range asObject(obj["properties"]) {
		set.names[n] = true
	}
	for p := range asObject(obj["patternProperties"]) {
		set.pats[p] = true
	}
	set.all = obj["additionalProperties"] != nil || (self && obj["unevaluatedProperties"] != nil)
	return set
}

// outcome is an applicator that applies some of its schemas depending on
// the value: each path is one outcome's schemas. always: one of the paths
// applies whenever the schema holding it succeeds (anyOf, oneOf, if).
type outcome struct {
	at     string
	paths  [][]string
	always bool
}

func (s *screener) outcomes(ptr string, obj map[string]any) []outcome {
	var out []outcome
	for _, kw := range []string{"anyOf", "oneOf"} {
		if arr := asArray(obj[kw]); len(arr) > 0 {
			g := outcome{at: ptr + "/" + kw, always: true}
			for i := range arr {
				g.paths = append(g.paths, []string{fmt.Sprintf("%s/%s/%d", ptr, kw, i)})
			}
			out = append(out, g)
		}
	}
	if _, has := obj["if"]; has && inDialect("if", ptr, s.dialect) {
		pass, fail := []string{ptr + "/if"}, []string{}
		if _, ok := obj["then"]; ok {
			pass = append(pass, ptr+"/then")
		}
		if _, ok := obj["else"]; ok {
			fail = append(fail, ptr+"/else")
		}
		out = append(out, outcome{at: ptr + "/if", paths: [][]string{pass, fail}, always: true})
	}
	for _, name := range sortedKeys(asObject(obj["dependentSchemas"])) {
		p := ptr + "/dependentSchemas/" + escapePointer(name)
		out = append(out, outcome{at: p, paths: [][]string{{p}, {}}})
	}
	return out
}

func allEqual(sets []evalSet) bool {
	for _, s := range sets[1:] {
		if !s.equal(sets[0]) {
			return false
		}
	}
	return true
}

func asArray(v any) []any {
	a, _ := v.([]any)
	return a
}

func asObject(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// unevaluatedEntry is the Draft-07 allOf entry an unevaluated keyword
// becomes: additionalProperties (additionalItems) u beside the members its
// plan says are evaluated.
func unevaluatedEntry(plan unevalPlan, u any) map[string]any {
	if plan.items {
		if plan.set.prefix == 0 {
			return map[string]any{"items": u}
		}
		prefix := make([]any, plan.set.prefix)
		for i := range prefix {
			prefix[i] = true
		}
		return map[string]any{"items": prefix, "additionalItems": u}
	}
	entry := map[string]any{"additionalProperties": u}
	if len(plan.set.names) > 0 {
		props := map[string]any{}
		for n := range plan.set.names {
			props[n] = true
		}
		entry["properties"] = props
	}
	if len(plan.set.pats) > 0 {
		pats := map[string]any{}
		for p := range plan.set.pats {
			pats[p] = true
		}
		entry["patternProperties"] = pats
	}
	return entry
}
