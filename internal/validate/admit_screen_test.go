package validate

import (
	"fmt"
	"regexp/syntax"
	"strings"
	"testing"
	"time"

	oracle "github.com/santhosh-tekuri/jsonschema/v6"
)

// compileErr compiles and returns the admission error as a *ScanError.
func compileErr(t *testing.T, schema string) *ScanError {
	t.Helper()
	_, err := Compile([]byte(schema))
	if err == nil {
		return nil
	}
	se, ok := err.(*ScanError)
	if !ok {
		t.Fatalf("Compile(%.60s): %T %v, want *ScanError", schema, err, err)
	}
	return se
}

// Forbidden and unknown keywords are rejected wherever a schema is
// expected, and the error points at the keyword.
func TestScreenRejectsAtSchemaPositions(t *testing.T) {
	t.Parallel()
	positions := []struct{ wrap, ptr string }{
		{`%s`, ""},
		{`{"properties":{"a":%s}}`, "/properties/a"},
		{`{"properties":{"$ref":%s}}`, "/properties/$ref"},
		{`{"patternProperties":{"^x":%s}}`, "/patternProperties/^x"},
		{`{"additionalProperties":%s}`, "/additionalProperties"},
		{`{"propertyNames":%s}`, "/propertyNames"},
		{`{"dependencies":{"a":%s}}`, "/dependencies/a"},
		{`{"items":%s}`, "/items"},
		{`{"items":[true,%s]}`, "/items/1"},
		{`{"additionalItems":%s}`, "/additionalItems"},
		{`{"contains":%s}`, "/contains"},
		{`{"allOf":[%s]}`, "/allOf/0"},
		{`{"anyOf":[{},%s]}`, "/anyOf/1"},
		{`{"oneOf":[%s]}`, "/oneOf/0"},
		{`{"not":%s}`, "/not"},
		{`{"if":%s}`, "/if"},
		{`{"then":%s}`, "/then"},
		{`{"else":%s}`, "/else"},
		{`{"properties":{"a/b~c":{"items":%s}}}`, "/properties/a~1b~0c/items"},
	}
	keywords := []struct{ schema, key, detail string }{
		{`{"$ref":"#/nowhere"}`, "$ref", "points to nothing"},
		{`{"$ref":"#/definitions/a/required","definitions":{"a":{"required":["x"]}}}`, "$ref", "points to "},
		{`{"$ref":"file:///etc/passwd"}`, "$ref", "refers to another document"},
		{`{"$ref":"http://example.invalid/x"}`, "$ref", "refers to another document"},
		{`{"$ref":"#a"}`, "$ref", `names the anchor "a", which no schema in this document declares`},
		{`{"$ref":"#/a~2"}`, "$ref", "not a valid JSON Pointer"},
		{`{"$ref":7}`, "$ref", "must be a string"},
		{`{"definitions":{"a":{"$ref":"#/x"}}}`, "definitions/a/$ref", "points to nothing"},
		{`{"$defs":{"a":{"requird":["x"]}}}`, "$defs/a/requird", `did you mean "required"`},
		{`{"definitions":[]}`, "definitions", "must be an object"},
		{`{"nullable":"yes"}`, "nullable", "must be a boolean"},
		{`{"requird":["a"]}`, "requird", `did you mean "required"`},
		{`{"requried":["a"]}`, "requried", `did you mean "required"`}, //nolint:misspell // a typo on purpose
		{`{"minLenght":1}`, "minLenght", `did you mean "minLength"`},
		{`{"additonalProperties":false}`, "additonalProperties", `did you mean "additionalProperties"`},
		{`{"MaxItems":1}`, "MaxItems", `did you mean "maxItems"`},
		{`{"$id":7}`, "$id", "must be a string"},
	}
	for _, p := range positions {
		for _, k := range keywords {
			if p.ptr == "" && k.key == "$schema" {
				continue
			}
			schema := fmt.Sprintf(p.wrap, k.schema)
			se := compileErr(t, schema)
			if se == nil {
				t.Errorf("%s: accepted", schema)
				continue
			}
			want := p.ptr + "/" + k.key
			if se.Pointer != want || !strings.Contains(se.Detail, k.detail) {
				t.Errorf("%s: %q %q, want %q containing %q", schema, se.Pointer, se.Detail, want, k.detail)
			}
		}
	}
}

