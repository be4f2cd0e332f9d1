package mockllm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"
)

// What the wire formats share: the request in a form common to them
// (Request), the answer independent of them (reply), the wireFormat
// interface each wire_*.go file implements, and the writing helpers.

// Wire formats, each on its own route (also without the /v1 prefix).
const (
	FormatOpenAI    = "openai"    // Chat Completions: POST /v1/chat/completions
	FormatResponses = "responses" // OpenAI Responses: POST /v1/responses
	FormatAnthropic = "anthropic" // Anthropic Messages: POST /v1/messages
	FormatGemini    = "gemini"    // Gemini: POST /v1beta/models/MODEL:streamGenerateContent (and :generateContent)
)

// wireFormat is one provider API: how its requests parse and check, and how
// its answers and errors look.
type wireFormat interface {
	name() string // FormatOpenAI...
	// parse reads a request body; an error is a 400.
	parse(body []byte) (Request, error)
	// check applies the API's rules on the conversation (tool call
	// pairing, thinking signatures, strict schemas); an error is a 400.
	check(req *Request) error
	callID() string // a fresh tool call id, in the API's style
	writeError(w http.ResponseWriter, e ErrorSpec)
	// writeJSON sends the reply as one body, writeStream as a stream of
	// events delay apart, each event in one Write.
	writeJSON(w http.ResponseWriter, req *Request, rep reply)
	writeStream(ctx context.Context, w http.ResponseWriter, req *Request, rep reply, delay time.Duration)
}

// Request is a request as received, in a form common to the wire formats.
// Messages are normalised: an Anthropic tool_result block or a Responses
// function_call_output item becomes a Message with role "tool"; Responses
// function_call items and Anthropic tool_use blocks become ToolCalls of an
// assistant Message; Anthropic's system field becomes a leading "system"
// Message. Body keeps the exact bytes.
type Request struct {
	// Format is the wire format the request came in.
	Format   string
	Model    string
	Messages []Message
	Tools    []Tool
	// ToolChoice is the raw tool_choice ("auto", {"type":"function",...}),
	// nil when absent.
	ToolChoice   json.RawMessage
	Stream       bool
	IncludeUsage bool
	// MaxTokens is max_tokens, max_completion_tokens or max_output_tokens
	// (0 when absent).
	MaxTokens int64
	// ThinkingBudget is Anthropic's thinking.budget_tokens when thinking is
	// enabled, or Gemini's thinkingConfig.thinkingBudget; else 0.
	ThinkingBudget int64
	// IncludeThoughts and ThinkingLevel are Gemini's
	// thinkingConfig.includeThoughts and thinkingLevel.
	IncludeThoughts bool
	ThinkingLevel   string
	// ReasoningEffort is reasoning_effort (Chat Completions) or
	// reasoning.effort (Responses).
	ReasoningEffort string
	// Script names the script that answered ("" for Options.Script).
	Script string
	// Header holds the request headers (the API key among them).
	Header http.Header
	// Body is the raw request body.
	Body []byte

	responsesInclude []string      // the Responses request's include
	issuedSignatures *signatureLog // the Gemini thought signatures the answer carried
}

// Tool returns the offered tool with that name, or nil.
func (r *Request) Tool(name string) *Tool {
	i := slices.IndexFunc(r.Tools, func(t Tool) bool { return t.Name == name })
	if i < 0 {
		return nil
	}
	return &r.Tools[i]
}

// Message is one prompt message; Content flattens text parts.
type Message struct {
	Role       string
	Content    string
	ToolCallID string
	ToolCalls  []MessageToolCall
	// Reasoning is replayed reasoning: an Anthropic thinking block's text
	// (Signature its signature), a chat message's reasoning_content (or the
	// text of its reasoning_details; Signature their signature), the
	// content of the Responses reasoning items before it (Signature their
	// encrypted_content), or Gemini thought text (Signature the bytes of
	// the thought signature of the message's first function call).
	Reasoning string
	Signature string
	// ReasoningDetails are a chat message's reasoning_details entries as
	// sent.
	ReasoningDetails []json.RawMessage
	// IsError marks an Anthropic tool_result with is_error.
	IsError bool
	Raw     json.RawMessage
}

// MessageToolCall is a tool call made by an earlier assistant message.
type MessageToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Tool is one offered function tool; Parameters are the bytes as sent
// (Anthropic's input_schema).
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
	// Strict is the tool's strict flag as sent (nil when absent).
	Strict *bool
}

// reply is what the model "says", independent of the wire format. finish
// uses the Chat Completions words (stop, length, content_filter,
// tool_calls); each format maps them to its own.
type reply struct {
	reasoning string
	details   bool // reasoning as OpenRouter's reasoning_details (Chat Completions)
	text      string
	refusal   string
	calls     []call
	finish    string
	truncate  bool
	usage     *Usage // scripted figures; nil: from the lengths
}

// call is a tool call the reply makes; args are sent as they are.
type call struct{ id, name, args string }

// tokens is a rough count: about four bytes of English per token.
func tokens(n int) int { return max(1, (n+3)/4) }

// pieces splits s into the fragments a stream sends: small, as real
// providers send them (16 bytes), but at most about 64, so that a 300 KiB
// argument string does not cost tens of thousands of events; cut on rune
// boundaries, so that every fragment survives JSON encoding intact.
func pieces(s string) []string {
	size := max(16, len(s)/64)
	var out []string
	for len(s) > 0 {
		n := min(size, len(s))
		for n < len(s) && n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		if n == 0 { // a rune longer than size cannot happen, but never loop forever
			n = min(size, len(s))
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// sseEvent is one named server-sent event.
type sseEvent struct {
	name string
	data any
}

// writeEvents sends named server-sent events, flushing each, pausing delay
// between them, and stopping when the client goes away.
func writeEvents(ctx context.Context, w http.ResponseWriter, events []sseEvent, delay time.Duration) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	for i, ev := range events {
		if i > 0 && !sleep(ctx, delay) {
			return
		}
		data, err := json.Marshal(ev.data)
		if err != nil {
			return
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", ev.name, data)
		if _, err := w.Write(b.Bytes()); err != nil || rc.Flush() != nil || ctx.Err() != nil {
			return
		}
	}
}

// writeJSON sends v as the JSON body of a response with that status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
