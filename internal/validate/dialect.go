package validate

import "strings"

// Dialects.
//
// A document is read in the dialect its root "$schema" names: Draft-04,
// Draft-06, Draft-07 (also when it names none), 2019-09 or 2020-12. Each
// keyword means what its dialect says: a keyword another dialect has is
// an annotation in this one (Draft-04 has no "const"; Draft-06 no "if"),
// warned, except the few the later dialects removed, which a 2019-09 or
// 2020-12 document would otherwise silently lose. The library compiles
// Draft-07, so what differs is translated exactly (dialect_translate.go,
// dialect_unevaluated.go): Draft-04's boolean exclusiveMaximum/exclusiveMinimum,
// 2019-09's and 2020-12's keywords beside "$ref", dependentRequired,
// dependentSchemas, unevaluatedProperties/unevaluatedItems and
// $recursiveRef/$dynamicRef where their meaning does not depend on the
// path a value took. What cannot be translated exactly is refused, naming
// the keyword.

type dialect uint8

// In the order of publication: a keyword "exists from d on" compares them.
const (
	draft04 dialect = iota + 1
	draft06
	draft07
	draft2019
	draft2020
)

// The "$schema" values of the dialects, each also accepted without its
// trailing "#" (or with one, for the last two).
const (
	Draft04URI   = "http://json-schema.org/draft-04/schema#"
	Draft06URI   = "http://json-schema.org/draft-06/schema#"
	Draft07URI   = "http://json-schema.org/draft-07/schema#"
	Draft2019URI = "https://json-schema.org/draft/2019-09/schema"
	Draft2020URI = "https://json-schema.org/draft/2020-12/schema"
)

var dialectURIs = func() map[string]dialect {
	m := map[string]dialect{}
	for uri, d := range map[string]dialect{Draft04URI: draft04, Draft06URI: draft06, Draft07URI: draft07} {
		m[uri], m[strings.TrimSuffix(uri, "#")] = d, d
	}
	for uri, d := range map[string]dialect{Draft2019URI: draft2019, Draft2020URI: draft2020} {
		m[uri], m[uri+"#"] = d, d
	}
	return m
}()

func (d dialect) String() string {
	switch d {
	case draft04:
		return "Draft-04"
	case draft06:
		return "Draft-06"
	case draft2019:
		return "2019-09"
	case draft2020:
		return "2020-12"
	}
	return "Draft-07"
}

// modern reports whether keywords beside "$ref" apply (2019-09 on).
func (d dialect) modern() bool { return d >= draft2019 }

// dialectOf reads a "$schema" value: Draft-07 when absent.
func dialectOf(v any) (dialect, bool) {
	if v == nil {
		return draft07, true
	}
	str, _ := v.(string)
	d, ok := dialectURIs[str]
	if !ok {
		return draft07, false
	}
	return d, true
}

// span is the dialects a keyword exists in, from the first to the last.
type span struct{ from, to dialect }

// keywordSpans are the keywords that some dialects lack; every other
// keyword of the table (keywords) exists in all of them.
var keywordSpans = map[string]span{
	"id": {draft04, draft04}, "$id": {draft06, draft2020},
	"const": {draft06, draft2020}, "contains": {draft06, draft2020}, "propertyNames": {draft06, draft2020},
	"if": {draft07, draft2020}, "then": {draft07, draft2020}, "else": {draft07, draft2020},
	"$anchor": {draft2019, draft2020}, "dependencies": {draft04, draft07}, "additionalItems": {draft04, draft2019},
	"dependentRequired": {draft2019, draft2020}, "dependentSchemas": {draft2019, draft2020},
	"unevaluatedProperties": {draft2019, draft2020}, "unevaluatedItems": {draft2019, draft2020},
	"minContains": {draft2019, draft2020}, "maxContains": {draft2019, draft2020}, "$vocabulary": {draft2019, draft2020},
	"$recursiveRef": {draft2019, draft2019}, "$recursiveAnchor": {draft2019, draft2019},
	"$dynamicRef": {draft2020, draft2020}, "$dynamicAnchor": {draft2020, draft2020}, "prefixItems": {draft2020, draft2020},
}

// inDialect reports whether keyword k exists in dialect d. Draft-06 and
// Draft-07 documents may name themselves with "id" at the root, as
// Draft-04 ones do.
func inDialect(k, ptr string, d dialect) bool {
	sp, ok := keywordSpans[k]
	if !ok {
		return true
	}
	if k == "id" && ptr == "" && (d == draft06 || d == draft07) {
		return true
	}
	return d >= sp.from && d <= sp.to
}

// dialectsOf names the dialects a keyword exists in, for messages.
func dialectsOf(k string) string {
	sp := keywordSpans[k]
	switch {
	case sp.from == sp.to:
		return sp.from.String()
	case sp.to == draft2020:
		return "from " + sp.from.String() + " on"
	}
	return sp.from.String() + " to " + sp.to.String()
}

// otherDialect handles a keyword of another dialect than the document's
// (false: k is not one): a keyword the later dialects removed is refused
// in a 2019-09 or 2020-12 document, where ignoring it would silently drop
// an assertion its author meant; any other is an annotation, warned.
func (s *screener) otherDialect(k, ptr, kp string) (bool, error) {
	sp, ok := keywordSpans[k]
	if !ok || inDialect(k, ptr, s.dialect) {
		return false, nil
	}
	if s.dialect.modern() && sp.to < s.dialect && k != "id" {
		return true, fail(kp, "%q is not a %s keyword (it exists %s), so this document is refused rather than read without it%s",
			k, s.dialect, dialectsOf(k), replacement[k])
	}
	s.warn(kp, k, "%q is not a %s keyword (it exists %s), so it is ignored, as %s says; declare a dialect that has it to have it checked",
		k, s.dialect, dialectsOf(k), s.dialect)
	return true, nil
}

// replacement says what replaced a removed keyword.
var replacement = map[string]string{
	"dependencies":    "; write dependentRequired (lists of names) or dependentSchemas (schemas)",
	"additionalItems": "; in 2020-12 a list of schemas is prefixItems and items applies to the rest",
	"$recursiveRef":   "; in 2020-12 write $dynamicRef",
}

// untranslatable are the keywords chatd does not check in any dialect,
// with why: a document that uses one is refused, naming it.
var untranslatable = map[string]string{
	"minContains": "it counts the items that match \"contains\", which Draft-07 cannot express",
	"maxContains": "it counts the items that match \"contains\", which Draft-07 cannot express",
	"$vocabulary": "it chooses the vocabularies of a meta-schema",
	"prefixItems": "its translation into Draft-07's list form of items is not implemented",
}

// Untranslatable lists the keywords refused in every dialect that has them.
var Untranslatable = sortedKeysOf(untranslatable)

func untranslatableError(kp, k string, d dialect) error {
	return fail(kp, "%q cannot be checked exactly by this validator (%s), so this %s document is refused", k, untranslatable[k], d)
}
