package validate

import (
	"strings"
	"testing"
)

func TestParseResponseFormat(t *testing.T) {
	t.Parallel()
	env := func(schema string) string {
		return `{"type":"json_schema","json_schema":{"name":"r","description":"d","schema":` + schema + `}}`
	}
	for _, c := range []struct {
		raw, field, detail string
	}{
		{env(`{"$ref":"http://example.invalid/s.json"}`), "response_format.json_schema.schema", "/$ref: \"http://example.invalid/s.json\" refers to another document"},
		{env(`{"properties":{"a":{"type":"string","type":"number"}}}`), "response_format.json_schema.schema", `/properties/a/type: duplicate object key "type"`},
		{`{"type":"json_schema","json_schema":{"name":"r","description":"a\u0000","schema":{}}}`, "response_format.json_schema.description", "U+0000"},
		{env(`{"description":"\ud800"}`), "response_format.json_schema.schema", "/description: string contains an unpaired surrogate"},
		{env(`{"maximum":1e999}`), "response_format.json_schema.schema", "/maximum: number 1e999 is beyond the range of a 64-bit float"},
		{env(`{"properties":{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}`), "response_format.json_schema.schema", "nested deeper than 64 levels"},
		{env(`{"description":"` + strings.Repeat("x", 520<<10) + `"}`), "response_format.json_schema.schema", "(root): document is"},
		{env(`{"required":[` + repeatJoin(17000, func(int) string { return `"a"` }) + `]}`), "response_format.json_schema.schema", "more than 16384 JSON values"},
		{env(`[]`), "response_format.json_schema.schema", "(root): must be a JSON object"},
		{env(`{}`) + ` x`, "response_format", "unexpected data"},
		{`{"type":"json_schema","json_schema":{"name":"r","name":"s","schema":{}}}`, "response_format.json_schema.name", "duplicate object key"},
		{`{"type":"json_schema","json_schema":{"name":"bad name","schema":{}}}`, "response_format.json_schema.name", "must match"},
		{`{"type":"json_schema","json_schema":{"name":"r","schema":{},"strict":false}}`, "response_format.json_schema.strict", `always validates the result against the schema; remove "strict"`},
		{`{"type":"json_schema","json_schema":{"name":"r","schema":{},"strict":1}}`, "response_format.json_schema.strict", "must be a boolean"},
		{`{"type":"json_schema","json_schema":{"name":"r","schema":{},"extra":true}}`, "response_format.json_schema.extra", "unknown field"},
		{`{"type":"xml"}`, "response_format.type", "must be"},
	} {
		f, fe := ParseResponseFormat([]byte(c.raw))
		if fe == nil {
			t.Errorf("%.80s: accepted %+v", c.raw, f)
			continue
		}
		if fe.Field != c.field || !strings.Contains(fe.Detail, c.detail) {
			t.Errorf("%.80s: %s %q, want %s containing %q", c.raw, fe.Field, fe.Detail, c.field, c.detail)
		}
	}
	f, fe := ParseResponseFormat([]byte(env(`{"type":"object","properties":{"$ref":{"const":{"$id":"x"}}}}`)))
	if fe != nil || f == nil || f.Name != "r" || string(f.Schema) != `{"type":"object","properties":{"$ref":{"const":{"$id":"x"}}}}` {
		t.Errorf("%+v %v", f, fe)
	}
	// U+0000 in the schema is admitted: schemas are stored through the
	// JSONB-safe codec (internal/jsonb).
	if f, fe := ParseResponseFormat([]byte(env(`{"type":"string","pattern":"^[^\u0000]*$","title":"a\u0000"}`))); fe != nil || f == nil {
		t.Errorf("U+0000: %+v %v", f, fe)
	} else if r := f.Compiled.Validate([]byte(`"ab"`)); !r.Valid() {
		t.Errorf("U+0000 pattern: %s", r.Summary())
	}
	// OpenAI's strict: true is a no-op: chatd always validates.
	if f, fe := ParseResponseFormat([]byte(`{"type":"json_schema","json_schema":{"name":"r","strict":true,"schema":{"type":"string"}}}`)); fe != nil || f == nil ||
		string(f.Schema) != `{"type":"string"}` {
		t.Errorf("strict true: %+v %v", f, fe)
	}
	for _, raw := range []string{``, `null`, ` null `, `{"type":"text"}`} {
		if f, fe := ParseResponseFormat([]byte(raw)); f != nil || fe != nil {
			t.Errorf("%q: %+v %v", raw, f, fe)
		}
	}
}
