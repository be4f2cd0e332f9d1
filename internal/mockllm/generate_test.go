package mockllm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/xeipuuv/gojsonschema"
)

// compileDraft7 compiles a schema with an independent validator, so the
// generator is never judged by its own checker.
func compileDraft7(t testing.TB, schema string) *gojsonschema.Schema {
	t.Helper()
	sl := gojsonschema.NewSchemaLoader()
	sl.Draft = gojsonschema.Draft7
	sl.Validate = true
	s, err := sl.Compile(gojsonschema.NewStringLoader(schema))
	if err != nil {
		t.Fatalf("compile schema %s: %v", schema, err)
	}
	return s
}

func validates(t testing.TB, s *gojsonschema.Schema, value []byte) (bool, string) {
	t.Helper()
	res, err := s.Validate(gojsonschema.NewBytesLoader(value))
	if err != nil {
		t.Fatalf("validate %s: %v", value, err)
	}
	var msgs []string
	for _, e := range res.Errors() {
		msgs = append(msgs, e.String())
	}
	return res.Valid(), strings.Join(msgs, "; ")
}

var generatorSchemas = []struct {
	name, schema string
}{
	{"object with required and optional", `{"type":"object","properties":{"title":{"type":"string","minLength":1},"count":{"type":"integer"}},"required":["title"],"additionalProperties":false}`},
	{"nested objects", `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"object","properties":{"c":{"type":"boolean"}},"required":["c"],"additionalProperties":false}},"required":["b"]}},"required":["a"]}`},
	{"array of objects", `{"type":"array","minItems":2,"items":{"type":"object","properties":{"id":{"type":"integer","minimum":1}},"required":["id"]}}`},
	{"unique integers", `{"type":"array","items":{"type":"integer","minimum":3,"maximum":9},"minItems":4,"uniqueItems":true}`},
	{"unique booleans", `{"type":"array","items":{"type":"boolean"},"minItems":2,"uniqueItems":true}`},
	{"unique pattern strings", `{"type":"array","items":{"type":"string","pattern":"^[a-z]+$"},"minItems":3,"uniqueItems":true}`},
	{"tuple", `{"type":"array","items":[{"type":"string"},{"type":"integer"},{"const":"end"}],"additionalItems":false,"minItems":3}`},
	{"contains", `{"type":"array","items":{"type":"integer"},"contains":{"minimum":10},"maxItems":3}`},
	{"nullable string", `{"type":["string","null"],"maxLength":3}`},
	{"nullable integer", `{"type":["null","integer"],"minimum":2}`},
	{"string enum", `{"type":"string","enum":["low","medium","high"]}`},
	{"enum filtered by other keywords", `{"type":"integer","enum":["a",2,3,4],"minimum":3}`},
	{"enum with null", `{"enum":[null,"x"]}`},
	{"const object", `{"const":{"k":[1,2.5,"x"]}}`},
	{"formats", `{"type":"object","properties":{"email":{"type":"string","format":"email"},"date":{"type":"string","format":"date"},"dt":{"type":"string","format":"date-time"},"time":{"type":"string","format":"time"},"uri":{"type":"string","format":"uri"},"uriref":{"type":"string","format":"uri-reference"},"iri":{"type":"string","format":"iri"},"iriref":{"type":"string","format":"iri-reference"},"uuid":{"type":"string","format":"uuid"},"ipv4":{"type":"string","format":"ipv4"},"ipv6":{"type":"string","format":"ipv6"},"host":{"type":"string","format":"hostname"},"ptr":{"type":"string","format":"json-pointer"},"relptr":{"type":"string","format":"relative-json-pointer"},"tmpl":{"type":"string","format":"uri-template"},"re":{"type":"string","format":"regex"}},"required":["email","date","dt","time","uri","uriref","iri","iriref","uuid","ipv4","ipv6","host","ptr","relptr","tmpl","re"]}`},
	{"unique emails", `{"type":"array","items":{"type":"string","format":"email"},"minItems":3,"uniqueItems":true}`},
	{"pattern lowercase", `{"type":"string","pattern":"^[a-z]+$"}`},
	{"pattern phone", `{"type":"string","pattern":"^[0-9]{3}-[0-9]{4}$"}`},
	{"pattern with length", `{"type":"string","pattern":"^[A-Z][a-z]+$","minLength":5,"maxLength":8}`},
	{"pattern alternation", `{"type":"string","pattern":"^(feat|fix|chore)\\([a-z]+\\): .+$"}`},
	{"pattern unanchored with length", `{"type":"string","pattern":"ab","minLength":10}`},
	{"long minLength", `{"type":"string","minLength":300}`},
	{"fractional multipleOf", `{"type":"number","minimum":0.1,"maximum":0.35,"multipleOf":0.05}`},
	{"multipleOf 0.01 above fractional minimum", `{"type":"number","minimum":1.005,"multipleOf":0.01}`},
	{"exclusive bounds", `{"type":"number","exclusiveMinimum":1.5,"exclusiveMaximum":1.6}`},
	{"negative integer range", `{"type":"integer","minimum":-10,"maximum":-3,"multipleOf":4}`},
	{"integer with fractional multipleOf", `{"type":"integer","multipleOf":1.5,"minimum":1}`},
	{"huge integer", `{"type":"integer","minimum":12345678901234567890123}`},
	{"anyOf objects", `{"anyOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"string"}},"required":["kind","x"]},{"type":"object","properties":{"kind":{"const":"b"}},"required":["kind"]}]}`},
	{"oneOf overlapping", `{"oneOf":[{"type":"integer"},{"type":"number","multipleOf":0.5}]}`},
	{"oneOf multiples", `{"oneOf":[{"type":"integer","multipleOf":3},{"type":"integer","multipleOf":5}],"minimum":4}`},
	{"allOf merge", `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer","minimum":5}},"required":["b"]},{"properties":{"a":{"maxLength":2}}}]}`},
	{"not", `{"type":"string","not":{"enum":["mock"]}}`},
	{"not type", `{"not":{"type":["string","integer"]}}`},
	{"if then else", `{"type":"object","properties":{"kind":{"enum":["a","b"]}},"required":["kind"],"if":{"properties":{"kind":{"const":"a"}}},"then":{"properties":{"x":{"type":"integer","minimum":7}},"required":["x"]},"else":{"required":["y"]}}`},
	{"ref definitions", `{"definitions":{"item":{"type":"object","properties":{"id":{"type":"string","format":"uuid"},"tags":{"type":"array","items":{"$ref":"#/definitions/tag"}}},"required":["id","tags"]},"tag":{"type":"string","enum":["red","blue"]}},"type":"array","items":{"$ref":"#/definitions/item"},"minItems":2}`},
	{"recursive ref", `{"definitions":{"node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/definitions/node"}}},"required":["value"]}},"$ref":"#/definitions/node"}`},
	{"minProperties with additionalProperties", `{"type":"object","minProperties":3,"additionalProperties":{"type":"boolean"}}`},
	{"patternProperties only", `{"type":"object","patternProperties":{"^x_[0-9]+$":{"type":"integer"}},"additionalProperties":false,"minProperties":2}`},
	{"maxProperties", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"}},"required":["c"],"maxProperties":2}`},
	{"boolean subschemas", `{"type":"object","properties":{"never":false,"any":true},"required":["any"]}`},
	{"dependencies", `{"type":"object","properties":{"card":{"type":"string"}},"required":["card"],"dependencies":{"card":["billing"]},"additionalProperties":{"type":"string","minLength":2}}`},
	{"untyped with keywords", `{"properties":{"a":{"minimum":3}},"required":["a"]}`},
	{"finalizer parameters", `{"type":"object","properties":{"output":{"type":"object","properties":{"summary":{"type":"string","maxLength":80},"files":{"type":"array","items":{"type":"string","pattern":"^[a-z/]+\\.go$"},"minItems":1},"confidence":{"type":"number","minimum":0,"maximum":1,"multipleOf":0.1},"status":{"enum":["done","blocked"]}},"required":["summary","files","confidence","status"],"additionalProperties":false}},"required":["output"],"additionalProperties":false}`},
}

func TestGenerateValueValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range generatorSchemas {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := compileDraft7(t, tc.schema)
			v, err := GenerateValue(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatalf("GenerateValue: %v", err)
			}
			if ok, why := validates(t, s, v); !ok {
				t.Errorf("generated %s does not validate: %s", v, why)
			}
			bad, err := GenerateInvalid(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatalf("GenerateInvalid: %v", err)
			}
			if ok, _ := validates(t, s, bad); ok {
				t.Errorf("invalid value %s validates", bad)
			}
			t.Logf("valid %s, invalid %s", v, bad)
		})
	}
}

