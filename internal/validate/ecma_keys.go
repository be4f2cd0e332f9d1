package validate

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/dlclark/regexp2/v2"
	"github.com/xeipuuv/gojsonschema"
)

// patternProperties keys only the ECMAScript engine runs.
//
// The library matches property names against patternProperties keys with
// Go's regexp, by the key's source, for every name of every object: no
// format can stand in for a key, as one stands in for "pattern" (ecma.go).
// So a key with lookaround ("^(?!@@)[\w@]+$") reaches the library as a
// placeholder that matches no name (it holds U+0000, which no value's
// keys do), and each value is validated against the document specialised
// to the names it holds: for the names that match the key (decided by the
// ECMAScript engine, under the work budget), the schema holding the key
// gets an allOf entry {"dependencies": {name: {"properties": {name:
// {"$ref": <the key's schema>}}}}} (dependencies, not properties: the
// library looks each of an object's names up in them, where it would
// compare each with every name of a properties list), and, when it has
// additionalProperties, "properties" entries of true for them, which is
// what the key means for those names. A value none of
// whose names match a key is validated against the document as compiled.
// Specialisations are compiled once per set of matching names and kept,
// the last few, with the schema.

// ecmaKeyPlaceholder is the RE2 source standing for the i-th key: it
// matches only names holding U+0000, and carries a token of this
// process's, so that no caller's key is taken for one.
func ecmaKeyPlaceholder(i int) string {
	return fmt.Sprintf(`\x00ecma-key-%s-%d\x00`, placeholderToken, i)
}

var placeholderToken = func() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// ecmaKey is one ECMAScript patternProperties key of a compiled document.
type ecmaKey struct {
	src         string // the key as written
	placeholder string // what the library sees instead
	re          *regexp2.Regexp
}

// renameECMAKeys replaces, in a prepared document, every patternProperties
// key only the ECMAScript engine runs by its placeholder, and returns
// them in order.
func renameECMAKeys(nodes []detachedSchema, compiled map[string]*regexp2.Regexp) []ecmaKey {
	if len(compiled) == 0 {
		return nil
	}
	var keys []ecmaKey
	var walk func(node any, ptr string)
	walk = func(node any, ptr string) {
		obj, ok := node.(map[string]any)
		if !ok {
			return
		}
		if pp, ok := obj["patternProperties"].(map[string]any); ok {
			for _, k := range sortedKeys(pp) {
				if re := compiled[k]; re != nil {
					ph := ecmaKeyPlaceholder(len(keys))
					pp[ph] = pp[k]
					delete(pp, k)
					keys = append(keys, ecmaKey{src: k, placeholder: ph, re: re})
				}
			}
		}
		eachSubschemaAt(obj, ptr, walk)
	}
	for _, d := range nodes {
		walk(d.node, d.ptr)
	}
	return keys
}

// specialized is a document specialised to the names of some values.
type specialized struct {
	compiled *gojsonschema.Schema
	model    *cnode
}

// maxSpecialized bounds the specialisations kept with a schema.
const maxSpecialized = 8

// specializations keeps a schema's last specialisations, by signature.
type specializations struct {
	mu    sync.Mutex
	byKey map[string]*specialized
	order []string
}

// errKeysOverBudget: matching a value's names against the keys took more
// than the budget, or one match ran out of time or stack.
var errKeysOverBudget = errors.New("matching property names is over the budget")

// specialize returns what to validate v against: the schema as compiled,
// or its specialisation to v's names, with the CPU time the ECMAScript
// matches took.
func (s *Schema) specialize(v *vnode) (*gojsonschema.Schema, *cnode, float64, error) {
	names := map[string]bool{}
	objectKeys(v, names)
	sorted := sortedKeysOf(names)
	matched := map[string][]string{} // key source → the names it matches
	var took float64
	for _, k := range s.ecmaKeys {
		if _, done := matched[k.src]; done {
			continue
		}
		matched[k.src] = []string{}
		for _, n := range sorted {
			var ok bool
			var err error
			took += float64(threadCPU(func() { ok, err = k.re.MatchString(n) }))
			if err != nil || took > BudgetTime {
				return nil, nil, took, errKeysOverBudget
			}
			if ok {
				matched[k.src] = append(matched[k.src], n)
			}
		}
	}
	var sig strings.Builder
	for _, src := range sortedKeysOf(matched) {
		if len(matched[src]) > 0 {
			sig.WriteString(src + "\x00" + strings.Join(matched[src], "\x00") + "\x00\x00")
		}
	}
	if sig.Len() == 0 {
		return s.compiled, s.model, took, nil
	}
	sp, err := s.specialized(sig.String(), matched)
	if err != nil {
		return nil, nil, took, err
	}
	return sp.compiled, sp.model, took, nil
}

// objectKeys collects the names of every object in a value.
func objectKeys(v *vnode, into map[string]bool) {
	for _, k := range v.keys {
		into[k.name] = true
	}
	for i := range v.kids {
		objectKeys(&v.kids[i], into)
	}
}

// specialized returns the specialisation for a signature, compiling it
// the first time.
func (s *Schema) specialized(sig string, matched map[string][]string) (*specialized, error) {
	c := s.specs
	c.mu.Lock()
	sp, ok := c.byKey[sig]
	c.mu.Unlock()
	if ok {
		return sp, nil
	}
	doc := deepCopy(s.template)
	byPlaceholder := map[string][]string{}
	for _, k := range s.ecmaKeys {
		byPlaceholder[k.placeholder] = matched[k.src]
	}
	addMatched(doc, "", byPlaceholder)
	compiled, err := compileDoc(doc)
	if err != nil {
		return nil, fmt.Errorf("the schema cannot be compiled for this value's property names: %w", err)
	}
	sp = &specialized{compiled: compiled, model: buildModel(doc, s.insts)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[sig]; !ok {
		c.byKey[sig] = sp
		c.order = append(c.order, sig)
		if len(c.order) > maxSpecialized {
			delete(c.byKey, c.order[0])
			c.order = c.order[1:]
		}
	}
	return sp, nil
}

// addMatched walks a compiled document (as the library sees it: every
// object, wherever a union's branches were moved) and gives each schema
// holding a placeholder key the entries for the names that key matches.
func addMatched(node any, ptr string, byPlaceholder map[string][]string) {
	switch t := node.(type) {
	case []any:
		for i, e := range t {
			addMatched(e, fmt.Sprintf("%s/%d", ptr, i), byPlaceholder)
		}
	case map[string]any:
		for _, k := range sortedKeys(t) {
			addMatched(t[k], ptr+"/"+escapePointer(k), byPlaceholder)
		}
		pp, _ := t["patternProperties"].(map[string]any)
		for _, ph := range sortedKeys(pp) {
			names := byPlaceholder[ph]
			if len(names) == 0 {
				continue
			}
			ref := canonicalRef(ptr + "/patternProperties/" + escapePointer(ph))
			deps := map[string]any{}
			for _, n := range names {
				deps[n] = map[string]any{"properties": map[string]any{n: map[string]any{"$ref": ref}}}
			}
			appendAllOf(t, map[string]any{"dependencies": deps})
			if _, closed := t["additionalProperties"]; closed {
				own, _ := t["properties"].(map[string]any)
				if own == nil {
					own = map[string]any{}
					t["properties"] = own
				}
				for _, n := range names {
					if _, has := own[n]; !has {
						own[n] = true
					}
				}
			}
		}
	}
}

// deepCopy copies a decoded document.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}
