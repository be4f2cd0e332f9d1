package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"charm.land/fantasy"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/mcp"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/tools"
	"github.com/chatd/chatd/internal/validate"
)

// FinalizerName is client.FinalizerName, the runner's most used word.
const FinalizerName = client.FinalizerName

// finalizerOutput is the finalizer's one parameter, holding the value.
const finalizerOutput = "output"

// parsed is a prompt row with its decoded content.
type parsed struct {
	row   store.Message
	parts []jsonb.Part
}

func parseRows(rows []store.Message) ([]parsed, error) {
	out := make([]parsed, 0, len(rows))
	for _, r := range rows {
		parts, err := jsonb.ParseContent(r.Content)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", r.ID, err)
		}
		out = append(out, parsed{row: r, parts: parts})
	}
	return out, nil
}

// buildPrompt converts model-visible history into a provider prompt. The
// rows were selected by MessageListForPrompt: no receipts, no controls, no
// client-only rows.
func buildPrompt(system string, msgs []parsed) fantasy.Prompt {
	var prompt fantasy.Prompt
	if strings.TrimSpace(system) != "" {
		prompt = append(prompt, fantasy.NewSystemMessage(system))
	}
	// A compaction summary stands for the history before it, so it goes first.
	ordered := make([]parsed, 0, len(msgs))
	for _, m := range msgs {
		if isSummary(m) {
			ordered = append(ordered, m)
		}
	}
	for _, m := range msgs {
		if !isSummary(m) {
			ordered = append(ordered, m)
		}
	}
	for _, m := range ordered {
		var content []fantasy.MessagePart
		for _, p := range m.parts {
			if mp := messagePart(m.row.Role, p); mp != nil {
				content = append(content, mp)
			}
		}
		if len(content) == 0 {
			continue
		}
		prompt = append(prompt, fantasy.Message{Role: fantasy.MessageRole(m.row.Role), Content: content})
	}
	return prompt
}

func messagePart(role client.Role, p jsonb.Part) fantasy.MessagePart {
	switch p.Type {
	case jsonb.PartText, jsonb.PartHookContext, jsonb.PartSummary:
		if strings.TrimSpace(p.Text) == "" {
			return nil // some providers reject blank text blocks
		}
		return fantasy.TextPart{Text: p.Text}
	case jsonb.PartReasoning:
		if role != client.RoleAssistant {
			return nil
		}
		return fantasy.ReasoningPart{Text: p.Text, ProviderOptions: options(p.ProviderMetadata)}
	case jsonb.PartFile:
		return fantasy.FilePart{Filename: p.Name, Data: p.Data, MediaType: p.MediaType}
	case jsonb.PartToolCall:
		return fantasy.ToolCallPart{ToolCallID: p.ToolCallID, ToolName: p.ToolName, Input: string(p.Args),
			ProviderExecuted: p.ProviderExecuted, ProviderOptions: options(p.ProviderMetadata)}
	case jsonb.PartToolResult:
		text := resultText(p.Result)
		var out fantasy.ToolResultOutputContent = fantasy.ToolResultOutputContentText{Text: text}
		if p.IsError {
			out = fantasy.ToolResultOutputContentError{Error: errorText(text)}
		}
		return fantasy.ToolResultPart{ToolCallID: p.ToolCallID, Output: out, ProviderExecuted: p.ProviderExecuted,
			ProviderOptions: options(p.ProviderMetadata)}
	}
	return nil
}

func isSummary(m parsed) bool {
	return len(m.parts) > 0 && m.parts[0].Type == jsonb.PartSummary
}

