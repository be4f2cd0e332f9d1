package validate

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/xeipuuv/gojsonschema"
)

// ValueError is one validation failure. Location is a JSON Pointer into
// the value ("" is the whole value); Keyword is the schema keyword that
// failed (Draft-07 spelling: "type", "required", "minLength", ...) or, for a
// value refused before validation, one of the codes below.
type ValueError struct {
	Location string `json:"location"`
	Keyword  string `json:"keyword"`
	Message  string `json:"message"`
}

// Codes of values refused before the schema is applied (ValueError.Keyword).
const (
	CodeInvalidJSON = "invalid_json" // not one JSON value (syntax, trailing data, invalid UTF-8)
	CodeTooLarge    = "too_large"    // beyond the value limits: bytes, nesting, values, key or number length
	CodeUnstorable  = "unstorable"   // PostgreSQL jsonb could not hold it exactly: U+0000, lone surrogates, duplicate keys, numbers
	CodeBudget      = "budget"       // too expensive to validate (TooExpensive)
	CodeInternal    = "internal"     // the validator failed
)

// ScanCode classifies a refusal of the strict scan (Decode) as one of
// CodeInvalidJSON, CodeTooLarge or CodeUnstorable, from its detail: the
// scan's messages start with what went wrong (TestScanCode covers each).
func ScanCode(detail string) string {
	switch {
	case strings.HasPrefix(detail, "invalid JSON"), strings.HasPrefix(detail, "unexpected data after"),
		strings.HasPrefix(detail, "invalid UTF-8"):
		return CodeInvalidJSON
	case strings.HasPrefix(detail, "document is "), strings.HasPrefix(detail, "more than "),
		strings.HasPrefix(detail, "nested deeper"), strings.HasPrefix(detail, "object key is "),
		strings.HasPrefix(detail, "number literal is "):
		return CodeTooLarge
	default:
		return CodeUnstorable
	}
}

// Result of validating a value.
type Result struct {
	Errors []ValueError // at most MaxReportedErrors
	Total  int          // all errors found
}

// Valid reports whether the value satisfied the schema.
func (r Result) Valid() bool { return r.Total == 0 }