func TestGenerateValueExact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"number","minimum":0.1,"maximum":0.35,"multipleOf":0.05}`, `0.1`},
		{`{"type":"number","minimum":1.005,"multipleOf":0.01}`, `1.01`},
		{`{"type":"integer","multipleOf":1.5,"minimum":1}`, `3`},
		{`{"type":"integer","minimum":12345678901234567890123}`, `12345678901234567890123`},
		{`{"type":"number","exclusiveMinimum":1.5,"exclusiveMaximum":1.6}`, `1.55`},
		{`{"const":{"k":[1,2.50,"x"]}}`, `{"k":[1,2.50,"x"]}`}, // numbers kept verbatim
		{`{"type":["null","string"]}`, `null`},                 // first workable type
		{`{"type":"string","pattern":"^[0-9]{3}-[0-9]{4}$"}`, `"000-0000"`},
		{`{"enum":["b","a"]}`, `"b"`},
		{`true`, `"mock"`},
	} {
		got, err := GenerateValue(json.RawMessage(tc.schema))
		if err != nil || string(got) != tc.want {
			t.Errorf("GenerateValue(%s) = %s, %v; want %s", tc.schema, got, err, tc.want)
		}
	}
}

func TestGenerateErrors(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"type":"object","properties":{"a":`, 100) + `{}` + strings.Repeat(`},"required":["a"]}`, 100)
	for _, schema := range []string{
		`false`,
		`{"type":"string","minLength":5,"maxLength":2}`,
		`{"type":"integer","minimum":1.2,"maximum":1.8}`,
		`{"allOf":[{"type":"string"},{"type":"integer"}]}`,
		`{"$ref":"#"}`,
		`{"$ref":"#/definitions/missing"}`,
		`{"$ref":"https://example.com/schema.json"}`,
		`{"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]}`,
		`{"type":"number","minimum":1e999999999}`,
		deep,
		`not json`,
		`{} {}`,
	} {
		if v, err := GenerateValue(json.RawMessage(schema)); err == nil {
			t.Errorf("GenerateValue(%.60s) = %s, want an error", schema, v)
		}
	}
	for _, schema := range []string{`{}`, `true`, `{"description":"anything"}`} {
		if v, err := GenerateInvalid(json.RawMessage(schema)); err == nil {
			t.Errorf("GenerateInvalid(%s) = %s, want an error", schema, v)
		}
	}
}

