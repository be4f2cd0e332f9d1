package validate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	oracle "github.com/santhosh-tekuri/jsonschema/v6"
)

// TestSchemasAsWritten: everyday schemas are admitted as
// written, each with the warnings it deserves, and validate as the oracle
// (santhosh-tekuri/jsonschema v6) does: format "password"/"binary"
// (Pydantic's SecretStr, bytes), OpenAPI's nullable and vendor keywords,
// "type" beside a Draft-07 "$ref", "$id" and "$schema" below the root, a
// reference into a vendor container.
func TestSchemasAsWritten(t *testing.T) {
	t.Parallel()
	const d2020 = `"$schema":"https://json-schema.org/draft/2020-12/schema",`
	cases := []struct {
		name, schema   string
		warnings       []string // locations, in order
		valid, invalid []string
		noOracle       bool // the oracle does not know the keyword (nullable)
	}{
		{name: "Pydantic SecretStr and bytes",
			schema: `{"type":"object","properties":{"secret":{"type":"string","format":"password","writeOnly":true},"blob":{"type":"string","format":"binary"}},"required":["secret"]}`,
			valid:  []string{`{"secret":"hunter2","blob":"\u0001\u00ff"}`}, invalid: []string{`{"blob":"x"}`, `{"secret":1}`}},
		{name: "OpenAPI 3.0 nullable",
			schema: `{"type":"object","properties":{"name":{"type":"string","nullable":true},"tags":{"type":["array"],"nullable":true,"items":{"type":"string"}},"age":{"type":"integer","nullable":false},"any":{"nullable":true}},` +
				`"example":{"name":null},"discriminator":{"propertyName":"kind"},"xml":{"name":"pet"}}`,
			valid:    []string{`{"name":null,"tags":null,"age":1,"any":5}`, `{"name":"x","tags":["a"]}`},
			invalid:  []string{`{"age":null}`, `{"name":1}`, `{"tags":[1]}`},
			noOracle: true},
		{name: "unknown keywords are annotations, warned",
			schema:   `{"type":"object","abcIsValidColor":true,"x-order":1,"markdownDescription":"*m*","properties":{"a":{"type":"string","postActions":[{"$ref":"http://example.invalid/"}]}}}`,
			warnings: []string{"/abcIsValidColor", "/x-order", "/properties/a/postActions"},
			valid:    []string{`{"a":"x"}`}, invalid: []string{`{"a":1}`, `[]`}},
		{name: "unknown format is an annotation, warned",
			schema:   `{"type":"string","format":"content-security-policy"}`,
			warnings: []string{"/format"},
			valid:    []string{`"anything"`}, invalid: []string{`1`}},
		{name: "Draft-07: type beside $ref is ignored, warned",
			schema:   `{"definitions":{"s":{"minLength":2}},"properties":{"a":{"$ref":"#/definitions/s","type":"integer","description":"d"}}}`,
			warnings: []string{"/properties/a/type"},
			valid:    []string{`{"a":"xy"}`, `{"a":5}`}, invalid: []string{`{"a":"x"}`}},
		{name: "2020-12: type beside $ref applies",
			schema: `{` + d2020 + `"$defs":{"s":{"minLength":2}},"properties":{"a":{"$ref":"#/$defs/s","type":"integer"}}}`,
			valid:  []string{`{"a":5}`}, invalid: []string{`{"a":"xy"}`, `{"a":"x"}`}},
		{name: "bundled $id: references resolve against the subschema's URI",
			schema: `{"$id":"https://example.com/root.json","definitions":{"addr":{"$id":"address.json","type":"object","required":["zip"],` +
				`"properties":{"zip":{"$ref":"#/definitions/zip"}},"definitions":{"zip":{"type":"string","pattern":"^[0-9]{5}$"}}}},` +
				`"properties":{"home":{"$ref":"address.json"},"work":{"$ref":"https://example.com/address.json#/definitions/zip"}}}`,
			valid: []string{`{"home":{"zip":"12345"},"work":"54321"}`}, invalid: []string{`{"home":{"zip":"1"}}`, `{"home":{}}`, `{"work":"x"}`}},
		{name: "bundled $id without a root $id, $schema below the root",
			schema: `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"n":{"$id":"urn:example:n","$schema":"http://json-schema.org/draft-07/schema#","type":"integer"}},"items":{"$ref":"urn:example:n"}}`,
			valid:  []string{`[1,2]`}, invalid: []string{`[1.5]`}},
		{name: "Draft-07 anchor",
			schema: `{"definitions":{"a":{"$id":"#num","type":"number"}},"items":{"$ref":"#num"}}`,
			valid:  []string{`[1]`}, invalid: []string{`["1"]`}},
		{name: "2020-12 anchor",
			schema: `{` + d2020 + `"$defs":{"a":{"$anchor":"num","type":"number"}},"items":{"$ref":"#num"}}`,
			valid:  []string{`[1]`}, invalid: []string{`["1"]`}},
		{name: "ECMA-262 lookahead and backreference patterns",
			schema: `{"type":"object","properties":{"key":{"type":"string","pattern":"^(?!@@)[\\w@]+$"},"pkg":{"pattern":"^(?!org\\.bukkit\\.)[a-z.]+$"},` +
				`"twice":{"type":"string","pattern":"^(\\w)\\1$","format":"email"},"any":{"anyOf":[{"pattern":"^(?=\\d)"},{"type":"integer"}]}}}`,
			valid:   []string{`{"key":"a@b","pkg":"com.x","any":"1x"}`, `{"any":5,"pkg":7}`, `{"any":"9"}`},
			invalid: []string{`{"key":"@@a"}`, `{"pkg":"org.bukkit.x"}`, `{"any":"x"}`, `{"twice":"ab"}`}},
		{name: "references into vendor containers",
			schema:   `{"abcDefs":{"s":{"type":"string"}},"x-defs":{"n":{"type":"integer","minimum":0}},"properties":{"n":{"$ref":"#/x-defs/n"},"s":{"$ref":"#/abcDefs/s"}}}`,
			warnings: []string{"/abcDefs", "/x-defs"},
			valid:    []string{`{"n":1,"s":"x"}`}, invalid: []string{`{"n":-1}`, `{"s":1}`}},
	}
	for _, c := range cases {
		s, err := Compile([]byte(c.schema))
		if err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
			continue
		}
		var got []string
		for _, w := range s.Warnings {
			got = append(got, w.Location)
		}
		if strings.Join(got, " ") != strings.Join(c.warnings, " ") {
			t.Errorf("%s: warnings %+v, want at %v", c.name, s.Warnings, c.warnings)
		}
		var o *oracle.Schema
		if !c.noOracle {
			o = oracleSchema(t, []byte(c.schema))
		}
		check := func(v string, want bool) {
			if r := s.Validate([]byte(v)); r.Valid() != want {
				t.Errorf("%s: %s: valid=%v (%s), want %v", c.name, v, r.Valid(), r.Summary(), want)
			}
			if o != nil {
				inst, _ := oracle.UnmarshalJSON(bytes.NewReader([]byte(v)))
				if oerr := o.Validate(inst); (oerr == nil) != want {
					t.Errorf("%s: %s: the oracle says %v, want valid=%v", c.name, v, oerr, want)
				}
			}
		}
		for _, v := range c.valid {
			check(v, true)
		}
		for _, v := range c.invalid {
			check(v, false)
		}
	}
}

