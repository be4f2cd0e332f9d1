package validate

import (
	"encoding/json"
	"maps"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// adapt rewrites a screened, meta-validated schema document in place into
// an equivalent one that steers gojsonschema v1.2.0 around its defects:
//
//   - format applies to strings only (Draft-07), but the library also runs
//     the checker on numbers, and every built-in checker refuses them. Where
//     a number can reach a "format" (no "type", or a type that admits
//     numbers), {"format": F} becomes {"if": {"type": "string"}, "then":
//     {"format": F}}, placed in the node when it has no if/then/else of its
//     own and as an extra allOf entry otherwise.
//   - the numeric formats (numericFormats) become the keywords they mean,
//     guarded the same way by {"if": {"type": "number"}}.
//   - count keywords (minLength, maxItems, ...) written as integral
//     decimals (2.0, 1e2) are rewritten as integers, which is all the
//     library parses; values above 2^31-1 are clamped (nothing is that big).
//   - -0 in const and enum becomes 0: the library compares through
//     float64 and encoding/json, which prints -0 and 0 differently.
//   - a discriminated oneOf/anyOf (discriminate) is dispatched on its
//     discriminator instead of trying every branch.
//
// None of this touches a process-global registry. root is the whole
// document, in which references are looked up, ptr the node's pointer in
// it, and targets the pointers references name (a union holding one is
// not rewritten: its pointer must hold).
func adapt(node, root any, ptr string, targets map[string]bool) {
	a := adapter{root: root, targets: map[string]bool{}}
	for t := range targets {
		for i := len(t); i > 0; i = strings.LastIndexByte(t[:i], '/') {
			a.targets[t[:i]] = true
		}
	}
	a.node(node, ptr)
}

type adapter struct {
	root    any
	targets map[string]bool // the pointers references name, and every pointer above them
}

func (a adapter) node(node any, ptr string) {
	obj, ok := node.(map[string]any)
	if !ok {
		return
	}
	eachSubschemaAt(obj, ptr, a.node)
	for _, kw := range []string{"oneOf", "anyOf"} {
		if !a.targets[ptr+"/"+kw] {
			a.discriminate(obj, kw)
		}
	}
	for k, v := range obj {
		switch keywords[k] {
		case kwCount:
			if n, ok := countValue(v); ok {
				obj[k] = json.Number(strconv.Itoa(n))
			}
		case kwLiteral, kwEnum:
			if k == "const" || k == "enum" {
				obj[k] = positiveZero(v)
			}
		}
	}
	f, ok := obj["format"].(string)
	switch {
	case ok && numericFormats[f] != nil:
		delete(obj, "format")
		if then := numericFormats[f](); then != nil {
			guarded(obj, "number", then)
		}
	case ok && admitsNumbers(obj["type"]):
		// "type" in "then" too, so that adapting again changes nothing
		delete(obj, "format")
		guarded(obj, "string", map[string]any{"type": "string", "format": f})
	}
}

// guarded adds {"if": {"type": typ}, "then": then} to obj: in the node
// when it has no if/then/else of its own, as an extra allOf entry
// otherwise.
func guarded(obj map[string]any, typ string, then map[string]any) {
	cond := map[string]any{"type": typ}
	_, hasIf := obj["if"]
	_, hasThen := obj["then"]
	_, hasElse := obj["else"]
	if !hasIf && !hasThen && !hasElse {
		obj["if"], obj["then"] = cond, then
		return
	}
	all, _ := obj["allOf"].([]any)
	obj["allOf"] = append(all, map[string]any{"if": cond, "then": then})
}

// prepare turns a screened document (references already canonical) into
// the plain Draft-07 document the library compiles, in place:
//
//   - annotations, editor annotations, x-* keys, unknown keywords, formats
//     nothing checks, and the identifiers ($id, the root's id, $anchor) and
//     $schema are dropped: the library would otherwise walk default and
//     examples looking for identifiers, and identifiers mean nothing to
//     resolution, which never leaves the document;
//   - OpenAPI's "nullable": true adds "null" to "type" (what OpenAPI 3.0.3
//     says it means), and goes;
//   - in a Draft-04, -06 or -07 document, the keywords beside a "$ref"
//     go: those dialects ignore them (the screening warned);
//   - in a 2019-09 or 2020-12 document (modern), dependentRequired and
//     dependentSchemas become dependencies, each unevaluated keyword the
//     allOf entry its plan says (dialect_unevaluated.go), and a "$ref" (or a
//     resolved "$recursiveRef"/"$dynamicRef") beside other keywords one
//     more allOf entry, {"$ref": R}: there the siblings apply.
//
// A dropped key that holds a schema some "$ref" names (a vendor container
// of definitions, a sibling of a Draft-07 "$ref") is kept as a skeleton
// holding only the way to those schemas, so that every schema keeps its
// pointer. Those schemas are prepared too, and returned: adapt and the
// meta-schema check must see them as well.
func prepare(doc any, sc *screened) []detachedSchema {
	p := &preparer{d: sc.dialect, targets: sc.targets, needed: map[string]bool{}, ecma: map[string]bool{}, uneval: sc.uneval}
	for _, src := range sc.ecma {
		p.ecma[src] = true
	}
	for t := range sc.targets {
		for i := len(t); i > 0; i = strings.LastIndexByte(t[:i], '/') {
			p.needed[t[:i]] = true
		}
	}
	p.node(doc, "")
	for i := 0; i < len(p.detached); i++ {
		p.node(p.detached[i].node, p.detached[i].ptr)
	}
	return p.detached
}

// detachedSchema is a schema kept inside a dropped key, and its pointer.
type detachedSchema struct {
	node any
	ptr  string
}

type preparer struct {
	d        dialect
	targets  map[string]bool // pointers named by a "$ref"
	needed   map[string]bool // those and every pointer above them
	ecma     map[string]bool // patterns only the ECMAScript engine runs
	uneval   map[string]unevalPlan
	detached []detachedSchema
}

func (p *preparer) node(node any, ptr string) {
	obj, ok := node.(map[string]any)
	if !ok {
		return
	}
	if n, _ := obj["nullable"].(bool); n && obj["type"] != nil {
		obj["type"] = withNull(obj["type"])
	}
	_, hasRef := obj["$ref"]
	for k, v := range obj {
		kind, known := kindAt(k, ptr, p.d)
		drop := !known || kind == kwAnnotation || annotations[k] || kind == kwID || kind == kwAnchor ||
			kind == kwDynamicAnchor || kind == kwSchemaURI || kind == kwNullable ||
			(kind == kwFormat && !formatSet[asString(v)]) ||
			(hasRef && !p.d.modern() && k != "$ref" && kind != kwDefinitions)
		if !drop {
			continue
		}
		if kp := ptr + "/" + escapePointer(k); p.needed[kp] {
			obj[k] = p.prune(v, kp)
		} else {
			delete(obj, k)
		}
	}
	if src, ok := obj["pattern"].(string); ok && p.ecma[src] {
		// the library runs ECMAScript patterns as a format (ecma.go)
		delete(obj, "pattern")
		if _, has := obj["format"]; has {
			all, _ := obj["allOf"].([]any)
			obj["allOf"] = append(all, map[string]any{"format": ecmaFormat + src})
		} else {
			obj["format"] = ecmaFormat + src
		}
	}
	eachSubschemaAt(obj, ptr, p.node)
	if e, has := obj["enum"]; has && p.d.modern() {
		obj["enum"] = distinct(e)
	}
	if values := setEnum(obj["enum"]); values != nil {
		// checked as a set (compile_enumset.go)
		delete(obj, "enum")
		appendAllOf(obj, map[string]any{"type": "string", "format": enumSetName(values)})
	}
	if p.d.modern() {
		p.dependents(obj, ptr)
		p.unevaluated(obj, ptr)
		p.refs(obj)
	}
}

// dependents turns dependentSchemas and dependentRequired into
// dependencies (a name both list goes to an allOf entry of its own).
func (p *preparer) dependents(obj map[string]any, ptr string) {
	ds, hasDS := obj["dependentSchemas"].(map[string]any)
	dr, hasDR := obj["dependentRequired"].(map[string]any)
	if !hasDS && !hasDR {
		return
	}
	deps := maps.Clone(ds)
	if deps == nil {
		deps = map[string]any{}
	}
	for _, name := range sortedKeys(dr) {
		if _, both := deps[name]; both {
			appendAllOf(obj, map[string]any{"dependencies": map[string]any{name: dr[name]}})
		} else {
			deps[name] = dr[name]
		}
	}
	obj["dependencies"] = deps
	delete(obj, "dependentRequired")
	if !p.needed[ptr+"/dependentSchemas"] {
		delete(obj, "dependentSchemas")
	}
}

// unevaluated replaces each unevaluated keyword by the allOf entry its
// plan makes (nothing when every member is evaluated anyway). A schema a
// reference names inside it stays where it is, and the entry refers to it.
func (p *preparer) unevaluated(obj map[string]any, ptr string) {
	for _, k := range []string{"unevaluatedProperties", "unevaluatedItems"} {
		kp := ptr + "/" + k
		u, has := obj[k]
		plan, planned := p.uneval[kp]
		if !has || !planned {
			continue
		}
		if !p.needed[kp] {
			delete(obj, k)
		} else if _, isBool := u.(bool); !isBool {
			u = map[string]any{"$ref": canonicalRef(kp)}
		}
		if !plan.set.all {
			appendAllOf(obj, unevaluatedEntry(plan, u))
		}
	}
}

// refs makes the references of a modern schema beside other keywords
// allOf entries, and a lone "$recursiveRef"/"$dynamicRef" (resolved) a
// "$ref".
func (p *preparer) refs(obj map[string]any) {
	var refs []string
	others := false
	for k := range obj {
		switch {
		case k == "$ref" || k == "$recursiveRef" || k == "$dynamicRef":
			refs = append(refs, k)
		case keywords[k] != kwDefinitions:
			others = true
		}
	}
	if len(refs) == 1 && !others {
		obj["$ref"] = obj[refs[0]]
		if refs[0] != "$ref" {
			delete(obj, refs[0])
		}
		return
	}
	sort.Strings(refs)
	for _, k := range refs {
		appendAllOf(obj, map[string]any{"$ref": obj[k]})
		delete(obj, k)
	}
}

// appendAllOf adds an entry to a schema's allOf.
func appendAllOf(obj map[string]any, entry map[string]any) {
	all, _ := obj["allOf"].([]any)
	obj["allOf"] = append(all, entry)
}

// fromDraft04 rewrites Draft-04's boolean exclusiveMaximum and
// exclusiveMinimum, in a meta-validated Draft-04 schema and the schemas in
// it, as the Draft-07 keywords they mean (exclusiveFlags).
func fromDraft04(node any, ptr string) {
	obj, ok := node.(map[string]any)
	if !ok {
		return
	}
	exclusiveFlags(obj)
	eachSubschemaAt(obj, ptr, fromDraft04)
}

// exclusiveFlags rewrites one Draft-04 schema object's flags:
// {"maximum": M, "exclusiveMaximum": true} is {"exclusiveMaximum": M};
// false, and a flag without its bound (which the meta-schema refuses),
// mean nothing.
func exclusiveFlags(obj map[string]any) {
	for _, b := range []string{"maximum", "minimum"} {
		flag := "exclusive" + strings.ToUpper(b[:1]) + b[1:]
		on, isBool := obj[flag].(bool)
		if !isBool {
			continue
		}
		delete(obj, flag)
		if bound, has := obj[b]; has && on {
			obj[flag] = bound
			delete(obj, b)
		}
	}
}

// prune keeps of a dropped value only the way to the schemas references
// name (true in place of array entries that lead nowhere, so that indexes
// hold and a list of schemas stays one), and sets those schemas aside to
// be prepared.
func (p *preparer) prune(v any, ptr string) any {
	if p.targets[ptr] {
		p.detached = append(p.detached, detachedSchema{v, ptr})
		return v
	}
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			if kp := ptr + "/" + escapePointer(k); p.needed[kp] {
				out[k] = p.prune(e, kp)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = true
			if ip := ptr + "/" + strconv.Itoa(i); p.needed[ip] {
				out[i] = p.prune(e, ip)
			}
		}
		return out
	}
	return nil
}

