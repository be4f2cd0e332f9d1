package validate

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Bundled documents.
//
// A schema may name parts of itself: "$id" below the root makes that
// subschema a resource of its own (a bundled document: "$ref" beside it
// and below it resolve against its URI), a plain-name fragment ("$id":
// "#foo" in Draft-07, "$anchor": "foo" in 2020-12) names one location.
// They are resolved here, inside the document, and never fetched: every
// reference becomes a JSON Pointer into the whole document, and every
// identifier is dropped from what the library compiles and what the
// provider receives. A reference whose document is not one of these
// resources refers to another document, and is refused.

// docBase is the base URI of a document whose root names none: relative
// identifiers and references resolve against it, so that "a.json#/x" finds
// a subschema whose "$id" is "a.json". Nothing is ever loaded from it.
var docBase = &url.URL{Scheme: "https", Host: "schema.chatd.invalid", Path: "/root.json"}

// identify reads the identifier of the schema object at ptr, registers
// what it names and returns the base URI for the schema and those below
// it. ignored: beside a Draft-07 "$ref", where "$id" is ignored.
func (s *screener) identify(obj map[string]any, ptr string, base *url.URL, ignored bool) (*url.URL, error) {
	base, err := s.identifier(obj, ptr, base, ignored)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"$anchor", "$dynamicAnchor"} {
		a, has := obj[k]
		if !has || !inDialect(k, ptr, s.dialect) {
			continue
		}
		name, isStr := a.(string)
		if !isStr || !anchorName(name) {
			return nil, fail(ptr+"/"+k, "must be a plain name (a letter or underscore, then letters, digits, \"-\", \"_\", \".\")")
		}
		if err := s.anchorAt(base, name, ptr+"/"+k); err != nil {
			return nil, err
		}
		if k == "$dynamicAnchor" {
			s.dynamic[name] = append(s.dynamic[name], ptr)
		}
	}
	if a, has := obj["$recursiveAnchor"]; has && inDialect("$recursiveAnchor", ptr, s.dialect) {
		on, isBool := a.(bool)
		if !isBool {
			return nil, fail(ptr+"/$recursiveAnchor", "must be a boolean")
		}
		if on && s.resources[base.String()] == ptr {
			s.recursive[ptr] = true
		}
	}
	return base, nil
}

// identifier reads "$id" (at the root, "id" too; in Draft-04, "id").
func (s *screener) identifier(obj map[string]any, ptr string, base *url.URL, ignored bool) (*url.URL, error) {
	key := "$id"
	if s.dialect == draft04 {
		key = "id"
	}
	raw, ok := obj[key]
	if !ok && ptr == "" && (s.dialect == draft06 || s.dialect == draft07) {
		key = "id"
		raw, ok = obj[key]
	}
	if !ok || (ignored && ptr != "") {
		return base, nil
	}
	kp := ptr + "/" + key
	str, isStr := raw.(string)
	if !isStr {
		return nil, fail(kp, "must be a string")
	}
	u, err := url.Parse(str)
	if err != nil {
		return nil, fail(kp, "is not a valid URI reference")
	}
	abs := base.ResolveReference(u)
	frag := abs.Fragment
	abs.Fragment, abs.RawFragment = "", ""
	if u.Scheme != "" || u.Host != "" || u.Path != "" || u.Opaque != "" || u.RawQuery != "" {
		if prev, dup := s.resources[abs.String()]; dup && prev != ptr {
			return nil, fail(kp, "%q names the same resource as %s", str, displayPointer(prev))
		}
		s.resources[abs.String()] = ptr
		base = abs
	}
	switch {
	case frag == "":
	case s.dialect.modern():
		return nil, fail(kp, "in %s, $id must not have a fragment; name a location with $anchor", s.dialect)
	case frag[0] == '/':
		// generators write "$id": "#/properties/a"; it names nothing
		s.warn(kp, "$id", "%q is ignored: a JSON Pointer fragment is not an identifier", str)
	default:
		if err := s.anchorAt(base, frag, kp); err != nil {
			return nil, err
		}
	}
	return base, nil
}

// anchorAt registers a plain-name fragment of the resource base, naming
// the schema that declares it (kp is the declaring keyword's pointer).
func (s *screener) anchorAt(base *url.URL, name, kp string) error {
	key := base.String() + "#" + name
	ptr := kp[:strings.LastIndexByte(kp, '/')]
	if prev, dup := s.anchors[key]; dup && prev != ptr {
		return fail(kp, "the anchor %q is declared twice (also at %s)", name, displayPointer(prev))
	}
	s.anchors[key] = ptr
	return nil
}