// TestTypoRefused: an unknown keyword within a small edit distance of a
// validation keyword is refused, naming the keyword meant; ordinary
// vendor words are not.
func TestTypoRefused(t *testing.T) {
	t.Parallel()
	for typo, meant := range map[string]string{
		"requried": "required", "requird": "required", "minLenght": "minLength", "additonalProperties": "additionalProperties", //nolint:misspell // typos on purpose
		"additionalPropertie": "additionalProperties", "MaxItems": "maxItems", "IF": "if", "$REF": "$ref", "patern": "pattern",
		"propertys": "properties", "itmes": "items", "exclusiveMaximun": "exclusiveMaximum", "anyof": "anyOf", "Enum": "enum",
		"exclusiveMinimumm": "exclusiveMinimum", "require": "required", "definition": "definitions", "additionalproperties": "additionalProperties",
	} {
		se := compileErr(t, `{"properties":{"a":{"`+typo+`":true}}}`)
		if se == nil || se.Pointer != "/properties/a/"+typo || !strings.Contains(se.Detail, `did you mean "`+meant+`"`) {
			t.Errorf("%s: %v, want did you mean %q", typo, se, meant)
		}
	}
	for _, word := range []string{"ref", "note", "types", "enums", "id", "of", "optional", "abcIsValidColor", "tsType", "markdownDescription",
		"deprecated", "readonly", "nullable", "units", "order", "example", "label", "hidden", "secret", "additionalProperty"} {
		if se := compileErr(t, `{"properties":{"a":{"`+word+`":true}}}`); se != nil {
			t.Errorf("%s: %v", word, se)
		}
	}
}