// withNull adds "null" to a "type" value (absent: nothing to add).
func withNull(t any) any {
	switch t := t.(type) {
	case string:
		if t == "null" {
			return t
		}
		return []any{t, "null"}
	case []any:
		for _, e := range t {
			if e == "null" {
				return t
			}
		}
		return append(t[:len(t):len(t)], "null")
	}
	return t
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

// eachSubschemaAt calls f on every schema directly inside a screened
// schema object, with its pointer: the values of its schema keywords,
// definitions included.
func eachSubschemaAt(obj map[string]any, ptr string, f func(any, string)) {
	for k, v := range obj {
		kp := ptr + "/" + escapePointer(k)
		switch keywords[k] {
		case kwSchema, kwUnevaluated:
			f(v, kp)
		case kwItems, kwSchemaArray:
			if arr, ok := v.([]any); ok {
				for i, sub := range arr {
					f(sub, kp+"/"+strconv.Itoa(i))
				}
			} else {
				f(v, kp)
			}
		case kwProperties, kwPatternProperties, kwDependencies, kwDependentSchemas, kwDefinitions:
			if m, ok := v.(map[string]any); ok {
				for name, sub := range m {
					if _, isArr := sub.([]any); !isArr {
						f(sub, kp+"/"+escapePointer(name))
					}
				}
			}
		}
	}
}

// admitsNumbers reports whether a "type" value (absent = any) lets a JSON
// number through.
func admitsNumbers(t any) bool {
	switch t := t.(type) {
	case nil:
		return true
	case string:
		return t == "number" || t == "integer"
	case []any:
		for _, e := range t {
			if e == "number" || e == "integer" {
				return true
			}
		}
	}
	return false
}

// distinct drops the values of an enum equal to one before them: 2019-09
// and 2020-12 allow them, the library refuses to compile them, and the
// enum means the same without them.
func distinct(v any) any {
	arr, ok := v.([]any)
	if !ok {
		return v
	}
	seen := make(map[string]bool, len(arr))
	out := arr[:0:0]
	for _, e := range arr {
		if k := canonical(e, true); !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}

// positiveZero returns v with every negative zero number replaced by 0.
func positiveZero(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = positiveZero(e)
		}
	case []any:
		for i, e := range t {
			t[i] = positiveZero(e)
		}
	case json.Number:
		if isNegZero(string(t)) {
			return json.Number("0")
		}
	}
	return v
}