// Literal data and property names may hold keyword names, references and
// the meta-schema's own URI: they are not schema positions.
func TestScreenAcceptsLiteralData(t *testing.T) {
	t.Parallel()
	for _, schema := range []string{
		`{"properties":{"$ref":{"type":"string"},"$id":{},"id":{},"definitions":{},"$defs":{},"$schema":{},"nullable":{}}}`,
		`{"required":["$ref","$id","id"],"dependencies":{"$ref":["$id"],"id":{"required":["definitions"]}}}`,
		`{"patternProperties":{"^\\$ref$":{}},"propertyNames":{"enum":["$ref","$id"]}}`,
		`{"const":{"$ref":"file:///etc/passwd","$id":"http://json-schema.org/draft-07/schema#","$schema":"http://example.invalid/meta"}}`,
		`{"enum":[{"$ref":"http://example.invalid/x"},{"definitions":{"a":{"$ref":"#"}}},"$id"]}`,
		`{"default":{"$ref":"#","id":"http://example.invalid/"},"examples":[{"$ref":"http://example.invalid/"},{"$defs":{}}]}`,
		`{"properties":{"a":{"default":{"$ref":"#/definitions/x"}}},"title":"$ref","description":"see $id","$comment":"$ref"}`,
	} {
		if se := compileErr(t, schema); se != nil {
			t.Errorf("%s: %v", schema, se)
		}
	}
}

func TestScreenSchemaDialect(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		`{}`, `{"$schema":"http://json-schema.org/draft-07/schema#"}`, `{"$schema":"http://json-schema.org/draft-07/schema"}`,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema"}`, `{"$schema":"https://json-schema.org/draft/2020-12/schema#"}`,
		`{"items":{"$schema":"http://json-schema.org/draft-07/schema#"}}`, // a bundled schema of the same dialect
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"a":{"$schema":"https://json-schema.org/draft/2020-12/schema"}}}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#"}`, `{"$schema":"http://json-schema.org/draft-04/schema"}`,
		`{"$schema":"http://json-schema.org/draft-06/schema#"}`, `{"$schema":"http://json-schema.org/draft-06/schema"}`,
		`{"$schema":"https://json-schema.org/draft/2019-09/schema"}`, `{"$schema":"https://json-schema.org/draft/2019-09/schema#"}`,
	} {
		if se := compileErr(t, ok); se != nil {
			t.Errorf("%s: %v", ok, se)
		}
	}
	// Below the root of a Draft-04 to Draft-07 document, $schema means
	// nothing (the oracle, too, reads the schema in the document's
	// dialect): warned.
	for _, schema := range []string{`{"items":{"$schema":"https://json-schema.org/draft/2020-12/schema"}}`,
		`{"$schema":"` + Draft04URI + `","items":{"$schema":"http://example.invalid/meta"}}`} {
		s, err := Compile([]byte(schema))
		if err != nil || len(s.Warnings) != 1 || s.Warnings[0].Location != "/items/$schema" {
			t.Errorf("%s: %v %+v", schema, err, s)
		}
	}
	for _, c := range []struct{ schema, ptr string }{
		{`{"$schema":"http://json-schema.org/draft-03/schema#"}`, "/$schema"},
		{`{"$schema":"http://json-schema.org/schema#"}`, "/$schema"},
		{`{"$schema":"https://json-schema.org/draft/2019-09/schema","items":{"$schema":"https://json-schema.org/draft/2020-12/schema"}}`, "/items/$schema"},
		{`{"$schema":"https://json-schema.org/draft-07/schema#"}`, "/$schema"},
		{`{"$schema":"http://example.invalid/meta","type":"string"}`, "/$schema"},
		{`{"$schema":7}`, "/$schema"},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema","items":{"$schema":"http://json-schema.org/draft-07/schema#"}}`, "/items/$schema"},
	} {
		se := compileErr(t, c.schema)
		if se == nil || se.Pointer != c.ptr {
			t.Errorf("%s: %v, want an error at %s", c.schema, se, c.ptr)
		}
	}
}

