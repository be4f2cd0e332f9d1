package validate

import (
	"bytes"
	"strings"
	"testing"

	oracle "github.com/santhosh-tekuri/jsonschema/v6"
)

// dialectCase is a document of one dialect, the warnings it deserves and
// instances with their verdicts, which the oracle (santhosh-tekuri v6, in
// the document's dialect) must give too.
type dialectCase struct {
	name, schema   string
	warnings       []string // locations, in order
	valid, invalid []string
}

func checkDialectCase(t *testing.T, c dialectCase) {
	t.Helper()
	s, err := Compile([]byte(c.schema))
	if err != nil {
		t.Errorf("%s: refused: %v", c.name, err)
		return
	}
	var got []string
	for _, w := range s.Warnings {
		got = append(got, w.Location)
	}
	if strings.Join(got, " ") != strings.Join(c.warnings, " ") {
		t.Errorf("%s: warnings %+v, want at %v", c.name, s.Warnings, c.warnings)
	}
	o := oracleSchema(t, []byte(c.schema))
	check := func(v string, want bool) {
		if r := s.Validate([]byte(v)); r.Valid() != want {
			t.Errorf("%s: %s: valid=%v (%s), want %v", c.name, v, r.Valid(), r.Summary(), want)
		}
		inst, _ := oracle.UnmarshalJSON(bytes.NewReader([]byte(v)))
		if oerr := o.Validate(inst); (oerr == nil) != want {
			t.Errorf("%s: %s: the oracle says %v, want valid=%v", c.name, v, oerr, want)
		}
	}
	for _, v := range c.valid {
		check(v, true)
	}
	for _, v := range c.invalid {
		check(v, false)
	}
}

// TestDraft04AsWritten: a Draft-04 document (with or without the "#") is
// admitted and validated as Draft-04 says: boolean exclusiveMaximum and
// exclusiveMinimum make maximum and minimum exclusive, "id" names
// resources and anchors at any depth, and the keywords later dialects
// added ("const", "$id") are annotations, warned.
func TestDraft04AsWritten(t *testing.T) {
	t.Parallel()
	for _, uri := range []string{Draft04URI, strings.TrimSuffix(Draft04URI, "#")} {
		checkDialectCase(t, dialectCase{name: uri,
			schema: `{"$schema":"` + uri + `","id":"http://example.com/root.json","type":"object","required":["pct"],` +
				`"definitions":{"pos":{"id":"#pos","type":"number","minimum":0,"exclusiveMinimum":true},` +
				`"small":{"id":"small.json","maximum":3,"exclusiveMaximum":true,"definitions":{"i":{"type":"integer"}},"allOf":[{"$ref":"#/definitions/i"}]}},` +
				`"properties":{"pct":{"type":"number","maximum":100,"exclusiveMaximum":true,"minimum":0,"exclusiveMinimum":false},` +
				`"n":{"$ref":"#pos"},"s":{"$ref":"small.json"},"c":{"const":5},"i":{"$id":"#x","type":"integer"}}}`,
			warnings: []string{"/properties/c/const", "/properties/i/$id"},
			valid:    []string{`{"pct":99.5}`, `{"pct":0}`, `{"pct":5,"n":0.1}`, `{"pct":5,"c":6}`, `{"pct":1,"s":2}`},
			invalid:  []string{`{"pct":100}`, `{"pct":-1}`, `{"pct":5,"n":0}`, `{"pct":5,"i":1.5}`, `{}`, `{"pct":1,"s":3}`, `{"pct":1,"s":2.5}`},
		})
	}
	// What the Draft-04 meta-schema refuses is refused.
	for _, c := range []struct{ schema, ptr, detail string }{
		{`{"$schema":"` + Draft04URI + `","exclusiveMaximum":true}`, "", "Draft-04 meta-schema"},
		{`{"$schema":"` + Draft04URI + `","properties":{"a":true}}`, "/properties/a", "Draft-04 meta-schema"},
		{`{"$schema":"` + Draft04URI + `","required":[]}`, "/required", "Draft-04 meta-schema"},
		{`{"$schema":"` + Draft04URI + `","maximum":1,"exclusiveMaximum":1}`, "/exclusiveMaximum", "must be a boolean"},
	} {
		se := compileErr(t, c.schema)
		if se == nil || se.Pointer != c.ptr || !strings.Contains(se.Detail, c.detail) {
			t.Errorf("%s: %v, want %q at %q", c.schema, se, c.detail, c.ptr)
		}
	}
}

// TestDraft06AsWritten: a Draft-06 document is validated as Draft-06 says:
// numeric exclusive bounds, "$id" anchors, const, contains, propertyNames
// and boolean schemas apply, and if/then/else, which Draft-07 added, are
// annotations, warned.
func TestDraft06AsWritten(t *testing.T) {
	t.Parallel()
	for _, uri := range []string{Draft06URI, strings.TrimSuffix(Draft06URI, "#")} {
		checkDialectCase(t, dialectCase{name: uri,
			schema: `{"$schema":"` + uri + `","$id":"http://example.com/r6.json","propertyNames":{"maxLength":4},` +
				`"definitions":{"pos":{"$id":"#pos","type":"number","exclusiveMinimum":0}},` +
				`"properties":{"n":{"$ref":"#pos"},"pct":{"exclusiveMaximum":100},"k":{"const":"x"},"tags":{"contains":{"const":"a"}},` +
				`"any":true,"no":false,"cond":{"if":{"type":"string"},"then":{"minLength":3}}}}`,
			warnings: []string{"/properties/cond/if", "/properties/cond/then"},
			valid:    []string{`{"n":1,"pct":99,"k":"x","tags":["b","a"],"any":[]}`, `{"cond":"ab"}`, `{}`},
			invalid:  []string{`{"n":0}`, `{"pct":100}`, `{"k":"y"}`, `{"tags":["b"]}`, `{"no":1}`, `{"longer":1}`},
		})
	}
}