// TestNamedAnnotations: a member whose name marks it as an annotation (a
// leading "_", as JSONSchemaBench and hand-edited schemas disable
// "format" and "uniqueItems"; "x-"; a comment) is admitted with a warning,
// never taken for a typo, and validates as the oracle does (which ignores
// it); a real typo next to it is still refused: "_format" and
// "_uniqueItems" are not typos, and "x-foo" is warned.
func TestNamedAnnotations(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object","x-foo":{"bar":1},"properties":{"d":{"type":"string","_format":"date-time","#note":"n"},` +
		`"l":{"type":"array","_uniqueItems":true,"//":"c","$comments":"c"}}}`
	s := mustCompile(t, schema)
	var got []string
	for _, w := range s.Warnings {
		got = append(got, w.Location+" "+w.Keyword)
		if !strings.Contains(w.Message, "is an annotation") {
			t.Errorf("%+v", w)
		}
	}
	want := "/x-foo x-foo /properties/d/#note #note /properties/d/_format _format /properties/l/$comments $comments /properties/l/~1~1 // /properties/l/_uniqueItems _uniqueItems"
	if strings.Join(got, " ") != want {
		t.Errorf("warnings %q, want %q", got, want)
	}
	o := oracleSchema(t, []byte(schema))
	for _, v := range []string{`{"d":"not a date","l":[1,1]}`, `{"d":1}`, `{"l":{}}`, `[]`} {
		inst, _ := oracle.UnmarshalJSON(strings.NewReader(v))
		if want, r := o.Validate(inst) == nil, s.Validate([]byte(v)); r.Valid() != want {
			t.Errorf("%s: valid=%v (%s), the oracle says %v", v, r.Valid(), r.Summary(), want)
		}
	}
	if se := compileErr(t, `{"properties":{"a":{"_format":"date","minLenght":1}}}`); se == nil || se.Pointer != "/properties/a/minLenght" ||
		!strings.Contains(se.Detail, `did you mean "minLength"`) {
		t.Errorf("minLenght: %v", se)
	}
}