// anchorName reports whether name is a plain-name fragment (XML NCName
// syntax, as 2020-12 requires of $anchor).
func anchorName(name string) bool {
	for i, c := range name {
		switch {
		case c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
		case i > 0 && (c == '-' || c == '.' || c >= '0' && c <= '9'):
		default:
			return false
		}
	}
	return name != ""
}

// resolve turns a "$ref" met at a schema whose base URI is base into a
// canonical JSON Pointer into the whole document, or says why it cannot.
func (s *screener) resolve(ref string, base *url.URL) (string, string) {
	u, err := url.Parse(ref)
	if err != nil {
		return "", "is not a valid URI reference"
	}
	abs := base.ResolveReference(u)
	frag := abs.Fragment
	abs.Fragment, abs.RawFragment = "", ""
	root, ok := s.resources[abs.String()]
	if !ok {
		return "", "refers to another document; only references within this schema (\"#/...\", or to a subschema's \"$id\") are supported, and nothing is ever loaded"
	}
	if frag != "" && frag[0] != '/' {
		target, ok := s.anchors[abs.String()+"#"+frag]
		if !ok {
			return "", "names the anchor \"" + frag + "\", which no schema in this document declares"
		}
		return target, ""
	}
	toks, ok := pointerTokens(frag)
	if !ok {
		return "", "is not a valid JSON Pointer (\"~\" must be followed by 0 or 1)"
	}
	var b strings.Builder
	b.WriteString(root)
	for _, t := range toks {
		b.WriteByte('/')
		b.WriteString(escapePointer(t))
	}
	return b.String(), ""
}

// vendorTarget screens the value a "$ref" names when it is not at a schema
// position: a location under an unknown keyword or an extension ("x-...",
// an editor annotation) is a schema if the reference says so, as the
// specification allows; data of a known keyword ("#/properties",
// "#/required/0", "#/enum/1") is not.
func (s *screener) vendorTarget(doc any, target, kp, ref string) error {
	// owner: the deepest schema position above the target
	toks, _ := pointerTokens(target)
	owner, i, at := "", 0, ""
	for j, t := range toks[:len(toks)-1] {
		at += "/" + escapePointer(t)
		if _, ok := s.positions[at]; ok {
			owner, i = at, j+1
		}
	}
	node, exists := lookup(doc, target)
	if !exists {
		return fail(kp, "%q points to nothing in this schema", ref)
	}
	k := toks[i]
	kind, known := s.kindAt(k, owner)
	_, isObj := s.positions[owner].(map[string]any)
	vendor := isObj && (!known || (kind == kwAnnotation && !annotations[k]) || editorAnnotation[k])
	switch node.(type) {
	case map[string]any, bool:
	default:
		vendor = false
	}
	if !vendor {
		return fail(kp, "%q points to %s, which is not a schema", ref, displayPointer(target))
	}
	s.detached = append(s.detached, target)
	return s.schema(node, target, s.depth[owner]+1, s.bases[owner])
}

// resolveDynamic turns a "$recursiveRef" or "$dynamicRef" whose initial
// (static) target is known into the schema it names wherever it applies,
// or says why that depends on the path a value took. The lookup lands on
// the outermost schema resource, in the dynamic scope, that declares the
// anchor. Every validation starts at the document's root resource, so if
// that declares it, it is the outermost every time; otherwise, if a single
// resource declares it, that one, which the initial target is in, is.
func (s *screener) resolveDynamic(r *refSite, static string) (string, string) {
	byResource := map[string]string{} // resource root pointer → the declaring schema
	switch r.key {
	case "$recursiveRef":
		if !s.recursive[static] {
			return static, "" // no "$recursiveAnchor": true there: static
		}
		for p := range s.recursive {
			byResource[p] = p
		}
	default:
		u, err := url.Parse(r.ref)
		if err != nil || u.Fragment == "" || u.Fragment[0] == '/' || !slices.Contains(s.dynamic[u.Fragment], static) {
			return static, "" // not a $dynamicAnchor: static
		}
		for _, p := range s.dynamic[u.Fragment] {
			byResource[s.resources[s.bases[p].String()]] = p
		}
	}
	if p, ok := byResource[""]; ok {
		return p, ""
	}
	if len(byResource) == 1 {
		return static, ""
	}
	declared := sortedKeysOf(byResource)
	return "", fmt.Sprintf("resolves to %s or %s depending on the path by which a value reaches it, which cannot be checked exactly; "+
		"declare the anchor in the root resource, or in one resource only", displayPointer(byResource[declared[0]]), displayPointer(byResource[declared[1]]))
}