// serverTools are the server-executed tools as provider definitions.
func serverTools(ts []tools.Tool) []fantasy.Tool {
	out := make([]fantasy.Tool, 0, len(ts))
	for _, t := range ts {
		out = append(out, fantasy.FunctionTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	return out
}

type errorText string

func (e errorText) Error() string { return string(e) }

// resultText renders a stored tool result for the provider: a JSON string is
// sent as its text, anything else as JSON.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func options(md json.RawMessage) fantasy.ProviderOptions {
	if len(md) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(md, &m) != nil {
		return nil
	}
	opts, err := fantasy.UnmarshalProviderOptions(m)
	if err != nil {
		return nil
	}
	return opts
}

// finalizerTool builds the finalizer definition for a request: parameters
// {"output": <caller schema>} with additionalProperties false at the wrapper
// root. The caller's schema is decoded afresh for every call, numbers kept as
// written; its references are rewritten to point under /properties/output
// (validate.ToolSchema), so that the parameters are self-contained for every
// provider (Anthropic keeps only properties and required of the root).
func finalizerTool(req *store.Request) (fantasy.FunctionTool, error) {
	schema, err := validate.ToolSchema(req.Schema, "/properties/"+finalizerOutput)
	if err != nil {
		return fantasy.FunctionTool{}, fmt.Errorf("decode stored schema: %w", err)
	}
	exactNumbers(schema)
	desc := "Submit the final result of this request as {\"output\": <value>}, where the value satisfies the " +
		"schema \"" + req.Name + "\". Call this tool exactly once, alone (no other tool calls in the same message), " +
		"when your work is done."
	if req.Description != "" {
		desc += " The result: " + req.Description
	}
	return fantasy.FunctionTool{
		Name:        FinalizerName,
		Description: desc,
		InputSchema: map[string]any{
			"type":                 "object",
			"properties":           map[string]any{finalizerOutput: schema},
			"required":             []string{"output"},
			"additionalProperties": false,
		},
	}, nil
}

// planInstruction is appended to the system prompt of a chat in plan mode.
const planInstruction = "You are in plan mode: investigate and propose a plan for the request. Do not make changes; describe what you would do."

// clientTools are the chat's client-executed tools, offered as function tools.
// mcpTools are the MCP servers' tools the chat may use, as admitted by
// internal/mcp (schemas under the client tools' limits, local $refs only,
// so decoding them cannot fail; one that did would be left out).
func mcpTools(ts []mcp.Tool) []fantasy.Tool {
	out := make([]fantasy.Tool, 0, len(ts))
	for _, t := range ts {
		if schema, err := toolSchema(t.InputSchema); err == nil {
			out = append(out, fantasy.FunctionTool{Name: t.Name, Description: t.Description, InputSchema: schema})
		}
	}
	return out
}

// toolSchema decodes a tool's input schema for fantasy (an object schema
// when there is none).
func toolSchema(raw json.RawMessage) (map[string]any, error) {
	schema := map[string]any{"type": "object"}
	if len(raw) == 0 || string(raw) == "null" {
		return schema, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&schema); err != nil {
		return nil, err
	}
	exactNumbers(schema)
	requiredStrings(schema)
	return schema, nil
}

func clientTools(chat store.Chat) ([]fantasy.Tool, error) {
	decl, err := parseDynamicTools(chat.DynamicTools)
	if err != nil {
		return nil, err
	}
	tools := make([]fantasy.Tool, 0, len(decl)+1)
	for _, d := range decl {
		schema := map[string]any{"type": "object"}
		if len(d.InputSchema) > 0 {
			dec := json.NewDecoder(bytes.NewReader(d.InputSchema))
			dec.UseNumber()
			if err := dec.Decode(&schema); err != nil {
				return nil, err
			}
			exactNumbers(schema)
			requiredStrings(schema)
		}
		tools = append(tools, fantasy.FunctionTool{Name: d.Name, Description: d.Description, InputSchema: schema})
	}
	return tools, nil
}

// requiredStrings gives a decoded root "required" list the Go type
// []string: fantasy's Anthropic encoder keeps only properties and required
// of a tool's root schema, and drops required unless it is a []string.
func requiredStrings(schema map[string]any) {
	list, ok := schema["required"].([]any)
	if !ok {
		return
	}
	out := make([]string, 0, len(list))
	for _, v := range list {
		s, ok := v.(string)
		if !ok {
			return // not a valid list of names: leave it as declared
		}
		out = append(out, s)
	}
	schema["required"] = out
}

// structuredInstruction is appended to the system prompt while a structured
// request governs the turn.
func structuredInstruction(req *store.Request) string {
	return "This request must end with a structured result named \"" + req.Name + "\". Use any tools you need first. " +
		"Then call " + FinalizerName + " exactly once, alone, with {\"output\": <value>} where the value satisfies its schema. " +
		"A plain-text answer does not complete the request."
}

// exactNumber carries a number literal as written. The provider SDKs encode
// tool parameters with their own JSON encoders, which treat
// encoding/json.Number as a string but honour MarshalJSON.
type exactNumber string

func (n exactNumber) MarshalJSON() ([]byte, error) { return []byte(n), nil }

// exactNumbers replaces json.Number values in a decoded document, in place.
func exactNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		return exactNumber(x)
	case map[string]any:
		for k, e := range x {
			x[k] = exactNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = exactNumbers(e)
		}
	}
	return v
}
