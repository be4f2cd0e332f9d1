package validate

import (
	"strconv"
	"strings"
)

// ToolSchema decodes an admitted schema document for embedding at the JSON
// Pointer at of a larger document, such as the parameters of the
// finalizer tool ("/properties/output"): every "$ref" is rewritten to the
// canonical pointer under at, so that it resolves inside what the provider
// receives (a "$recursiveRef" or "$dynamicRef" becomes the "$ref" it
// resolves to), and the identifiers ($id, Draft-04's id, the root's id,
// $anchor, $dynamicAnchor, $recursiveAnchor) and $schema, which would
// change how references resolve or mean nothing below a root, are
// dropped, and so are unknown keywords and annotations named as such
// (providerDrops; a skeleton stays where a reference names a schema inside
// one). Draft-04's boolean exclusiveMaximum/exclusiveMinimum take the form
// later dialects (and providers) read. Everything else is kept as the
// caller wrote it; numbers are json.Number.
func ToolSchema(raw []byte, at string) (map[string]any, error) {
	doc, err := Decode(raw, schemaLimits)
	if err != nil {
		return nil, err
	}
	sc, err := screen(doc)
	if err != nil {
		return nil, err
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, &ScanError{Detail: "must be a JSON object"}
	}
	for _, r := range sc.refs {
		r.node[r.key] = canonicalRef(at + r.target)
	}
	for _, r := range sc.refs {
		// a provider knows "$ref" alone; the dynamic ones are resolved
		if _, has := r.node["$ref"]; r.key != "$ref" && !has {
			r.node["$ref"] = r.node[r.key]
			delete(r.node, r.key)
		} else if r.key != "$ref" {
			all, _ := r.node["allOf"].([]any)
			r.node["allOf"] = append(all, map[string]any{"$ref": r.node[r.key]})
			delete(r.node, r.key)
		}
	}
	delete(root, "id")
	needed := withAncestors(sc.targets)
	for ptr, node := range sc.positions {
		obj, ok := node.(map[string]any)
		if !ok {
			continue
		}
		for k := range obj {
			if kind, known := kindAt(k, ptr, sc.dialect); known && (kind == kwID || kind == kwAnchor || kind == kwDynamicAnchor) {
				delete(obj, k)
			}
		}
		if sc.dialect == draft04 {
			exclusiveFlags(obj) // what every provider reads as Draft-04 means it
		}
		delete(obj, "$id")
		delete(obj, "$schema")
		for k, v := range obj {
			if !providerDrops(k, v, ptr, sc.dialect) {
				continue
			}
			if kp := ptr + "/" + escapePointer(k); needed[kp] {
				obj[k] = skeleton(v, kp, needed, sc.positions)
			} else {
				delete(obj, k)
			}
		}
	}
	return root, nil
}

// providerDrops reports whether a key at a schema position is left out of
// what the provider receives: unknown keywords, x-* and editor annotations
// (and a "deprecated" that is not a boolean) mean nothing to a provider's
// schema handling, and may hold data shaped like schemas, "$ref" included,
// which a provider could take for references.
func providerDrops(k string, v any, ptr string, d dialect) bool {
	kind, known := kindAt(k, ptr, d)
	_, isBool := v.(bool)
	return !known || kind == kwAnnotation || (k == "deprecated" && !isBool)
}

// skeleton keeps of a dropped value only the way to the schemas references
// name (true in place of array entries that lead nowhere, so that indexes
// hold); the schemas themselves are kept as they are.
func skeleton(v any, ptr string, needed map[string]bool, positions map[string]any) any {
	if _, ok := positions[ptr]; ok {
		return v
	}
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			if kp := ptr + "/" + escapePointer(k); needed[kp] {
				out[k] = skeleton(e, kp, needed, positions)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = true
			if ip := ptr + "/" + strconv.Itoa(i); needed[ip] {
				out[i] = skeleton(e, ip, needed, positions)
			}
		}
		return out
	}
	return nil
}

// withAncestors returns the pointers given and every pointer above them.
func withAncestors(ptrs map[string]bool) map[string]bool {
	out := map[string]bool{}
	for t := range ptrs {
		for i := len(t); i > 0; i = strings.LastIndexByte(t[:i], '/') {
			out[t[:i]] = true
		}
	}
	return out
}