// TestModernTranslated: 2019-09 and 2020-12 documents using
// $recursiveRef/$dynamicRef (whose target does not depend on the path a
// value took), dependentRequired, dependentSchemas, and unevaluated
// keywords whose evaluated members are known from the schema (beside
// properties, through allOf and $ref, through branches that evaluate the
// same members) are admitted and validate as the oracle does, in 2019-09
// and in 2020-12.
func TestModernTranslated(t *testing.T) {
	t.Parallel()
	const d19, d20 = `"$schema":"` + Draft2019URI + `",`, `"$schema":"` + Draft2020URI + `",`
	for _, c := range []dialectCase{
		{name: "2019-09 tree, dependents, unevaluatedProperties",
			schema: `{` + d19 + `"$id":"https://example.com/tree","$recursiveAnchor":true,"type":"object",` +
				`"properties":{"data":true,"a":true,"b":true,"c":true,"d":true,"children":{"type":"array","items":{"$recursiveRef":"#"}}},` +
				`"dependentRequired":{"a":["b"]},"dependentSchemas":{"c":{"required":["d"]}},"unevaluatedProperties":false}`,
			valid:   []string{`{"data":1,"children":[{"data":2,"children":[]}]}`, `{"a":1,"b":2}`, `{"c":1,"d":2}`},
			invalid: []string{`{"children":[{"extra":1}]}`, `{"a":1}`, `{"c":1}`, `{"zzz":1}`, `[]`}},
		{name: "2019-09 unevaluatedProperties through allOf and beside $ref",
			schema: `{` + d19 + `"$defs":{"base":{"properties":{"x":{"type":"integer"}}}},"properties":{` +
				`"all":{"allOf":[{"$ref":"#/$defs/base"}],"properties":{"y":true},"unevaluatedProperties":false},` +
				`"ref":{"$ref":"#/$defs/base","unevaluatedProperties":{"type":"string"}},` +
				`"same":{"oneOf":[{"properties":{"k":{"const":1}}},{"properties":{"k":{"const":2}}}],"unevaluatedProperties":false}}}`,
			valid:   []string{`{"all":{"x":1,"y":2},"ref":{"x":1,"z":"s"},"same":{"k":2}}`},
			invalid: []string{`{"all":{"z":1}}`, `{"all":{"x":"s"}}`, `{"ref":{"z":1}}`, `{"same":{"k":2,"j":1}}`}},
		{name: "2019-09 unevaluatedItems",
			schema: `{` + d19 + `"items":[{"type":"integer"}],"unevaluatedItems":false}`,
			valid:  []string{`[1]`, `[]`}, invalid: []string{`[1,2]`, `["a"]`}},
		{name: "2020-12 $dynamicRef declared at the root, unevaluatedProperties",
			schema: `{` + d20 + `"$dynamicAnchor":"node","type":"object","properties":{"v":{"type":"integer"},` +
				`"kids":{"type":"array","items":{"$dynamicRef":"#node"}}},"unevaluatedProperties":false}`,
			valid:   []string{`{"v":1,"kids":[{"v":2,"kids":[]}]}`},
			invalid: []string{`{"kids":[{"v":"x"}]}`, `{"kids":[{"w":1}]}`}},
	} {
		checkDialectCase(t, c)
	}
	// What depends on the path a value took is refused, naming it.
	for _, c := range []struct{ schema, ptr, detail string }{
		{`{` + d20 + `"anyOf":[{"properties":{"a":true}},{"properties":{"b":true}}],"unevaluatedProperties":false}`,
			"/unevaluatedProperties", "/anyOf evaluates depend on which"},
		{`{` + d20 + `"if":{"properties":{"a":{"const":1}}},"then":{"properties":{"b":true}},"unevaluatedProperties":false}`,
			"/unevaluatedProperties", "/if evaluates depend on which"},
		{`{` + d20 + `"contains":{"type":"string"},"unevaluatedItems":false}`, "/unevaluatedItems", "/contains evaluates the items it matches"},
		{`{` + d19 + `"$defs":{"a":{"$id":"a.json","$recursiveAnchor":true,"items":{"$recursiveRef":"#"}},` +
			`"b":{"$id":"b.json","$recursiveAnchor":true,"items":{"$ref":"a.json"}}},"items":{"$ref":"b.json"}}`,
			"/$defs/a/items/$recursiveRef", "depending on the path"},
	} {
		se := compileErr(t, c.schema)
		if se == nil || se.Pointer != c.ptr || !strings.Contains(se.Detail, c.detail) {
			t.Errorf("%s: %v, want %q at %q", c.schema, se, c.detail, c.ptr)
		}
	}
}
