package validate

import (
	"fmt"
	"strings"
	"testing"
)

// Local references resolve inside the document, recursive ones included,
// and give the verdicts a Draft-07 validator gives.
func TestRefsResolve(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, schema   string
		valid, invalid []string
	}{
		{"pydantic-style $defs and root $ref",
			`{"$defs":{"Item":{"title":"Item","type":"object","properties":{"sku":{"type":"string","title":"Sku"},"qty":{"type":"integer","minimum":1}},"required":["sku","qty"]}},
			  "$ref":"#/$defs/Item"}`,
			[]string{`{"sku":"a","qty":1}`}, []string{`{"sku":"a","qty":0}`, `{"sku":1,"qty":1}`, `[]`}},
		{"tree through $defs",
			`{"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["value"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
			[]string{`{"value":1}`, `{"value":1,"children":[{"value":2,"children":[{"value":3,"children":[]}]}]}`},
			[]string{`{"value":1,"children":[{"value":2,"children":[{"value":"3"}]}]}`, `{"value":1,"children":[{}]}`, `{"value":1,"extra":0}`}},
		{"linked list through the root",
			`{"type":"object","properties":{"v":{"type":"string"},"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["v","next"]}`,
			[]string{`{"v":"a","next":null}`, `{"v":"a","next":{"v":"b","next":{"v":"c","next":null}}}`},
			[]string{`{"v":"a","next":{"v":"b"}}`, `{"v":"a","next":{"v":1,"next":null}}`}},
		{"mutual recursion",
			`{"definitions":{"A":{"type":"object","properties":{"b":{"$ref":"#/definitions/B"}}},"B":{"type":"array","items":{"$ref":"#/definitions/A"}}},"$ref":"#/definitions/A"}`,
			[]string{`{"b":[{"b":[]},{}]}`}, []string{`{"b":[{"b":{}}]}`, `{"b":[1]}`}},
		{"escaped and percent-encoded pointers",
			`{"definitions":{"a/b":{"type":"string"},"c~d":{"type":"integer"},"e%f":{"type":"boolean"},"g h":{"type":"null"}},
			  "properties":{"p":{"$ref":"#/definitions/a~1b"},"q":{"$ref":"#/definitions/c~0d"},"r":{"$ref":"#/definitions/e%25f"},"s":{"$ref":"#/definitions/g%20h"}}}`,
			[]string{`{"p":"x","q":1,"r":true,"s":null}`}, []string{`{"p":1}`, `{"q":"x"}`, `{"r":null}`, `{"s":false}`}},
		{"pointers into properties and arrays",
			`{"allOf":[{"type":"object"}],"properties":{"a":{"type":"string","maxLength":2},"b":{"$ref":"#/properties/a"},"c":{"$ref":"#/allOf/0"}}}`,
			[]string{`{"a":"x","b":"yy","c":{}}`}, []string{`{"b":"yyy"}`, `{"c":[]}`}},
		{"chain of references",
			`{"definitions":{"a":{"$ref":"#/definitions/b"},"b":{"$ref":"#/definitions/c"},"c":{"type":"integer"}},"items":{"$ref":"#/definitions/a"}}`,
			[]string{`[1,2]`}, []string{`[1,"2"]`}},
		{"root $id is a name; a reference through it stays in the document",
			`{"$id":"https://example.invalid/schemas/order.json","definitions":{"n":{"type":"number"}},
			  "properties":{"a":{"$ref":"https://example.invalid/schemas/order.json#/definitions/n"},"b":{"$ref":"order.json#/definitions/n"},"c":{"$ref":"#/definitions/n"}}}`,
			[]string{`{"a":1,"b":2,"c":3}`}, []string{`{"a":"1"}`, `{"b":"2"}`, `{"c":"3"}`}},
		{"annotations beside $ref are admitted and ignored",
			`{"definitions":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/s","description":"A","title":"a","default":"x","examples":["y"],"x-order":1,"markdownDescription":"*A*"}}}`,
			[]string{`{"a":"x"}`}, []string{`{"a":1}`}},
		{"2020-12: keywords beside $ref apply",
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/s","maxLength":2},"b":{"$ref":"#/$defs/s","allOf":[{"minLength":1}]}}}`,
			[]string{`{"a":"xy","b":"z"}`}, []string{`{"a":"xyz"}`, `{"a":1}`, `{"b":""}`}},
	}
	for _, c := range cases {
		s, err := Compile([]byte(c.schema))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		for _, v := range c.valid {
			if r := s.Validate([]byte(v)); !r.Valid() {
				t.Errorf("%s: %s: %s", c.name, v, r.Summary())
			}
		}
		for _, v := range c.invalid {
			if r := s.Validate([]byte(v)); r.Valid() {
				t.Errorf("%s: %s: valid, want invalid", c.name, v)
			}
		}
	}
}

// References that would recurse in place, and reference graphs past the
// caps, are refused at admission, naming the place.
func TestRefsRefused(t *testing.T) {
	t.Parallel()
	// doubling: d0 applies d1 twice, d1 applies d2 twice, ... in place.
	doubling := func(levels int) string {
		defs := make([]string, levels+1)
		for i := range levels {
			defs[i] = fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/definitions/d%d"},{"$ref":"#/definitions/d%d"}]}`, i, i+1, i+1)
		}
		defs[levels] = fmt.Sprintf(`"d%d":{"type":"string"}`, levels)
		return `{"definitions":{` + strings.Join(defs, ",") + `},"properties":{"x":{"$ref":"#/definitions/d0"}}}`
	}
	chain := func(n int) string {
		defs := make([]string, n+1)
		for i := range n {
			defs[i] = fmt.Sprintf(`"c%02d":{"$ref":"#/definitions/c%02d"}`, i, i+1)
		}
		defs[n] = fmt.Sprintf(`"c%02d":{}`, n)
		return `{"definitions":{` + strings.Join(defs, ",") + `},"items":{"$ref":"#/definitions/c00"}}`
	}
	// references to each level of a deep definition: the library builds
	// each target's subtree once more.
	levels := func(n int) string {
		def := `true`
		for range 15 {
			def = `{"properties":{"n":` + def + `,` + repeatJoin(64, func(j int) string { return fmt.Sprintf(`"s%d":true`, j) }) + `}}`
		}
		return `{"definitions":{"big":` + def + `},"properties":{` + repeatJoin(n, func(i int) string {
			return fmt.Sprintf(`"r%d":{"$ref":"#/definitions/big%s"}`, i, strings.Repeat("/properties/n", i))
		}) + `}}`
	}
	for _, c := range []struct{ name, schema, ptr, detail string }{
		{"self", `{"$ref":"#"}`, "/$ref", "reference cycle"},
		{"through anyOf", `{"type":"object","anyOf":[{"$ref":"#"}]}`, "/anyOf/0/$ref", "reference cycle"},
		{"through definitions", `{"definitions":{"a":{"$ref":"#/definitions/b"},"b":{"not":{"$ref":"#/definitions/a"}}},"items":{"$ref":"#/definitions/a"}}`, "/definitions/b/not/$ref", "reference cycle"},
		{"through if", `{"definitions":{"a":{"if":{"$ref":"#/definitions/a"}}}}`, "/definitions/a/if/$ref", "reference cycle"},
		{"through a dependency", `{"dependencies":{"a":{"$ref":"#"}}}`, "/dependencies/a/$ref", "reference cycle"},
		{"in-place fan-out", doubling(9), "", "schemas apply to one location"},
		{"in-place depth", chain(MaxInPlaceDepth), "", "inside one another"},
		{"schemas to build", levels(15), "", "schemas to build"},
	} {
		se := compileErr(t, c.schema)
		if se == nil {
			t.Errorf("%s: admitted", c.name)
			continue
		}
		if (c.ptr != "" && se.Pointer != c.ptr) || !strings.Contains(se.Detail, c.detail) {
			t.Errorf("%s: %v, want %q containing %q", c.name, se, c.ptr, c.detail)
		}
	}
	// Just inside the caps.
	for name, schema := range map[string]string{"fan-out": doubling(7), "depth": chain(MaxInPlaceDepth - 2), "build": levels(5)} {
		if se := compileErr(t, schema); se != nil {
			t.Errorf("%s at the cap: %v", name, se)
		}
	}
}

// A recursive schema over the deepest and widest values the scan admits
// stays within the budget or is refused by it; the estimator's walk ends.
func TestRefsRecursionBounded(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"$defs":{"n":{"type":"object","properties":{"k":{"type":"array","items":{"$ref":"#/$defs/n"}},"v":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"string","pattern":"^a+$"}]}}}},"$ref":"#/$defs/n"}`)
	deep := nested(15, "v", `{"k":[]}`)
	wide := `{"k":[` + repeatJoin(5000, constant(`{"v":"aaa"}`)) + `]}`
	for name, v := range map[string]string{"deep": deep, "wide": wide, "deep-invalid": nested(15, "v", `{"k":[1]}`)} {
		r := s.Validate([]byte(v))
		t.Logf("%s: %d bytes, valid=%v %s", name, len(v), r.Valid(), truncate(r.Summary(), 120))
	}
	if r := s.Validate([]byte(deep)); !r.Valid() {
		t.Errorf("deep: %s", r.Summary())
	}
	if r := s.Validate([]byte(nested(15, "v", `{"k":[1]}`))); r.Valid() {
		t.Error("deep-invalid: valid")
	}
}

// A 2019-09 or 2020-12 document is admitted only when it translates
// exactly: a keyword chatd cannot check, or one the dialect removed, is
// refused, naming itself.
func TestModernRefusals(t *testing.T) {
	t.Parallel()
	const dialect = `"$schema":"https://json-schema.org/draft/2020-12/schema",`
	values := map[string]string{
		"prefixItems": `[{}]`, "minContains": `1`, "maxContains": `2`, "$vocabulary": `{}`,
		"additionalItems": `false`, "dependencies": `{}`, "$recursiveRef": `"#"`, "$recursiveAnchor": `true`,
	}
	for _, d := range []string{dialect, `"$schema":"https://json-schema.org/draft/2019-09/schema",`} {
		for k, v := range values {
			if d != dialect && (k == "additionalItems" || k == "$recursiveRef" || k == "$recursiveAnchor" || k == "prefixItems") {
				continue // 2019-09 keywords (prefixItems: unknown there)
			}
			for _, c := range []struct{ schema, ptr string }{
				{`{` + d + `"` + k + `":` + v + `}`, "/" + escapePointer(k)},
				{`{` + d + `"properties":{"a":{"items":{"` + k + `":` + v + `}}}}`, "/properties/a/items/" + escapePointer(k)},
				{`{` + d + `"$defs":{"d":{"` + k + `":` + v + `}}}`, "/$defs/d/" + escapePointer(k)},
			} {
				se := compileErr(t, c.schema)
				if se == nil || se.Pointer != c.ptr || !strings.Contains(se.Detail, `"`+k+`"`) {
					t.Errorf("%s: %v, want a refusal at %s naming %q", c.schema, se, c.ptr, k)
				}
			}
		}
	}
	se := compileErr(t, `{`+dialect+`"items":[{},{}]}`)
	if se == nil || se.Pointer != "/items" || !strings.Contains(se.Detail, "prefixItems") {
		t.Errorf("items as a list: %v", se)
	}
	// What translates is admitted: $defs, $ref with siblings, items as one
	// schema, const, contains without min/maxContains.
	s := mustCompile(t, `{`+dialect+`"$defs":{"n":{"type":"integer"}},"type":"object","properties":{
		"a":{"$ref":"#/$defs/n","minimum":3},"b":{"type":"array","items":{"$ref":"#/$defs/n"},"contains":{"const":7}}}}`)
	for v, want := range map[string]bool{`{"a":3,"b":[7,1]}`: true, `{"a":2}`: false, `{"b":[1]}`: false, `{"b":[7,"x"]}`: false} {
		if got := s.Validate([]byte(v)).Valid(); got != want {
			t.Errorf("%s: valid=%v, want %v", v, got, want)
		}
	}
}
