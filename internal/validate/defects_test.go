package validate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/xeipuuv/gojsonschema"
)

// Each known gojsonschema v1.2.0 defect is either refused before the
// library runs or worked around. The tests show the defect in the bare library first
// where that is cheap, then that our API does not hit it.

func valid(t *testing.T, s *Schema, value string) bool {
	t.Helper()
	return s.Validate([]byte(value)).Valid()
}

// Numbers outside float64 make const, enum and uniqueItems dereference
// nil inside the library.
func TestDefectBigNumbersPanic(t *testing.T) {
	t.Parallel()
	bare, err := compileDoc(map[string]any{"enum": []any{json.Number("1"), json.Number("2")}})
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the library no longer panics on 1e400 in enum; revisit the guard")
			}
		}()
		_, _ = bare.Validate(docLoader{json.Number("1e400")})
	}()

	for _, schema := range []string{`{"enum":[1,1e400]}`, `{"const":1e400}`, `{"enum":[[1e999]]}`} {
		se := compileErr(t, schema)
		if se == nil || !strings.Contains(se.Detail, "beyond the range of a 64-bit float") {
			t.Errorf("%s: %v", schema, se)
		}
	}
	for _, schema := range []string{`{"enum":[1,2]}`, `{"const":1}`, `{"uniqueItems":true}`, `{"items":{"const":[1]}}`} {
		s := mustCompile(t, schema)
		for _, v := range []string{`1e400`, `[1e400]`, `[[2e308]]`, `-1e309`} {
			r := s.Validate([]byte(v))
			if r.Valid() || !strings.Contains(r.Summary(), "beyond the range of a 64-bit float") {
				t.Errorf("%s / %s: %v", schema, v, r.Summary())
			}
		}
	}
	// The recover() behind the scan turns a library panic into a failure.
	s := mustCompile(t, `{"enum":[1,2]}`)
	if r := s.run(s.compiled, json.Number("1e400")); r.Valid() || !strings.Contains(r.Summary(), "internal error") {
		t.Errorf("run: %v", r.Summary())
	}
}

