package provider_test

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/runner"
)

// refSchema is Pydantic-shaped: $defs, a root $ref, a recursive definition,
// an Optional (anyOf with null) and annotations beside a $ref, under a root
// $id that must not reach the provider (it would change how the rewritten
// references resolve).
const refSchema = `{"$id":"https://example.invalid/order.json","$defs":{
  "Line":{"title":"Line","type":"object","properties":{"sku":{"type":"string","minLength":1},"qty":{"type":"integer","minimum":1}},"required":["sku","qty"]},
  "Part":{"title":"Part","type":"object","properties":{"name":{"type":"string"},"parts":{"type":"array","items":{"$ref":"#/$defs/Part"}}},"required":["name"]},
  "Order":{"title":"Order","type":"object","properties":{
    "lines":{"type":"array","items":{"$ref":"#/$defs/Line"},"minItems":1},
    "bom":{"$ref":"#/$defs/Part","description":"bill of materials"},
    "note":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null}},
    "required":["lines","bom"],"additionalProperties":false}},
  "$ref":"#/$defs/Order"}`

// TestWireRefs: what each provider type receives for a schema with local
// references is self-contained (every $ref in the finalizer's parameters
// resolves inside them, Anthropic's root trimming included), and the turn
// succeeds with the value the mock generated from exactly that.
func TestWireRefs(t *testing.T) {
	t.Parallel()
	for _, wt := range wireTypes {
		t.Run(wt.typ, func(t *testing.T) {
			t.Parallel()
			w := newWireEnv(t, wt)
			res, err := w.c.CreateChat(t.Context(), client.CreateChatRequest{
				Content: []client.MessagePart{client.TextPart("Plan the order. [script:refs]")},
				ResponseFormat: &client.ResponseFormat{Type: "json_schema",
					JSONSchema: &client.JSONSchemaFormat{Name: "order", Schema: json.RawMessage(refSchema)}},
			})
			if err != nil {
				t.Fatal(err)
			}
			out, err := w.c.WaitStructuredOutput(t.Context(), *res.Messages[0].StructuredOutputRequestID)
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != client.OutputSucceeded {
				t.Fatalf("status %s error %+v", out.Status, out.Error)
			}
			reqs := w.requests("refs")
			if len(reqs) == 0 {
				t.Fatal("no provider request")
			}
			fin := reqs[0].Tool(runner.FinalizerName)
			if fin == nil {
				t.Fatal("no finalizer offered")
			}
			var params map[string]any
			if err := json.Unmarshal(fin.Parameters, &params); err != nil {
				t.Fatal(err)
			}
			output, _ := params["properties"].(map[string]any)["output"].(map[string]any)
			defs, root := output, "#/properties/output/$defs/Order"
			if wt.typ == config.TypeGoogle {
				// Gemini's form: the definitions at the root, a $ref alone
				// in its object (the bill of materials' description moves
				// beside a one-branch anyOf).
				defs, root = params, "#/$defs/Order"
				bom, _ := params["$defs"].(map[string]any)["Order"].(map[string]any)["properties"].(map[string]any)["bom"].(map[string]any)
				if output["$defs"] != nil || bom == nil || bom["$ref"] != nil || bom["description"] != "bill of materials" {
					t.Errorf("gemini form: %s", fin.Parameters)
				}
			}
			if output == nil || defs["$defs"] == nil || output["$id"] != nil {
				t.Fatalf("output schema on the wire: %s", fin.Parameters)
			}
			if output["$ref"] != root {
				t.Errorf("root reference on the wire: %v", output["$ref"])
			}
			n := 0
			walkRefs(params, func(ref string) {
				n++
				u, err := url.Parse(ref)
				if err != nil || u.Scheme != "" || u.Path != "" || !resolves(params, u.Fragment) {
					t.Errorf("%s: $ref %q does not resolve inside the parameters: %s", wt.typ, ref, fin.Parameters)
				}
			})
			if n != 4 {
				t.Errorf("%d references on the wire, want 4", n)
			}
		})
	}
}

func walkRefs(v any, f func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "$ref" {
				f(s)
			}
			walkRefs(e, f)
		}
	case []any:
		for _, e := range x {
			walkRefs(e, f)
		}
	}
}

// resolves reports whether a JSON Pointer names a schema (object or
// boolean) inside doc.
func resolves(doc any, ptr string) bool {
	if ptr == "" {
		return true
	}
	if ptr[0] != '/' {
		return false
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			var ok bool
			if cur, ok = c[tok]; !ok {
				return false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return false
			}
			cur = c[i]
		default:
			return false
		}
	}
	switch cur.(type) {
	case map[string]any, bool:
		return true
	}
	return false
}