func TestScreenFormats(t *testing.T) {
	t.Parallel()
	for _, f := range Formats {
		if se := compileErr(t, `{"type":"string","format":"`+f+`"}`); se != nil {
			t.Errorf("%s: %v", f, se)
		}
	}
	// formats nothing checks are annotations: admitted, with a warning
	// (none for the OpenAPI formats that assert nothing by definition)
	for _, f := range []string{"regex", "idn-hostname", "unknown-format", "", "EMAIL", "duration", "password", "binary"} {
		s, err := Compile([]byte(`{"properties":{"a":{"format":"` + f + `"}}}`))
		if err != nil {
			t.Errorf("%q: %v", f, err)
			continue
		}
		warned := len(s.Warnings) == 1 && s.Warnings[0].Location == "/properties/a/format" && s.Warnings[0].Keyword == "format" &&
			strings.Contains(s.Warnings[0].Message, "is not checked")
		if want := f != "password" && f != "binary"; warned != want || (!want && len(s.Warnings) > 0) {
			t.Errorf("%q: warnings %+v", f, s.Warnings)
		}
		if r := s.Validate([]byte(`{"a":"not anything in particular"}`)); !r.Valid() {
			t.Errorf("%q: %s", f, r.Summary())
		}
	}
	if se := compileErr(t, `{"format":1}`); se == nil || se.Pointer != "/format" {
		t.Errorf("numeric format: %v", se)
	}
}

func TestScreenPatterns(t *testing.T) {
	t.Parallel()
	if se := compileErr(t, `{"pattern":"^[a-z]+\\d{2,4}$","patternProperties":{"^x-":{}}}`); se != nil {
		t.Fatal(se)
	}
	// the largest repetition under the instruction cap compiles; one more
	// does not (Go allows counts up to 1000, so the rest follows .{1000})
	rep := func(reps int) string { return fmt.Sprintf(".{1000}.{%d}", reps) }
	n := 0
	for reps := 0; reps < 100; reps++ {
		insts, err := patternInsts(rep(reps))
		if err != nil {
			t.Fatal(err)
		}
		if insts > MaxPatternInsts {
			n = reps
			break
		}
	}
	if se := compileErr(t, `{"pattern":"`+rep(n-1)+`"}`); n == 0 || se != nil {
		t.Errorf("%s: %v", rep(n-1), se)
	}
	for _, c := range []struct{ schema, ptr, detail string }{
		{`{"pattern":"` + rep(n) + `"}`, "/pattern", "instructions"},
		{`{"pattern":".{1000}.{100}x"}`, "/pattern", "instructions"},
		{`{"pattern":"` + strings.Repeat(".{1000}", 36) + `"}`, "/pattern", "about"},
		{`{"pattern":"(?=x)"}`, "", ""}, // ECMAScript: run by regexp2 (ecma.go)
		{`{"pattern":"\\cA"}`, "", ""},
		{`{"pattern":"(?<=a)(b)\\1"}`, "", ""},
		{`{"patternProperties":{"^(?!@@)\\w+$":{}}}`, "", ""}, // ECMAScript: ecma_keys.go
		{`{"patternProperties":{"^(?!x":{}}}`, "/patternProperties/^(?!x", "neither ECMAScript nor RE2 syntax"},
		{`{"pattern":"(?!x"}`, "/pattern", "neither ECMAScript nor RE2 syntax"},
		{`{"pattern":"a{2,1}"}`, "/pattern", "neither ECMAScript nor RE2 syntax"},
		{`{"pattern":"(a"}`, "/pattern", "RE2"},
		{`{"patternProperties":{"^(?<name>x)":{}}}`, "/patternProperties/^(?<name>x)", ""},
		{`{"patternProperties":{"[":{}}}`, "/patternProperties/[", "RE2"},
		{`{"pattern":"` + strings.Repeat("a", MaxPatternBytes+1) + `"}`, "/pattern", "bytes"},
		{`{"pattern":5}`, "/pattern", "must be a string"},
	} {
		se := compileErr(t, c.schema)
		if c.detail == "" { // (?<name>) is valid RE2 since Go 1.22; ECMAScript-only patterns
			if se != nil {
				t.Errorf("%.60s: %v", c.schema, se)
			}
			continue
		}
		if se == nil || se.Pointer != c.ptr || !strings.Contains(se.Detail, c.detail) {
			t.Errorf("%.60s: %v, want %s containing %q", c.schema, se, c.ptr, c.detail)
		}
	}
}

// The estimate on the parsed tree stays within a small factor of the
// compiled size, so the early refusal (above 4× the cap) never refuses a
// pattern that would fit.
func TestPatternEstimate(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`a`, `abc`, `^[a-z]+\d{2,4}$`, `.{245}x`, `(?i)hello|world`, `(a|b|c)*d+e?`, `\pL{100}`, `x{2,}`, `(?:ab){3,7}c`,
		`^([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])(\.([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9\-]{0,61}[a-zA-Z0-9]))*$`,
		`[\p{Greek}\p{Han}]{50,60}`, `(((a{5}){5}){5})`, `^$`, `\b\w+\b`,
	} {
		re, err := syntax.Parse(src, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		prog, _ := syntax.Compile(re.Simplify())
		est, actual := estimateInsts(re), len(prog.Inst)
		if est > 4*actual || actual > 4*est+8 {
			t.Errorf("%s: estimate %d, compiled %d", src, est, actual)
		}
	}
}