// TestGenerateBounded feeds schemas built to explode (deep unions, huge
// counts, wide unique arrays): both generators must return, with a value or
// an error, and never a wrong "invalid" value.
func TestGenerateBounded(t *testing.T) {
	t.Parallel()
	nest := func(tmpl string, n int, leaf string) string {
		s := leaf
		for range n {
			s = strings.ReplaceAll(tmpl, "X", s)
		}
		return s
	}
	for _, schema := range []string{
		nest(`{"anyOf":[X,X,X,X]}`, 6, `false`),
		nest(`{"type":"object","properties":{"a":{"anyOf":[X,X,X]}},"required":["a"]}`, 6, `{"type":"string","minLength":3,"maxLength":2}`),
		nest(`{"type":"array","items":X,"minItems":5,"uniqueItems":true}`, 5, `{"type":"integer"}`),
		nest(`{"allOf":[X,X]}`, 8, `{"type":"string"}`),
		nest(`{"oneOf":[X,X]}`, 8, `{"type":"string"}`),
		nest(`{"not":X}`, 40, `{"type":"string"}`),
		`{"type":"string","minLength":16000,"pattern":"^(a|b)*c$"}`,
		`{"type":"array","minItems":16000,"items":{"type":"object","properties":{"a":{"type":"string","pattern":"^[a-z]{5}$"}},"required":["a"]}}`,
		`{"type":"array","minItems":3000,"uniqueItems":true,"items":{"type":"integer"}}`,
		`{"type":"object","minProperties":5000}`,
		`{"type":"string","pattern":"^(((a{100}){10}){10})$"}`,
		`{"type":"integer","minItems":1e300,"maxLength":-5,"multipleOf":0}`,
	} {
		v, err := GenerateValue(json.RawMessage(schema))
		bad, err2 := GenerateInvalid(json.RawMessage(schema))
		t.Logf("%.60s: %.40s %v | %.40s %v", schema, v, err, bad, err2)
		sl := gojsonschema.NewSchemaLoader()
		sl.Draft = gojsonschema.Draft7
		s, cerr := sl.Compile(gojsonschema.NewStringLoader(schema))
		if cerr != nil {
			continue // the reference validator refuses contradictory schemas
		}
		if err == nil {
			if ok, why := validates(t, s, v); !ok {
				t.Errorf("%.60s: generated %.60s does not validate: %s", schema, v, why)
			}
		}
		if err2 == nil {
			if ok, _ := validates(t, s, bad); ok {
				t.Errorf("%.60s: invalid value %.60s validates", schema, bad)
			}
		}
	}
}

func FuzzGenerateValue(f *testing.F) {
	for _, tc := range generatorSchemas {
		f.Add([]byte(tc.schema))
	}
	for _, s := range []string{`true`, `false`, `{}`, `{"$ref":"#"}`, `{"type":"number","multipleOf":0}`, `{"pattern":"(?=x)"}`, `{"minItems":1e300}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		if v, err := GenerateValue(schema); err == nil && !json.Valid(v) {
			t.Errorf("GenerateValue(%q) returned invalid JSON %q", schema, v)
		}
		if v, err := GenerateInvalid(schema); err == nil && !json.Valid(v) {
			t.Errorf("GenerateInvalid(%q) returned invalid JSON %q", schema, v)
		}
	})
}
