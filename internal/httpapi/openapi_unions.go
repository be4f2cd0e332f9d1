package httpapi

import "maps"

// Unions the Go types cannot say: one Go struct on the wire, several shapes
// in the document, so that generated clients narrow them (a message part by
// its type, a send's answer by queued).

var textPartRef = map[string]any{"$ref": "#/components/schemas/TextPart"}

// partKinds are the message part types clients see, each a component
// carrying the MessagePart properties it uses.
var partKinds = []struct {
	component, typ, doc string
	props               []string
	required            []string
}{
	{"TextPart", "text", "Text. The only part type of input messages.", []string{"text"}, []string{"text"}},
	{"ReasoningPart", "reasoning", "The model's reasoning (a summary, or its thinking).", []string{"text"}, nil},
	{"ToolCallPart", "tool-call", "A call of a tool by the model.",
		[]string{"tool_call_id", "tool_name", "args", "args_delta", "provider_executed"}, nil},
	{"ToolResultPart", "tool-result", "The result of a tool call.",
		[]string{"tool_call_id", "tool_name", "result", "is_error", "provider_executed"}, nil},
	{"FilePart", "file", "A file the model produced.", []string{"media_type", "name", "data"}, nil},
	{"SourcePart", "source", "A source the model cites.", []string{"source_id", "url", "title"}, nil},
}

// unions replaces the reflected MessagePart and SendMessageResponse
// components by discriminated unions of their shapes.
func (g *schemaGen) unions() {
	part := g.components["MessagePart"].(map[string]any)
	props := part["properties"].(map[string]any)
	mapping := map[string]any{}
	var variants []any
	for _, k := range partKinds {
		ref := "#/components/schemas/" + k.component
		p := map[string]any{"type": map[string]any{"type": "string", "enum": []string{k.typ}}}
		for _, name := range k.props {
			p[name] = props[name]
		}
		obj := map[string]any{"type": "object", "description": k.doc, "properties": p,
			"required": append([]string{"type"}, k.required...)}
		g.components[k.component] = obj
		mapping[k.typ] = ref
		variants = append(variants, map[string]any{"$ref": ref})
	}
	g.components["MessagePart"] = map[string]any{
		"description":   part["description"].(string) + " Discriminated by `type`; ignore part types you do not know.",
		"oneOf":         variants,
		"discriminator": map[string]any{"propertyName": "type", "mapping": mapping},
	}

	send := g.components["SendMessageResponse"].(map[string]any)
	sp := send["properties"].(map[string]any)
	shape := func(queued bool, field, doc string) map[string]any {
		q := maps.Clone(sp["queued"].(map[string]any))
		q["enum"] = []bool{queued}
		return map[string]any{"type": "object", "description": doc, "required": []string{"queued", field},
			"properties": map[string]any{"queued": q, field: sp[field], "warnings": sp["warnings"]}}
	}
	g.components["SendMessageTaken"] = shape(false, "message", "The chat was idle: the message is in history and its turn started.")
	g.components["SendMessageQueued"] = shape(true, "queued_message", "The chat was busy: the message waits at the end of the queue.")
	g.components["SendMessageResponse"] = map[string]any{
		"description": send["description"],
		"oneOf": []any{map[string]any{"$ref": "#/components/schemas/SendMessageTaken"},
			map[string]any{"$ref": "#/components/schemas/SendMessageQueued"}},
	}
}