func TestScreenCaps(t *testing.T) {
	t.Parallel()
	props := func(n int) string {
		return `{"properties":{` + repeatJoin(n, func(i int) string { return fmt.Sprintf(`"p%d":true`, i) }) + `}}`
	}
	chain := func(n int) string { return nestedAP(n, `{}`) }
	branches := func(n int) string { return `{"anyOf":[` + repeatJoin(n, constant(`{}`)) + `]}` }
	patterns := func(n int) string {
		return `{"properties":{` + repeatJoin(n, func(i int) string { return fmt.Sprintf(`"p%d":{"pattern":"^a%d"}`, i, i) }) + `}}`
	}
	enum := func(n int) string {
		return `{"enum":[` + repeatJoin(n, func(i int) string { return fmt.Sprintf(`"e%d"`, i) }) + `]}`
	}
	mixed := func(n int) string {
		return `{"enum":[null,` + repeatJoin(n-1, func(i int) string { return fmt.Sprintf(`"e%d"`, i) }) + `]}`
	}
	literal := func(n int) string { return `{"const":"` + strings.Repeat("a", n-2) + `"}` }
	names := func(n int) string {
		return `{"dependencies":{"a":[` + repeatJoin(n, func(i int) string { return fmt.Sprintf(`"n%d"`, i) }) + `]}}`
	}
	perPattern, _ := patternInsts(`^a.{490}$`)
	patternsOf := func(n, reps int) string {
		return `{"properties":{` + repeatJoin(n, func(i int) string { return fmt.Sprintf(`"p%d":{"pattern":"^%c.{%d}$"}`, i, 'a'+i%26, reps) }) + `}}`
	}
	for _, c := range []struct {
		name     string
		at, over string
		ptr      string
	}{
		{"subschemas", props(MaxSubschemas - 1), props(MaxSubschemas), "/properties/p99"},
		{"depth", chain(MaxSubschemaDepth), chain(MaxSubschemaDepth + 1), strings.Repeat("/additionalProperties", MaxSubschemaDepth+1)},
		{"branches", branches(MaxBranches), branches(MaxBranches + 1), "/anyOf"},
		{"patterns", patterns(MaxPatterns), patterns(MaxPatterns + 1), ""},
		{"enum", enum(MaxEnumEntries), enum(MaxEnumEntries + 1), "/enum"},
		{"mixed enum", mixed(MaxMixedEnums), mixed(MaxMixedEnums + 1), "/enum"},
		{"literal", literal(MaxLiteralBytes), literal(MaxLiteralBytes + 1), "/const"},
		{"names", names(MaxNames), names(MaxNames + 1), "/dependencies/a"},
		{"pattern instructions", patternsOf(MaxPatternTotal/perPattern, 490), patternsOf(MaxPatternTotal/perPattern+1, 490), ""},
	} {
		if se := compileErr(t, c.at); se != nil {
			t.Errorf("%s at the cap: %v", c.name, se)
		}
		se := compileErr(t, c.over)
		if se == nil {
			t.Errorf("%s over the cap: accepted", c.name)
		} else if c.ptr != "" && c.name != "subschemas" && se.Pointer != c.ptr {
			t.Errorf("%s over the cap: %v, want pointer %s", c.name, se, c.ptr)
		}
	}
}

