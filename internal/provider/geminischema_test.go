package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/validate"
)

func TestGeminiSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want, err string }{
		{"unchanged", `{"type":"object","properties":{"a":{"type":"string","enum":["x"]}},"required":["a"],"additionalProperties":false}`,
			`{"type":"object","properties":{"a":{"type":"string","enum":["x"]}},"required":["a"],"additionalProperties":false}`, ""},
		{"root $defs kept, $schema dropped",
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"A":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/A"}}}`,
			`{"$defs":{"A":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/A"}}}`, ""},
		{"nested definitions hoisted (the finalizer's embedding)",
			`{"type":"object","properties":{"output":{"$defs":{"A":{"type":"integer"}},"properties":{"a":{"$ref":"#/properties/output/$defs/A"}}}}}`,
			`{"type":"object","$defs":{"A":{"type":"integer"}},"properties":{"output":{"properties":{"a":{"$ref":"#/$defs/A"}}}}}`, ""},
		{"root recursion of the embedded schema",
			`{"type":"object","properties":{"output":{"type":"object","properties":{"next":{"$ref":"#/properties/output"}}}}}`,
			`{"type":"object","$defs":{"output":{"type":"object","properties":{"next":{"$ref":"#/$defs/output"}}}},` +
				`"properties":{"output":{"type":"object","properties":{"next":{"$ref":"#/$defs/output"}}}}}`, ""},
		{"a reference to a property, a clashing name",
			`{"$defs":{"b":{"type":"null"}},"properties":{"b":{"type":"string"},"c":{"$ref":"#/properties/b"},"d":{"$ref":"#/$defs/b"}}}`,
			`{"$defs":{"b":{"type":"null"},"b_2":{"type":"string"}},"properties":{"b":{"type":"string"},"c":{"$ref":"#/$defs/b_2"},"d":{"$ref":"#/$defs/b"}}}`, ""},
		{"draft-07 definitions", `{"definitions":{"A":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/A"}}}`,
			`{"$defs":{"A":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/A"}}}`, ""},
		{"siblings of $ref wrapped", `{"$defs":{"A":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/A","description":"d","minLength":2}}}`,
			`{"$defs":{"A":{"type":"string"}},"properties":{"a":{"anyOf":[{"$ref":"#/$defs/A"}],"description":"d","minLength":2}}}`, ""},
		{"one-branch allOf", `{"$defs":{"A":{"type":"string"}},"properties":{"a":{"allOf":[{"$ref":"#/$defs/A"}],"description":"d"}}}`,
			`{"$defs":{"A":{"type":"string"}},"properties":{"a":{"anyOf":[{"$ref":"#/$defs/A"}],"description":"d"}}}`, ""},
		{"instances are not schemas", `{"properties":{"a":{"const":{"$ref":"#/nowhere","$defs":1},"default":{"$ref":"x"}}}}`,
			`{"properties":{"a":{"const":{"$ref":"#/nowhere","$defs":1},"default":{"$ref":"x"}}}}`, ""},
		{"$ref beside anyOf", `{"$defs":{"A":{}},"properties":{"a":{"$ref":"#/$defs/A","anyOf":[{}]}}}`, "", `(at "/properties/a")`},
		{"unresolved", `{"properties":{"a":{"$ref":"#/$defs/missing"}}}`, "", "does not resolve"},
	} {
		var in map[string]any
		if err := json.Unmarshal([]byte(tc.in), &in); err != nil {
			t.Fatal(err)
		}
		before, _ := json.Marshal(in)
		got, err := geminiSchema(in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var want any
		_ = json.Unmarshal([]byte(tc.want), &want)
		b, _ := json.Marshal(got)
		var gotAny any
		_ = json.Unmarshal(b, &gotAny)
		if !reflect.DeepEqual(gotAny, want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, b, tc.want)
		}
		if after, _ := json.Marshal(in); string(after) != string(before) {
			t.Errorf("%s: the input changed to %s", tc.name, after)
		}
	}
}

// FuzzGeminiSchema: for any schema admission accepts, embedded as the
// finalizer embeds it, geminiSchema either refuses a $ref beside anyOf or
// oneOf or returns Gemini's form — every reference "#/$defs/NAME" with
// NAME defined at the root, a $ref alone in its object, no definitions
// below the root — without touching its input; the cycle check runs on it.
func FuzzGeminiSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
		`{"$defs":{"N":{"type":"object","properties":{"next":{"$ref":"#/$defs/N"}},"required":["next"]}},"$ref":"#/$defs/N"}`,
		`{"definitions":{"A":{"type":"integer"}},"properties":{"a":{"$ref":"#/definitions/A","description":"x"},"b":{"$ref":"#/properties/a"}}}`,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"x":{"$ref":"#","minProperties":1},"y":{"allOf":[{"$ref":"#/properties/x"}]}}}`,
		`{"properties":{"a~b/c":{"type":"string"},"d":{"$ref":"#/properties/a~0b~1c"},"e":{"const":{"$ref":"#/nowhere"}}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := validate.ToolSchema(raw, "/properties/output")
		if err != nil {
			return // not an admitted schema
		}
		in := map[string]any{"type": "object", "properties": map[string]any{"output": s}, "required": []string{"output"}}
		before, _ := json.Marshal(in)
		out, err := geminiSchema(in)
		if after, _ := json.Marshal(in); string(after) != string(before) {
			t.Fatalf("the input changed: %s", after)
		}
		if err != nil {
			if !errors.Is(err, errRefBesideCombinator) {
				t.Fatalf("%s: %v", raw, err)
			}
			return
		}
		defs, _ := out["$defs"].(map[string]any)
		werr := walkSchema(out, "", func(m map[string]any, at string) error {
			if _, ok := m["definitions"]; ok {
				return fmt.Errorf("definitions at %q", at)
			}
			if _, ok := m["$defs"]; ok && at != "" {
				return fmt.Errorf("$defs at %q", at)
			}
			ref, ok := m["$ref"].(string)
			if !ok {
				return nil
			}
			if len(m) != 1 {
				return fmt.Errorf("$ref beside %v at %q", m, at)
			}
			toks, ok := refTokens(ref)
			if !ok || len(toks) != 2 || toks[0] != "$defs" || defs[toks[1]] == nil {
				return fmt.Errorf("$ref %q at %q", ref, at)
			}
			return nil
		})
		if werr != nil {
			b, _ := json.Marshal(out)
			t.Fatalf("%s\nbecame %s: %v", raw, b, werr)
		}
		_ = requiredCycle(out)
	})
}
