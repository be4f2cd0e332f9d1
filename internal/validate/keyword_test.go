package validate

import (
	"strings"
	"testing"
)

// TestKeywords: every error type the library reports (TestWarmUp fails
// them all) maps to its Draft-07 keyword, and a failing value names the
// keyword of the schema that refused it.
func TestKeywords(t *testing.T) {
	t.Parallel()
	draft7 := map[string]bool{}
	for _, k := range []string{"false", "required", "type", "anyOf", "oneOf", "allOf", "not", "then", "else", "dependencies",
		"const", "enum", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains", "minProperties", "maxProperties",
		"additionalProperties", "propertyNames", "minLength", "maxLength", "pattern", "format", "multipleOf", "minimum",
		"exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		draft7[k] = true
	}
	for typ, k := range errorKeywords {
		if !draft7[k] {
			t.Errorf("error type %s maps to %q, not a Draft-07 keyword", typ, k)
		}
	}
	s, err := Compile([]byte(warmUpSchema))
	if err != nil {
		t.Fatal(err)
	}
	res := s.Validate([]byte(warmUpValue))
	if res.Valid() || len(res.Errors) < 10 {
		t.Fatalf("result %+v", res)
	}
	for _, e := range res.Errors {
		if !draft7[e.Keyword] {
			t.Errorf("%s: keyword %q", e.Location, e.Keyword)
		}
	}

	s, err = Compile([]byte(`{"type":"object","properties":{"a":{"type":"integer","maximum":3},"b":{"type":"string","pattern":"^x"}},"required":["c"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range s.Validate([]byte(`{"a":4,"b":"y","d":1}`)).Errors {
		got[e.Location] = e.Keyword
	}
	want := map[string]string{"/a": "maximum", "/b": "pattern", "": "required", "/d": "additionalProperties"}
	for loc, k := range want {
		if got[loc] != k {
			t.Errorf("%q: keyword %q, want %q (all: %v)", loc, got[loc], k, got)
		}
	}
}

// TestScanCode: values refused before validation carry a code saying why.
func TestScanCode(t *testing.T) {
	t.Parallel()
	s, err := Compile([]byte(`{"type":"object","properties":{"n":{"enum":[9007199254740993]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ value, code string }{
		{`{"a":`, CodeInvalidJSON},
		{`{} x`, CodeInvalidJSON},
		{"\"\xff\"", CodeInvalidJSON},
		{``, CodeInvalidJSON},
		{`"` + strings.Repeat("x", ValueLimits.MaxBytes) + `"`, CodeTooLarge},
		{strings.Repeat("[", 40) + strings.Repeat("]", 40), CodeTooLarge},
		{`[` + strings.Repeat("1,", ValueLimits.MaxNodes) + `1]`, CodeTooLarge},
		{`{"` + strings.Repeat("k", 300) + `":1}`, CodeTooLarge},
		{`[1` + strings.Repeat("0", 400) + `]`, CodeTooLarge},
		{`{"a":1,"a":2}`, CodeUnstorable},
		{`"\u0000"`, CodeUnstorable},
		{`"\ud800"`, CodeUnstorable},
		{`[1e400]`, CodeUnstorable},
		{`[1e-400]`, CodeUnstorable},
		{`{"n":9007199254740992}`, "enum"},
	} {
		res := s.Validate([]byte(c.value))
		if res.Valid() || res.Errors[0].Keyword != c.code {
			t.Errorf("%.40q: %+v, want code %s", c.value, res.Errors, c.code)
		}
	}
}