func TestScreenShapes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ schema, ptr, detail string }{
		{`[]`, "", "a schema must be an object or a boolean"},
		{`{"properties":{"a":1}}`, "/properties/a", "must be an object or a boolean"},
		{`{"type":"text"}`, "/type", "unknown type"},
		{`{"type":["string","string"]}`, "/type/1", "twice"},
		{`{"type":[]}`, "/type", "non-empty"},
		{`{"required":["a","a"]}`, "/required/1", "twice"},
		{`{"required":"a"}`, "/required", "array of strings"},
		{`{"enum":[]}`, "/enum", "non-empty"},
		{`{"enum":[1,1.0]}`, "/enum/1", "duplicates"},
		{`{"enum":[{"a":[1]},{"a":[1]}]}`, "/enum/1", "duplicates"},
		{`{"enum":[0.1,0.10000000000000001]}`, "/enum/1", "64-bit float precision"},
		{`{"multipleOf":0}`, "/multipleOf", "greater than 0"},
		{`{"multipleOf":-2}`, "/multipleOf", "greater than 0"},
		{`{"minLength":-1}`, "/minLength", "non-negative integer"},
		{`{"maxItems":1.5}`, "/maxItems", "non-negative integer"},
		{`{"minLength":5,"maxLength":2}`, "/minLength", "greater than maxLength"},
		{`{"minProperties":3,"maxProperties":2.0}`, "/minProperties", "greater than maxProperties"},
		{`{"allOf":[]}`, "/allOf", "non-empty"},
		{`{"items":[]}`, "/items", "non-empty"},
		{`{"examples":{}}`, "/examples", "must be an array"},
		{`{"uniqueItems":"yes"}`, "/uniqueItems", "boolean"},
		{`{"maximum":"1"}`, "/maximum", "must be a number"},
		{`{"dependencies":{"a":["b","b"]}}`, "/dependencies/a/1", "twice"},
		{`{"dependencies":{"a":5}}`, "/dependencies/a", "object or a boolean"},
		{`{"title":5}`, "/title", "must be a string"},
	} {
		se := compileErr(t, c.schema)
		if se == nil || se.Pointer != c.ptr || !strings.Contains(se.Detail, c.detail) {
			t.Errorf("%s: %v, want %q containing %q", c.schema, se, c.ptr, c.detail)
		}
	}
	// Boolean schemas are schemas; integral decimals are integers.
	for _, ok := range []string{`true`, `false`, `{"items":false,"not":true}`, `{"minLength":2.0,"maxItems":1e1,"minProperties":0.0}`, `{"minimum":1.5,"exclusiveMaximum":1e63}`} {
		if se := compileErr(t, ok); se != nil {
			t.Errorf("%s: %v", ok, se)
		}
	}
}

