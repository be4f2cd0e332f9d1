package validate

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Local references.
//
// A "$ref" is admitted when it names a schema inside the same document: a
// fragment that is a JSON Pointer ("#", "#/definitions/a", "#/$defs/a%20b",
// "#/properties/x~1y"), or, when the root has an absolute "$id", a URI that
// resolves to that same document. Whatever "$id" says, nothing is ever
// looked up outside the document: every admitted reference is rewritten to
// its canonical fragment before the library sees it, and the root "$id" is
// dropped. Anything else (another document, an anchor, a pointer to
// nothing or to data that is not a schema) is refused with the pointer of
// the "$ref".
//
// References may recurse (trees, linked lists, mutually recursive
// definitions), but every cycle must pass through a keyword that moves to
// a child of the value (properties, items, ...): a cycle of schemas that
// apply in place ({"$ref":"#"} at the root, {"anyOf":[{"$ref":"#"}]})
// would recurse forever on any value, and is refused.

// Caps on what references make of a document.
const (
	// MaxInPlace bounds the schemas that apply to one location of a value,
	// references followed (without references it is the document's size).
	MaxInPlace = 512
	// MaxInPlaceDepth bounds schemas applied in place inside one another,
	// references followed: each is a nested call in the library.
	MaxInPlaceDepth = 32
	// MaxCompiled bounds the schemas the library builds: it parses the
	// target of each distinct reference once more (catalogue: 6,615).
	MaxCompiled = 8192
)

// refSite is a "$ref" (or "$recursiveRef", "$dynamicRef") met by the
// screening.
type refSite struct {
	node   map[string]any // the schema holding it
	ptr    string         // that schema's pointer
	key    string         // "$ref", "$recursiveRef" or "$dynamicRef"
	ref    string         // the value as written
	target string         // the pointer it names, once resolved
}

// edge is a reference from a schema: the schema it names, and the keyword.
type edge struct{ target, key string }

// pointerTokens splits a JSON Pointer ("" or "/a/b") into unescaped tokens.
func pointerTokens(p string) ([]string, bool) {
	if p == "" {
		return nil, true
	}
	if p[0] != '/' {
		return nil, false
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, false
			}
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, true
}

// canonicalRef renders a pointer as the fragment-only reference the
// library is given: "#" and the pointer, percent-encoded where a URI
// fragment needs it.
func canonicalRef(ptr string) string {
	return (&url.URL{Fragment: ptr}).String()
}

// lookup walks a decoded document along a canonical pointer.
func lookup(doc any, ptr string) (any, bool) {
	toks, ok := pointerTokens(ptr)
	if !ok {
		return nil, false
	}
	cur := doc
	for _, t := range toks {
		switch c := cur.(type) {
		case map[string]any:
			if cur, ok = c[t]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) || strconv.Itoa(i) != t {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// resolveRefs checks every "$ref" the screening met and rewrites it, in
// the decoded document, to its canonical fragment. Then it checks the
// graph of schemas that apply in place: no cycle, bounded fan-out and
// depth, and a bounded number of schemas for the library to build.
func (s *screener) resolveRefs(doc any) error {
	if len(s.refs) == 0 {
		return nil
	}
	// screening a referenced schema under an unknown keyword may add refs
	for i := 0; i < len(s.refs); i++ {
		r := &s.refs[i]
		kp := r.ptr + "/" + escapePointer(r.key)
		target, why := s.resolve(r.ref, s.bases[r.ptr])
		if r.key != "$ref" && why == "" {
			target, why = s.resolveDynamic(r, target)
		}
		if why != "" {
			return fail(kp, "%q %s", r.ref, why)
		}
		for _, k := range s.ecmaKeyPtrs {
			if target == k || strings.HasPrefix(target, k+"/") {
				return fail(kp, "%q names the schema of a patternProperties key only ECMAScript runs, which cannot be referred to", r.ref)
			}
		}
		if _, ok := s.positions[target]; !ok {
			if err := s.vendorTarget(doc, target, kp, r.ref); err != nil {
				return err
			}
			r = &s.refs[i]
		}
		r.node[r.key], r.target = canonicalRef(target), target
		s.refEdge[r.ptr] = append(s.refEdge[r.ptr], edge{target, r.key})
		s.targets[target] = true
	}
	if err := s.checkGraph(); err != nil {
		return err
	}
	compiled := s.subschemas
	for t := range s.targets {
		compiled += s.subtree(t)
	}
	if compiled > MaxCompiled {
		return fail("", "references make %d schemas to build (each distinct target counted once more), more than the limit of %d", compiled, MaxCompiled)
	}
	return nil
}

// subtree counts the schema positions at or below ptr.
func (s *screener) subtree(ptr string) int {
	n := 0
	for p := range s.positions {
		if p == ptr || strings.HasPrefix(p, ptr+"/") {
			n++
		}
	}
	return n
}

// checkGraph walks the in-place graph (applicators and references) from
// every schema: a cycle is refused, and so are too many schemas applying
// at one location or applying inside one another.
func (s *screener) checkGraph() error {
	const (
		unseen = iota
		active
		done
	)
	state := map[string]int{}
	size := map[string]int{}
	depth := map[string]int{}
	var visit func(p string, via string) error
	visit = func(p, via string) error {
		switch state[p] {
		case active:
			return fail(via, "reference cycle: %s applies to the same value again without moving into one of its members or items, which would never end", displayPointer(p))
		case done:
			return nil
		}
		state[p] = active
		n, d := 1, 1
		kids := s.inplace[p]
		for _, e := range s.refEdge[p] {
			kids = append(kids[:len(kids):len(kids)], e.target)
		}
		for i, c := range kids {
			via := c
			if i >= len(s.inplace[p]) {
				via = p + "/" + escapePointer(s.refEdge[p][i-len(s.inplace[p])].key)
			}
			if err := visit(c, via); err != nil {
				return err
			}
			n = min(n+size[c], MaxInPlace+1)
			d = max(d, 1+depth[c])
		}
		state[p], size[p], depth[p] = done, n, d
		if n > MaxInPlace {
			return fail(p, "more than %d schemas apply to one location of the value once references are followed", MaxInPlace)
		}
		if d > MaxInPlaceDepth {
			return fail(p, "schemas apply inside one another more than %d deep once references are followed", MaxInPlaceDepth)
		}
		return nil
	}
	for _, p := range sortedPositions(s.positions) {
		if err := visit(p, p); err != nil {
			return err
		}
	}
	return nil
}

func sortedPositions(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