// const, enum and uniqueItems compare numbers as float64.
func TestDefectFloatComparison(t *testing.T) {
	t.Parallel()
	bare, err := compileDoc(map[string]any{"enum": []any{json.Number("9007199254740993")}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := bare.Validate(docLoader{json.Number("9007199254740992")}); !r.Valid() {
		t.Error("the library now compares enum numbers exactly; revisit the guard")
	}
	for _, c := range []struct {
		schema, value string
		ok            bool
	}{
		{`{"enum":[9007199254740993]}`, `9007199254740993`, true},
		{`{"enum":[9007199254740993]}`, `9007199254740992`, false},
		{`{"enum":[9007199254740993]}`, `9007199254740993.0`, true},
		{`{"const":9007199254740993}`, `9007199254740992`, false},
		{`{"const":{"a":[0.1]}}`, `{"a":[0.10000000000000001]}`, false},
		{`{"const":{"a":[0.1]}}`, `{"a":[0.1000]}`, true},
		{`{"enum":[1, "x"]}`, `1.0`, true},
		{`{"enum":[1, "x"]}`, `1.0000000000000000001`, false},
		{`{"uniqueItems":true}`, `[9007199254740992, 9007199254740993]`, false}, // refused: cannot be checked
		{`{"uniqueItems":true}`, `[9007199254740992, 9007199254740992.0]`, false},
		{`{"uniqueItems":true}`, `[1, 2, 9007199254740993]`, true},
		// -0 and 0 are equal in JSON Schema; encoding/json prints them differently
		{`{"const":0}`, `-0`, true},
		{`{"const":-0.0}`, `0`, true},
		{`{"enum":[0]}`, `-0.0`, true},
		{`{"uniqueItems":true}`, `[0, -0]`, false},
		{`{"uniqueItems":true}`, `[[0], [-0.0]]`, false},
	} {
		s := mustCompile(t, c.schema)
		if r := s.Validate([]byte(c.value)); r.Valid() != c.ok {
			t.Errorf("%s / %s: valid=%v, want %v (%s)", c.schema, c.value, r.Valid(), c.ok, r.Summary())
		}
	}
	// The refusal says why.
	r := mustCompile(t, `{"properties":{"n":{"enum":[9007199254740993]}}}`).Validate([]byte(`{"n":9007199254740992}`))
	if len(r.Errors) != 1 || r.Errors[0].Location != "/n" || !strings.Contains(r.Errors[0].Message, "64-bit float precision") {
		t.Errorf("%+v", r)
	}
	// Enum entries that differ only beyond float64 cannot be told apart either.
	if se := compileErr(t, `{"enum":[9007199254740992, 9007199254740993]}`); se == nil || se.Pointer != "/enum/1" {
		t.Errorf("%v", se)
	}
}

// Unknown formats pass silently in the library.
func TestDefectUnknownFormats(t *testing.T) {
	t.Parallel()
	bare, err := compileDoc(map[string]any{"format": "no-such-format"})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := bare.Validate(docLoader{"anything"}); !r.Valid() {
		t.Error("the library now rejects unknown formats")
	}
	// so an unknown format is admitted as the annotation it is, and says so
	if s := mustCompile(t, `{"format":"no-such-format"}`); len(s.Warnings) != 1 || s.Warnings[0].Location != "/format" {
		t.Errorf("%+v", s.Warnings)
	}
}

// The library applies format checkers to numbers, and every checker
// refuses them; Draft-07 formats apply to strings only.
func TestDefectFormatsOnNumbers(t *testing.T) {
	t.Parallel()
	bare, err := compileDoc(map[string]any{"format": "email"})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := bare.Validate(docLoader{json.Number("12")}); r.Valid() {
		t.Error("the library no longer applies formats to numbers; adapt() may be dropped")
	}
	for _, c := range []struct {
		schema, value string
		ok            bool
	}{
		{`{"format":"email"}`, `12`, true},
		{`{"format":"email"}`, `1.5`, true},
		{`{"format":"email"}`, `"a@b.c"`, true},
		{`{"format":"email"}`, `"nope"`, false},
		{`{"type":["string","integer"],"format":"ipv4"}`, `7`, true},
		{`{"type":["string","integer"],"format":"ipv4"}`, `"1.2.3.4"`, true},
		{`{"type":["string","integer"],"format":"ipv4"}`, `"1.2.3"`, false},
		{`{"type":["string","integer"],"format":"ipv4"}`, `1.5`, false},
		// the node already has if/then/else: the guard goes into allOf
		{`{"if":{"type":"integer"},"then":{"minimum":5},"else":{"maxLength":3},"format":"date"}`, `7`, true},
		{`{"if":{"type":"integer"},"then":{"minimum":5},"else":{"maxLength":3},"format":"date"}`, `3`, false},
		{`{"if":{"type":"integer"},"then":{"minimum":5},"else":{"maxLength":30},"format":"date"}`, `"2026-01-02"`, true},
		{`{"if":{"type":"integer"},"then":{"minimum":5},"else":{"maxLength":30},"format":"date"}`, `"2026-13-02"`, false},
		{`{"allOf":[{"minimum":1}],"then":{},"format":"uuid"}`, `2`, true},
		{`{"allOf":[{"minimum":1}],"then":{},"format":"uuid"}`, `"x"`, false},
		{`{"items":{"format":"date-time"}}`, `[1, "2026-11-30T00:00:00Z", null, true, {}]`, true},
	} {
		s := mustCompile(t, c.schema)
		if r := s.Validate([]byte(c.value)); r.Valid() != c.ok {
			t.Errorf("%s / %s: valid=%v, want %v (%s)", c.schema, c.value, r.Valid(), c.ok, r.Summary())
		}
	}
	// A format failure is reported once, as a format error.
	r := mustCompile(t, `{"properties":{"e":{"format":"email"}}}`).Validate([]byte(`{"e":"nope"}`))
	if r.Total != 1 || r.Errors[0].Location != "/e" || r.Errors[0].Message != "must be a valid email" {
		t.Errorf("%+v", r)
	}
}

// The library reads count keywords with json.Number.Int64, so 2.0 and
// 1e2 do not compile.
func TestDefectIntegralDecimals(t *testing.T) {
	t.Parallel()
	if _, err := compileDoc(map[string]any{"minLength": json.Number("2.0")}); err == nil {
		t.Error("the library now accepts 2.0 in minLength")
	}
	for _, c := range []struct {
		schema, value string
		ok            bool
	}{
		{`{"minLength":2.0}`, `"ab"`, true},
		{`{"minLength":2.0}`, `"a"`, false},
		{`{"maxItems":1e1}`, `[1,2,3,4,5,6,7,8,9,10]`, true},
		{`{"maxItems":1e1}`, `[1,2,3,4,5,6,7,8,9,10,11]`, false},
		{`{"minProperties":1.0e0}`, `{}`, false},
		{`{"maxLength":1e60}`, `"anything"`, true},
		{`{"minLength":1e60}`, `"anything"`, false},
	} {
		s := mustCompile(t, c.schema)
		if r := s.Validate([]byte(c.value)); r.Valid() != c.ok {
			t.Errorf("%s / %s: valid=%v, want %v (%s)", c.schema, c.value, r.Valid(), c.ok, r.Summary())
		}
	}
}

// The library's own decoder ignores trailing data and keeps the last of
// duplicate keys; we never hand it bytes.
func TestDefectLaxDecoding(t *testing.T) {
	t.Parallel()
	r, err := gojsonschema.NewSchemaLoader().Compile(gojsonschema.NewStringLoader(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r.Validate(gojsonschema.NewStringLoader(`{} trailing garbage`)); err != nil || !res.Valid() {
		t.Error("the library's decoder now refuses trailing data")
	}
	s := mustCompile(t, `{"type":"object","properties":{"a":{"type":"string"}}}`)
	for _, v := range []string{`{} trailing garbage`, `{"a":1,"a":"x"}`} {
		if valid(t, s, v) {
			t.Errorf("%s accepted", v)
		}
	}
	if se := compileErr(t, `{"type":"object"} {"$ref":"http://example.invalid/"}`); se == nil {
		t.Error("trailing data after a schema accepted")
	}
	if se := compileErr(t, `{"type":"string","type":"object"}`); se == nil || se.Pointer != "/type" {
		t.Errorf("duplicate keyword: %v", se)
	}
}

// minLength > maxLength (and the properties pair) do not compile in the
// library; we say so in our words.
func TestDefectMinAboveMax(t *testing.T) {
	t.Parallel()
	if _, err := compileDoc(map[string]any{"minLength": json.Number("3"), "maxLength": json.Number("2")}); err == nil {
		t.Error("the library now compiles minLength > maxLength")
	}
	if se := compileErr(t, `{"minLength":3,"maxLength":2}`); se == nil || se.Pointer != "/minLength" {
		t.Errorf("%v", se)
	}
}