// isNegZero reports whether a number literal is a negative zero.
func isNegZero(lit string) bool {
	if len(lit) < 2 || lit[0] != '-' {
		return false
	}
	for _, c := range lit[1:] {
		switch {
		case c == 'e' || c == 'E':
			return true
		case c != '0' && c != '.':
			return false
		}
	}
	return true
}

// discriminate rewrites a oneOf or anyOf whose branches are told apart by
// one property, as catalogue and generated schemas write unions
// ({"properties": {"type": {"const": "http"}, ...}} in every branch, each
// with its own values): the library evaluates every branch of a oneOf
// (and every failing one of an anyOf), creating all their errors, which
// made a 19 KB catalogue value cost it 100 ms and 35 MiB. For an object
// whose discriminator P holds a value of branch k, every other branch
// fails on P, so the union holds exactly when branch k does; so
//
//	{"oneOf": [B1, ..., Bn]}
//
// becomes allOf entries {"if": D_i, "then": B_i}, where D_i is "an object
// whose P is one of branch i's values", and {"if": D_any, "else":
// {"oneOf": [B1, ..., Bn]}}: whatever no D_i selects (not an object, P
// absent or of no branch) gets the union as written, with its verdict and
// errors. The values must be strings (compared exactly, as the library
// does), sets of different branches disjoint, and there must be at least
// three branches.
func (a adapter) discriminate(obj map[string]any, kw string) {
	branches, _ := obj[kw].([]any)
	if len(branches) < 3 {
		return
	}
	prop, sets := a.discriminator(branches)
	if prop == "" {
		return
	}
	dispatch := func(values []any) map[string]any {
		return map[string]any{"type": "object", "required": []any{prop},
			"properties": map[string]any{prop: map[string]any{"enum": values}}}
	}
	all, _ := obj["allOf"].([]any)
	var union []any
	for i, b := range branches {
		all = append(all, map[string]any{"if": dispatch(sets[i]), "then": b})
		union = append(union, sets[i]...)
	}
	all = append(all, map[string]any{"if": dispatch(union), "else": map[string]any{kw: branches}})
	obj["allOf"] = all
	delete(obj, kw)
}