// Summary renders the errors for a person or a model: at most
// MaxReportedErrors lines of at most a few hundred bytes, then the count
// of the others.
func (r Result) Summary() string {
	var b strings.Builder
	for i, e := range r.Errors {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(displayPointer(e.Location))
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if r.Total > len(r.Errors) {
		fmt.Fprintf(&b, " (and %d more)", r.Total-len(r.Errors))
	}
	return b.String()
}

// TooExpensive is the message for a value whose predicted validation cost
// exceeds the budget.
var TooExpensive = fmt.Sprintf("the value is too expensive to validate against this schema "+
	"(its worst-case validation work is estimated above the budget of %d ms or %d MiB); send a smaller value",
	int(BudgetTime/1e6), BudgetBytes>>20)

func failure(location, keyword, message string) Result {
	return Result{Errors: []ValueError{{Location: location, Keyword: keyword, Message: message}}, Total: 1}
}

// Validate checks a raw value: the strict scan (ValueLimits), the cost
// budget and the exact-comparison guard (cost.go), then the library. A value refused before validation
// comes back as a single error at the location at fault.
func (s *Schema) Validate(raw []byte) (res Result) {
	v, err := decodeTree(raw, valueLimits)
	if err != nil {
		if se, ok := err.(*ScanError); ok {
			return failure(se.Pointer, ScanCode(se.Detail), se.Detail)
		}
		return failure("", CodeInvalidJSON, err.Error())
	}
	compiled, model, matchNs := s.compiled, s.model, 0.0
	if len(s.ecmaKeys) > 0 {
		compiled, model, matchNs, err = s.specialize(v)
		if errors.Is(err, errKeysOverBudget) {
			return failure("", CodeBudget, TooExpensive)
		}
		if err != nil {
			return failure("", CodeInternal, err.Error())
		}
	}
	est := estimateWith(model, v, len(raw), matchNs)
	if est.over {
		return failure("", CodeBudget, TooExpensive)
	}
	if est.imprecise != nil {
		return Result{Errors: []ValueError{*est.imprecise}, Total: 1}
	}
	return s.run(compiled, v.val)
}

// libraryRuns counts value validations handed to the library (tests check
// that refused values never reach it).
var libraryRuns atomic.Int64

// run calls the library on a decoded value. recover() is the second guard
// behind the scan: no input known to us panics it.
func (s *Schema) run(compiled *gojsonschema.Schema, doc any) (res Result) {
	libraryRuns.Add(1)
	slots <- struct{}{}
	defer func() { <-slots }()
	defer func() {
		if r := recover(); r != nil {
			res = failure("", CodeInternal, "the value cannot be validated (internal error in the validator)")
		}
	}()
	failed := ecmaFailures(s.ecma)
	out, err := compiled.Validate(docLoader{doc})
	if err != nil {
		return failure("", CodeInternal, "the value cannot be validated: "+err.Error())
	}
	if ecmaFailures(s.ecma) != failed {
		// an ECMAScript match ran out of time or stack (here, or in a
		// concurrent validation of the same pattern): no verdict
		return failure("", CodeBudget, TooExpensive)
	}
	return convert(out.Errors())
}

// convert keeps the first MaxReportedErrors errors, rendered by us (not by
// ResultError.String, which marshals the offending value). The allOf and
// if/then/else summary errors are dropped: they always come with the
// errors of the branch that failed, which say more.
func convert(errs []gojsonschema.ResultError) Result {
	var r Result
	keepSummaries := true
	for _, e := range errs {
		if !isSummary(e.Type()) {
			keepSummaries = false
			break
		}
	}
	for _, e := range errs {
		if !keepSummaries && isSummary(e.Type()) {
			continue
		}
		r.Total++
		if len(r.Errors) < MaxReportedErrors {
			r.Errors = append(r.Errors, ValueError{Location: location(e), Keyword: keywordOf(e), Message: describe(e)})
		}
	}
	return r
}

func isSummary(t string) bool {
	return t == "number_all_of" || t == "condition_then" || t == "condition_else"
}

// location turns the library's context into a JSON Pointer. Object keys
// never contain U+0000 (the scan refuses it), so it is a safe separator.
func location(e gojsonschema.ResultError) string {
	var b strings.Builder
	if ctx := e.Context(); ctx != nil {
		segs := strings.Split(ctx.String("\x00"), "\x00")
		for _, s := range segs[1:] { // segs[0] is "(root)"
			b.WriteByte('/')
			b.WriteString(escapePointer(s))
		}
	}
	if e.Type() == "additional_property_not_allowed" {
		b.WriteByte('/')
		b.WriteString(escapePointer(detail(e, "property")))
	}
	return b.String()
}

func detail(e gojsonschema.ResultError, key string) string {
	v, ok := e.Details()[key]
	if !ok {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// errorKeywords maps the library's error types to the Draft-07 keyword that
// failed.
var errorKeywords = map[string]string{
	"false": "false", "required": "required", "invalid_type": "type",
	"number_any_of": "anyOf", "number_one_of": "oneOf", "number_all_of": "allOf", "number_not": "not",
	"condition_then": "then", "condition_else": "else", "missing_dependency": "dependencies",
	"const": "const", "enum": "enum", "array_no_additional_items": "additionalItems",
	"array_min_items": "minItems", "array_max_items": "maxItems", "unique": "uniqueItems", "contains": "contains",
	"array_min_properties": "minProperties", "array_max_properties": "maxProperties",
	"additional_property_not_allowed": "additionalProperties", "invalid_property_name": "propertyNames",
	"string_gte": "minLength", "string_lte": "maxLength", "pattern": "pattern", "format": "format",
	"multiple_of": "multipleOf", "number_gte": "minimum", "number_gt": "exclusiveMinimum",
	"number_lte": "maximum", "number_lt": "exclusiveMaximum",
}

// keywordOf is the Draft-07 keyword that failed: "pattern" for an
// ECMAScript pattern and "enum" for an enum checked as a set, which the
// library runs as formats.
func keywordOf(e gojsonschema.ResultError) string {
	if e.Type() == "format" && strings.HasPrefix(detail(e, "format"), ecmaFormat) {
		return "pattern"
	}
	if e.Type() == "format" && strings.HasPrefix(detail(e, "format"), enumFormat) {
		return "enum"
	}
	return keyword(e.Type())
}

// keyword is the Draft-07 keyword of a library error type (the type itself
// for one we do not know, which TestKeywords makes sure does not happen).
func keyword(typ string) string {
	if k, ok := errorKeywords[typ]; ok {
		return k
	}
	return typ
}

// describe renders one error in our words from its type and details. It
// is a table: one message per library error type.
func describe(e gojsonschema.ResultError) string {
	d := func(k string) string { return detail(e, k) }
	var m string
	switch e.Type() {
	case "false":
		m = "no value is allowed here (the schema is false)"
	case "required":
		m = fmt.Sprintf("property %q is required", d("property"))
	case "invalid_type":
		m = fmt.Sprintf("must be of type %s, not %s", d("expected"), d("given"))
	case "number_any_of":
		m = "must match at least one of the anyOf schemas"
	case "number_one_of":
		m = "must match exactly one of the oneOf schemas"
	case "number_all_of":
		m = "must match all of the allOf schemas"
	case "number_not":
		m = "must not match the schema in not"
	case "condition_then":
		m = `must match the "then" schema, as it matches "if"`
	case "condition_else":
		m = `must match the "else" schema, as it does not match "if"`
	case "missing_dependency":
		m = fmt.Sprintf("property %q is required by a dependency", d("dependency"))
	case "const":
		m = "must be equal to " + d("allowed")
	case "enum":
		m = "must be one of " + d("allowed")
	case "array_no_additional_items":
		m = "must not have more items than the items schemas"
	case "array_min_items":
		m = fmt.Sprintf("must have at least %s items", d("min"))
	case "array_max_items":
		m = fmt.Sprintf("must have at most %s items", d("max"))
	case "unique":
		m = fmt.Sprintf("items %s and %s are equal; items must be unique", d("i"), d("j"))
	case "contains":
		m = "must contain at least one item matching the contains schema"
	case "array_min_properties":
		m = fmt.Sprintf("must have at least %s properties", d("min"))
	case "array_max_properties":
		m = fmt.Sprintf("must have at most %s properties", d("max"))
	case "additional_property_not_allowed":
		m = "property is not allowed (additionalProperties)"
	case "invalid_property_name":
		m = fmt.Sprintf("property name %q does not match propertyNames", d("property"))
	case "string_gte":
		m = fmt.Sprintf("must be at least %s characters long", d("min"))
	case "string_lte":
		m = fmt.Sprintf("must be at most %s characters long", d("max"))
	case "pattern":
		m = "must match the pattern " + d("pattern")
	case "format":
		if src, ok := strings.CutPrefix(d("format"), ecmaFormat); ok {
			m = "must match the pattern " + src
		} else if set := enumSetOf(d("format")); set != nil {
			m = "must be one of " + set.list
		} else {
			m = fmt.Sprintf("must be a valid %s", d("format"))
		}
	case "multiple_of":
		m = "must be a multiple of " + d("multiple")
	case "number_gte":
		m = "must be greater than or equal to " + d("min")
	case "number_gt":
		m = "must be greater than " + d("min")
	case "number_lte":
		m = "must be less than or equal to " + d("max")
	case "number_lt":
		m = "must be less than " + d("max")
	default:
		m = e.Description()
	}
	return truncate(m, maxMessageBytes)
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && !utf8RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// MaxReportedErrors bounds the errors returned for one validation.
const MaxReportedErrors = 32

// maxMessageBytes bounds one error message.
const maxMessageBytes = 200
