package validate

import (
	"fmt"
	"strings"
)

// Schemas as written.
//
// The specification makes a keyword that a validator does not know an
// annotation: it is collected and ignored. chatd does the same, as the
// mature validators do, so that catalogue and generated schemas (vendor and
// editor vocabularies, OpenAPI's keywords) are admitted as written, and it
// says what it ignored: each unknown keyword and format, and each keyword
// beside a Draft-07 "$ref" (where the specification ignores it), is a
// Warning that the create/send/edit response lists. Only what is surely a
// mistake is refused: an unknown keyword within a small edit distance of a
// validation keyword ("requird", "minLenght"), which would silently drop
// an assertion.

// Warning is something admitted but not checked. Location is the JSON
// Pointer of the keyword in the schema.
type Warning struct {
	Location string `json:"location"`
	Keyword  string `json:"keyword"`
	Message  string `json:"message"`
}

// MaxWarnings bounds the warnings kept for one schema: the first ones, in
// document order.
const MaxWarnings = 32

// validationKeywords are the Draft-07 keywords whose loss would change a
// verdict: an unknown keyword close to one of them is refused as a typo.
var validationKeywords = []string{
	"$ref", "$defs", "definitions", "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum",
	"minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "format", "items", "additionalItems",
	"maxItems", "minItems", "uniqueItems", "contains", "maxProperties", "minProperties", "required",
	"properties", "patternProperties", "additionalProperties", "dependencies", "propertyNames",
	"if", "then", "else", "allOf", "anyOf", "oneOf", "not",
}

// typoOf returns the validation keyword an unknown keyword is probably a
// misspelling of, or "". Letter case is ignored; beyond that, keywords of
// five letters or more allow one edit (an insertion, a deletion, a
// substitution or two adjacent letters swapped), those of nine or more two.
// Shorter ones ("if", "not", "type", "$ref") only differ in case: too many
// ordinary words are one edit away from them.
func typoOf(k string) string {
	lk := strings.ToLower(k)
	best, bestD := "", 3
	for _, w := range validationKeywords {
		lw := strings.ToLower(w)
		if lk == lw {
			return w
		}
		allowed := 0
		switch {
		case len(w) >= 9:
			allowed = 2
		case len(w) >= 5:
			allowed = 1
		}
		if allowed == 0 || abs(len(lk)-len(lw)) > allowed {
			continue
		}
		if d := editDistance(lk, lw); d <= allowed && d < bestD {
			best, bestD = w, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of two short
// strings: insertions, deletions, substitutions and swaps of adjacent
// bytes, each costing one.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// warn records a warning, keeping the first MaxWarnings.
func (s *screener) warn(ptr, keyword, format string, args ...any) {
	if len(s.warnings) < MaxWarnings {
		s.warnings = append(s.warnings, Warning{Location: ptr, Keyword: keyword, Message: fmt.Sprintf(format, args...)})
	}
}

// namedAnnotation says why a key's name marks it as an annotation, or "":
// a leading "_" (how authors and tools disable a keyword: "_format",
// "_uniqueItems"), an "x-" prefix (OpenAPI's extensions) or a comment
// ("//", "#...", any name with "comment" in it). Nobody types these by
// accident, so they are never taken for a typo of a keyword.
func namedAnnotation(k string) string {
	lk := strings.ToLower(k)
	switch {
	case strings.HasPrefix(k, "_"):
		return `its name starts with "_"`
	case strings.HasPrefix(lk, "x-"):
		return `its name starts with "x-"`
	case strings.HasPrefix(k, "//"), strings.HasPrefix(k, "#"), strings.Contains(lk, "comment"):
		return "its name makes it a comment"
	}
	return ""
}

// unknownKeyword handles a key at a schema position that is no keyword:
// refused as a typo when it is close to a validation keyword, otherwise
// admitted as an annotation, with a warning.
func (s *screener) unknownKeyword(k, kp string) error {
	if w := typoOf(k); w != "" {
		return fail(kp, "unknown keyword %q: did you mean %q? (unknown keywords are ignored as annotations, "+
			"but one this close to a validation keyword is refused as a likely typo)", k, w)
	}
	s.warn(kp, k, "unknown keyword %q is ignored (an annotation; nothing is validated by it)", k)
	return nil
}

// assertsBesideRef reports whether a keyword beside a Draft-07 "$ref"
// would have asserted or applied something: those are ignored there, with
// a warning. Annotations, containers of definitions and $schema are not
// ignored in any meaningful sense.
func assertsBesideRef(k string, kind kwKind) bool {
	return k != "$ref" && kind != kwAnnotation && !annotations[k] && kind != kwDefinitions && kind != kwSchemaURI
}
