package jsonb

import (
	"encoding/json"
)

// PartType discriminates Part.
type PartType string

const (
	PartText       PartType = "text"
	PartReasoning  PartType = "reasoning"
	PartToolCall   PartType = "tool-call"
	PartToolResult PartType = "tool-result"
	PartFile       PartType = "file"
	PartSource     PartType = "source"
	// PartHookContext is model-only context added by a stop hook.
	PartHookContext PartType = "hook-context"
	// PartHookNotice is how releases before control rows became text
	// stored a stop hook's notice; clients are shown it as text.
	PartHookNotice PartType = "hook-notice"
	// PartSummary is a model-only compaction summary of earlier history.
	PartSummary PartType = "summary"
	// PartOutcome is the internal terminal outcome of a structured request,
	// carried by its receipt row. Clients see it as ChatMessage.structured_output.
	PartOutcome PartType = "structured-output-outcome"
)

// Part is one element of a message's content array. It is the persistence
// format; the HTTP layer projects it to the public type and drops internal
// fields (ProviderMetadata, ArgsRejected, ArgsRejectedCode, Outcome).
type Part struct {
	Type PartType `json:"type"`

	// text, reasoning, hook-context, hook-notice
	Text string `json:"text,omitempty"`

	// tool-call, tool-result
	ToolCallID       string          `json:"tool_call_id,omitempty"`
	ToolName         string          `json:"tool_name,omitempty"`
	Args             json.RawMessage `json:"args,omitempty"`
	Result           json.RawMessage `json:"result,omitempty"`
	IsError          bool            `json:"is_error,omitempty"`
	ProviderExecuted bool            `json:"provider_executed,omitempty"`

	// file
	MediaType string `json:"media_type,omitempty"`
	Name      string `json:"name,omitempty"`
	Data      []byte `json:"data,omitempty"`

	// source
	SourceID string `json:"source_id,omitempty"`
	URL      string `json:"url,omitempty"`
	Title    string `json:"title,omitempty"`

	// Internal: provider replay data (reasoning signatures, item ids).
	ProviderMetadata json.RawMessage `json:"provider_metadata,omitempty"`
	// Internal: set on a tool call whose arguments were screened out before
	// storage, saying why to the model; Args then holds a placeholder that
	// must never be executed.
	ArgsRejected string `json:"args_rejected,omitempty"`
	// Internal: the class of ArgsRejected, so that nothing reads it back
	// from the message. Rows written before it existed have none.
	ArgsRejectedCode ArgsCode `json:"args_rejected_code,omitempty"`
	// Internal: the outcome carried by a receipt.
	Outcome *Outcome `json:"outcome,omitempty"`
}

// ArgsCode classifies arguments screened out before storage. The values
// are the validator's refusal codes, which a structured request's attempt
// reports.
type ArgsCode string

const (
	ArgsInvalidJSON ArgsCode = "invalid_json" // not one JSON value
	ArgsTooLarge    ArgsCode = "too_large"    // beyond the size or nesting limits
	ArgsUnstorable  ArgsCode = "unstorable"   // jsonb could not hold them exactly
)

// Outcome is the terminal result of a structured request.
type Outcome struct {
	RequestID string          `json:"request_id"`
	Status    string          `json:"status"`
	Value     json.RawMessage `json:"value,omitempty"`
	Error     *OutcomeError   `json:"error,omitempty"`
	// Usage sums the tokens of the request's provider steps when the
	// receipt was written (client.Usage's shape).
	Usage json.RawMessage `json:"usage,omitempty"`
}

// OutcomeError explains a failed or cancelled request.
type OutcomeError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Attempts is the ledger's list of rejected attempts, copied into a
	// failed receipt (client.Attempt entries).
	Attempts json.RawMessage `json:"attempts,omitempty"`
}

// Text returns a text part.
func Text(s string) Part { return Part{Type: PartText, Text: s} }

// Unresolved returns the tool calls of the last assistant message that no
// later tool result answers. roles[i] and contents[i] describe message i, in
// order. Calls the provider executed are answered upstream.
func Unresolved(roles []string, contents [][]Part) []Part {
	idx := -1
	for i := len(roles) - 1; i >= 0; i-- {
		if roles[i] == "assistant" {
			idx = i
			break
		}
	}
	if idx < 0 {
		return nil
	}
	answered := map[string]bool{}
	for _, parts := range contents[idx:] {
		for _, p := range parts {
			if p.Type == PartToolResult {
				answered[p.ToolCallID] = true
			}
		}
	}
	var out []Part
	for _, p := range contents[idx] {
		if p.Type == PartToolCall && !p.ProviderExecuted && !answered[p.ToolCallID] {
			out = append(out, p)
		}
	}
	return out
}