// Whatever passes the screening passes the meta-schema and compiles: the
// screening is at least as strict as both (the fuzz target checks this on
// arbitrary input).
func TestScreenImpliesMetaAndCompile(t *testing.T) {
	t.Parallel()
	for name, schema := range screenedSchemas() {
		doc, err := Decode([]byte(schema), SchemaLimits)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := screen(doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := metaCheck(doc, draft07); err != nil {
			t.Errorf("%s: meta: %v", name, err)
		}
		adapt(doc, doc, "", nil)
		if _, err := compileDoc(doc); err != nil {
			t.Errorf("%s: compile: %v", name, err)
		}
	}
}

// screenedSchemas are schemas the screening accepts, for properties that
// hold for every accepted schema.
func screenedSchemas() map[string]string {
	m := map[string]string{}
	for _, f := range families {
		m[f.name] = f.schema
	}
	for k, v := range map[string]string{
		"realistic": realisticSchema,
		"keywords": `{"type":["object","null"],"minProperties":1,"maxProperties":9.0,"propertyNames":{"maxLength":8},
			"dependencies":{"a":["b"],"c":{"required":["d"]}},"if":{"required":["x"]},"then":{"properties":{"x":{"const":-0}}},
			"else":{"not":{"enum":[null,{"k":[1,2.50]}]}},"items":[{"format":"uuid"}],"additionalItems":false,
			"contains":{"multipleOf":0.5,"exclusiveMinimum":-1e10},"uniqueItems":true,"readOnly":true,"writeOnly":false,
			"contentMediaType":"application/json","contentEncoding":"base64","examples":[{}],"default":null}`,
		"booleans": `{"allOf":[true,{"anyOf":[false,{"oneOf":[true,false]}]}],"additionalProperties":false,"items":true}`,
	} {
		m[k] = v
	}
	return m
}

// TestLargeEnums: an enum of 5,000 strings (real ones run to thousands:
// time zones, languages, a game engine's 2,461 console variables) is
// admitted, compiled within the cost of an enum of 2,048 values checked
// by the library, and validates as the oracle does, with the enum's own
// error; one with a value that is not a string stays at the library's cap.
func TestLargeEnums(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object","properties":{"tz":{"enum":[` +
		repeatJoin(5000, func(i int) string { return fmt.Sprintf(`"Zone/%d"`, i) }) + `]},"small":{"enum":["a","b"]}}}`
	s := mustCompile(t, schema)
	o := oracleSchema(t, []byte(schema))
	for _, v := range []string{`{"tz":"Zone/0"}`, `{"tz":"Zone/4999"}`, `{"tz":"Zone/5000"}`, `{"tz":"zone/1"}`, `{"tz":1}`,
		`{"tz":null}`, `{"tz":["Zone/1"]}`, `{"small":"a","tz":"Zone/17"}`} {
		inst, _ := oracle.UnmarshalJSON(strings.NewReader(v))
		want := o.Validate(inst) == nil
		r := s.Validate([]byte(v))
		if r.Valid() != want {
			t.Errorf("%s: valid=%v (%s), the oracle says %v", v, r.Valid(), r.Summary(), want)
		}
	}
	r := s.Validate([]byte(`{"tz":"Zone/5000"}`))
	if r.Total != 1 || r.Errors[0].Keyword != "enum" || r.Errors[0].Location != "/tz" ||
		!strings.HasPrefix(r.Errors[0].Message, `must be one of "Zone/0", "Zone/1", `) {
		t.Errorf("%+v", r)
	}
	se := compileErr(t, `{"enum":[1,`+repeatJoin(MaxMixedEnums, func(i int) string { return fmt.Sprintf(`"%d"`, i) })+`]}`)
	if se == nil || se.Pointer != "/enum" || !strings.Contains(se.Detail, "not a string") {
		t.Errorf("mixed: %v", se)
	}
}

// TestHostileSchemasRefusedQuickly: schemas built to make admission slow,
// the caps' and the dialects' (unevaluated keywords over shared
// definitions applied hundreds of times in place, dynamic references,
// Draft-04 documents at the caps), are refused, or admitted, each within
// a second of CPU time.
func TestHostileSchemasRefusedQuickly(t *testing.T) {
	t.Parallel()
	const d20 = `"$schema":"https://json-schema.org/draft/2020-12/schema",`
	doubling := func(depth int) string { // d0 applies d1 twice, ... : 2^depth schemas in place
		defs := make([]string, depth+1)
		for i := range depth {
			defs[i] = fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}],"properties":{"p%d":true}}`, i, i+1, i+1, i)
		}
		defs[depth] = fmt.Sprintf(`"d%d":{"properties":{"z":true}}`, depth)
		return strings.Join(defs, ",")
	}
	cases := map[string]string{
		"unevaluated over shared definitions": `{` + d20 + `"$defs":{` + doubling(6) + `},"properties":{` +
			repeatJoin(MaxSubschemas/2-40, func(i int) string { return fmt.Sprintf(`"k%d":{"$ref":"#/$defs/d0","unevaluatedProperties":false}`, i) }) + `}}`,
		"unevaluated branches over shared definitions": `{` + d20 + `"$defs":{` + doubling(5) + `},"properties":{` +
			repeatJoin(MaxSubschemas/4-40, func(i int) string {
				return fmt.Sprintf(`"k%d":{"anyOf":[{"$ref":"#/$defs/d0"},{"$ref":"#/$defs/d1"}],"unevaluatedProperties":false}`, i)
			}) + `}}`,
		"dynamic references": `{` + d20 + `"$dynamicAnchor":"n","properties":{` +
			repeatJoin(MaxSubschemas-2, func(i int) string { return fmt.Sprintf(`"k%d":{"$dynamicRef":"#n"}`, i) }) + `}}`,
		"draft-04 subschemas": `{"$schema":"` + Draft04URI + `","properties":{` +
			repeatJoin(MaxSubschemas/2, func(i int) string {
				return fmt.Sprintf(`"p%d":{"id":"#a%d","maximum":%d,"exclusiveMaximum":true}`, i, i, i)
			}) + `}}`,
		"ecmascript keys": `{"properties":{` + repeatJoin(MaxPatterns, func(i int) string {
			return fmt.Sprintf(`"p%d":{"patternProperties":{"^(?!a%d)(?=b)":{"type":"string"}}}`, i, i)
		}) + `}}`,
		"enum sets": `{"properties":{` + repeatJoin(3, func(i int) string {
			return fmt.Sprintf(`"e%d":{"enum":[`, i) + repeatJoin(MaxEnumEntries/2, func(j int) string { return fmt.Sprintf(`"%d-%d"`, i, j) }) + `]}`
		}) + `}}`,
	}
	limit := time.Second
	if raceEnabled {
		limit *= 10 // the race detector's instrumentation
	}
	for _, name := range sortedKeysOf(cases) {
		var err error
		took := threadCPU(func() { _, err = Compile([]byte(cases[name])) })
		t.Logf("%s: %s (%v)", name, took, err)
		if took > limit {
			t.Errorf("%s: admission took %s of CPU time", name, took)
		}
	}
}