// TestDiscriminatedUnions: a oneOf/anyOf whose branches are told apart by
// one property's const/enum values is dispatched on it (dialect_translate.go,
// discriminate), with the verdict the oracle gives the union as written,
// for objects of every branch, with the property absent or of no branch,
// and for values that are not objects. A catalogue value
// (metricshub-connector) cost gojsonschema 100 ms and 35 MiB before, so
// chatd refused it as too expensive while the oracle took 28 ms.
func TestDiscriminatedUnions(t *testing.T) {
	t.Parallel()
	branches := `[{"properties":{"type":{"const":"http"},"url":{"type":"string"}},"required":["url"]},` +
		`{"$ref":"#/definitions/snmp"},` +
		`{"properties":{"type":{"type":"string","enum":["wmi","wbem"]},"namespace":{"type":"string"}},"additionalProperties":false}]`
	values := []string{`{"type":"http","url":"u"}`, `{"type":"http"}`, `{"type":"snmp","oid":"1.3"}`, `{"type":"snmp","oid":1}`,
		`{"type":"wmi"}`, `{"type":"wbem","namespace":"x","extra":1}`, `{"type":"ftp"}`, `{"url":"u"}`, `{}`, `{"type":1}`,
		`"http"`, `5`, `null`, `[]`}
	for _, kw := range []string{"oneOf", "anyOf"} {
		schema := `{"definitions":{"snmp":{"type":"object","properties":{"type":{"const":"snmp"},"oid":{"type":"string"}}}},` +
			`"items":{"` + kw + `":` + branches + `}}`
		s := mustCompile(t, schema)
		doc, _ := Decode([]byte(schema), schemaLimits)
		sc, err := screen(doc)
		if err != nil {
			t.Fatal(err)
		}
		prepare(doc, sc)
		adapt(doc, doc, "", nil)
		if items := doc.(map[string]any)["items"].(map[string]any); items[kw] != nil || len(items["allOf"].([]any)) != 4 {
			t.Errorf("%s: not dispatched: %v", kw, items)
		}
		o := oracleSchema(t, []byte(schema))
		for _, v := range values {
			arr := "[" + v + "]"
			inst, _ := oracle.UnmarshalJSON(strings.NewReader(arr))
			want := o.Validate(inst) == nil
			if r := s.Validate([]byte(arr)); r.Valid() != want {
				t.Errorf("%s %s: valid=%v (%s), the oracle says %v", kw, v, r.Valid(), r.Summary(), want)
			}
		}
	}
	// the errors of the selected branch, not "must match exactly one"
	s := mustCompile(t, `{"oneOf":`+strings.Replace(branches, `{"$ref":"#/definitions/snmp"}`, `{"properties":{"type":{"const":"snmp"}}}`, 1)+`}`)
	if r := s.Validate([]byte(`{"type":"http"}`)); r.Total != 1 || r.Errors[0].Keyword != "required" {
		t.Errorf("%+v", r)
	}
	// a union one of whose branches a reference names keeps its pointer
	s = mustCompile(t, `{"properties":{"u":{"oneOf":`+strings.Replace(branches, `{"$ref":"#/definitions/snmp"}`, `{"properties":{"type":{"const":"snmp"}}}`, 1)+`},`+
		`"h":{"$ref":"#/properties/u/oneOf/0"}}}`)
	if r := s.Validate([]byte(`{"h":{"type":"http"},"u":{"type":"wmi"}}`)); r.Valid() || r.Errors[0].Location != "/h" {
		t.Errorf("%+v", r)
	}
	// not discriminated: two branches, a shared value, a non-string value
	for _, schema := range []string{
		`{"oneOf":[{"properties":{"k":{"const":"a"}}},{"properties":{"k":{"const":"b"}}}]}`,
		`{"oneOf":[{"properties":{"k":{"const":"a"}}},{"properties":{"k":{"enum":["b","a"]}}},{"properties":{"k":{"const":"c"}}}]}`,
		`{"oneOf":[{"properties":{"k":{"const":1}}},{"properties":{"k":{"const":2}}},{"properties":{"k":{"const":3}}}]}`,
	} {
		doc, _ := Decode([]byte(schema), schemaLimits)
		adapt(doc, doc, "", nil)
		if doc.(map[string]any)["oneOf"] == nil {
			t.Errorf("%s: dispatched", schema)
		}
	}
}

// TestToolSchemaLeavesOutUnknownKeywords: what the provider receives keeps
// the keywords and annotations a provider knows, and leaves out unknown
// keywords and x-*/editor annotations, whose data may look like schemas
// ("$ref" included); a schema a reference names inside one stays, at its
// pointer. Gemini's schema conversion (internal/provider) took such data
// for references (FuzzGeminiSchema: {"":{"0":{"$ref":""}}}).
func TestToolSchemaLeavesOutUnknownKeywords(t *testing.T) {
	t.Parallel()
	got, err := ToolSchema([]byte(`{"type":"object","description":"d","":{"0":{"$ref":""}},"x-meta":{"$ref":"#"},`+
		`"defaultSnippets":[{"body":{"$ref":"#"}}],"deprecated":{"$ref":"#"},"abcDefs":{"s":{"type":"string","x-a":1},"other":{"$ref":"#"}},`+
		`"properties":{"s":{"$ref":"#/abcDefs/s","title":"S","nullable":true}}}`), "/properties/output")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	const want = `{"abcDefs":{"s":{"type":"string"}},"description":"d","properties":{"s":{"$ref":"#/properties/output/abcDefs/s","nullable":true,"title":"S"}},"type":"object"}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