// discriminator finds a property every branch constrains to a "const" or
// "enum" of strings, the branches' values pairwise disjoint.
func (a adapter) discriminator(branches []any) (string, [][]any) {
	props := make([]map[string]any, len(branches))
	for i, b := range branches {
		if props[i] = a.properties(b); props[i] == nil {
			return "", nil
		}
	}
	for _, p := range sortedKeys(props[0]) {
		owner := map[string]bool{}
		sets := make([][]any, len(branches))
		for i := range branches {
			sets[i] = stringValues(props[i][p])
			for _, v := range sets[i] {
				if owner[v.(string)] {
					sets[i] = nil
					break
				}
				owner[v.(string)] = true
			}
			if sets[i] == nil {
				break
			}
		}
		if sets[len(sets)-1] != nil {
			return p, sets
		}
	}
	return "", nil
}

// properties returns the "properties" of a branch, following one "$ref".
func (a adapter) properties(b any) map[string]any {
	m, _ := b.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		u, err := url.Parse(ref)
		if err != nil {
			return nil
		}
		t, _ := lookup(a.root, u.Fragment)
		if m, _ = t.(map[string]any); m != nil && m["$ref"] != nil {
			return nil
		}
	}
	props, _ := m["properties"].(map[string]any)
	return props
}

// stringValues reads a property schema's "const" or "enum" when every
// value is a string (nil otherwise).
func stringValues(s any) []any {
	m, _ := s.(map[string]any)
	var vals []any
	if c, ok := m["const"]; ok {
		vals = []any{c}
	} else if e, ok := m["enum"].([]any); ok {
		vals = e
	}
	for _, v := range vals {
		if _, ok := v.(string); !ok {
			return nil
		}
	}
	if len(vals) == 0 {
		return nil
	}
	return vals
}
