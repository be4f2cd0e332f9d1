package mockllm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Script is a sequence of canned responses, one Step per request, in order,
// and rules that answer by content. The Server keeps the position, so one
// Script may be shared by servers.
type Script struct {
	// Rules are tried first, in order: the first that matches a request
	// answers it, and no step is consumed.
	Rules []Rule `json:"rules,omitempty"`
	Steps []Step `json:"steps,omitempty"`
	// Then says what happens after the last step: ThenUnscripted (the
	// default, also for "") or ThenRepeat (the last step forever).
	Then string `json:"then,omitempty"`
}

// Rule answers the requests that answer a user message containing a text:
// the request's last message is from the user and contains Contains (and,
// when Tool is set, the request offers that tool). A conversation resumed
// after tool results ends with a tool message, so a rule does not answer it
// again.
type Rule struct {
	Contains string `json:"contains"`
	Tool     string `json:"tool,omitempty"`
	Step     Step   `json:"step"`
}

// matches reports whether the rule answers req.
func (r *Rule) matches(req *Request) bool {
	if len(req.Messages) == 0 {
		return false
	}
	last := req.Messages[len(req.Messages)-1]
	return last.Role == "user" && strings.Contains(last.Content, r.Contains) && (r.Tool == "" || req.Tool(r.Tool) != nil)
}

// Values of Script.Then.
const (
	ThenUnscripted = "unscripted"
	ThenRepeat     = "repeat"
)

// Step describes one response. An empty step {} gives the unscripted answer
// (still honouring delays, finish_reason and truncate). Precedence: error,
// then refusal, then text_only, then explicit tool_calls / value / invalid.
type Step struct {
	// Text is the assistant text. Alone it is the whole answer; next to tool
	// calls it is sent before them.
	Text string `json:"text,omitempty"`
	// ToolCalls are sent as given.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Value is shorthand for one coder_structured_output call whose
	// arguments are {"output": Value}, Value kept byte for byte.
	Value json.RawMessage `json:"value,omitempty"`
	// Invalid asks for one coder_structured_output call whose output is
	// generated to violate the schema offered in the request.
	Invalid bool `json:"invalid,omitempty"`
	// TextOnly forces a text answer even when the finalizer is offered.
	TextOnly bool `json:"text_only,omitempty"`
	// Refusal answers with a refusal in the format's own shape: Chat
	// Completions delta.refusal / message.refusal, a Responses refusal
	// content part, or Anthropic text with stop_reason "refusal".
	Refusal string `json:"refusal,omitempty"`
	// Reasoning comes before anything else: Chat Completions
	// delta.reasoning_content (non-streaming: message.reasoning_content),
	// which fantasy's openaicompat provider surfaces as reasoning; a
	// Responses reasoning item with this summary; an Anthropic thinking
	// block with a signature, sent only when the request enabled thinking
	// (which then always gets one, by default a short one).
	Reasoning string `json:"reasoning,omitempty"`
	// ReasoningDetails sends Reasoning on Chat Completions the way
	// OpenRouter relays Anthropic thinking: delta.reasoning beside
	// delta.reasoning_details fragments ({type: "reasoning.text", text,
	// format: "anthropic-claude-v1", index: 0}), then one fragment with the
	// signature (non-streaming: message.reasoning and the whole entry).
	// The mock then requires that entry, signature included, on the
	// assistant message when the conversation comes back. Other formats
	// ignore it.
	ReasoningDetails bool `json:"reasoning_details,omitempty"`
	// FinishReason overrides the finish reason: stop, length,
	// content_filter or tool_calls (Chat Completions words; Responses
	// answers length and content_filter as response.incomplete with
	// max_output_tokens / content_filter, Anthropic as stop_reason
	// max_tokens / refusal, tool_use, end_turn).
	FinishReason string `json:"finish_reason,omitempty"`
	// Error answers with an HTTP error instead of a completion.
	Error *ErrorSpec `json:"error,omitempty"`
	// DelayMS waits before responding (added to Options.Latency).
	DelayMS int `json:"delay_ms,omitempty"`
	// ChunkDelayMS overrides Options.ChunkDelay for this response.
	ChunkDelayMS int `json:"chunk_delay_ms,omitempty"`
	// Truncate ends the response half-way: a stream stops without a
	// finish_reason, usage chunk or [DONE]; a JSON body is cut in half.
	Truncate bool `json:"truncate,omitempty"`
	// Hold keeps the request waiting, before any byte is written, until the
	// client goes away or the server is released (Server.Release, which
	// mockllm calls when it stops); a released request is then answered as
	// the rest of the step says.
	Hold bool `json:"hold,omitempty"`
	// Usage replaces the token figures the answer reports (by default
	// they follow the lengths of the request body and of the answer): see
	// Usage.
	Usage *Usage `json:"usage,omitempty"`
}

// Usage is a scripted answer's token figures, in chatd's terms; each
// format sends them in its own usage object, and a figure left out (or
// one the format has no field for) is absent from the wire:
//
//   - Chat Completions and Responses: prompt_tokens / input_tokens =
//     input + cache_read (sent when input is set), cached_tokens =
//     cache_read, completion_tokens / output_tokens = output,
//     reasoning_tokens = reasoning, total_tokens = the sum; no cache
//     writes.
//   - Anthropic: input_tokens, cache_read_input_tokens,
//     cache_creation_input_tokens (= cache_write) and output_tokens, in
//     message_start (output_tokens 1 there) and again in message_delta; no
//     reasoning figure.
type Usage struct {
	InputTokens      *int64 `json:"input_tokens,omitempty"`
	OutputTokens     *int64 `json:"output_tokens,omitempty"`
	CacheReadTokens  *int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens *int64 `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  *int64 `json:"reasoning_tokens,omitempty"`
}

// ToolCall is one scripted tool call.
type ToolCall struct {
	// ID defaults to a fresh "call_..." id.
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Arguments is sent verbatim, even if it is not valid JSON.
	Arguments string `json:"arguments,omitempty"`
	// Value, if set, makes the arguments {"output": Value}.
	Value json.RawMessage `json:"value,omitempty"`
}

// ErrorSpec is an HTTP error response in OpenAI's shape:
// {"error":{"message","type","param","code"}}.
type ErrorSpec struct {
	// Status defaults to 500.
	Status  int    `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	// Type defaults from the status: server_error, requests (429) or
	// invalid_request_error.
	Type string `json:"type,omitempty"`
	Code string `json:"code,omitempty"`
	// RetryAfter, in seconds, is sent as the Retry-After header.
	RetryAfter float64 `json:"retry_after,omitempty"`
	// ShouldRetry, if set, is sent as the x-should-retry header, which the
	// openai-go SDK obeys in place of its own retry policy (retry 408, 409,
	// 429 and 5xx twice) when its retries are on; fantasy turns them off.
	ShouldRetry *bool `json:"should_retry,omitempty"`
}

// LoadScript reads a script from a JSON file.
func LoadScript(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mockllm: %w", err)
	}
	s, err := ParseScript(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return s, nil
}

// ParseScript decodes and checks a script. Unknown fields are rejected, so
// that a misspelt key fails loudly instead of being ignored.
func ParseScript(data []byte) (*Script, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("mockllm: parse script: %w", err)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("mockllm: invalid script: %w", err)
	}
	return &s, nil
}

func (s *Script) validate() error {
	switch s.Then {
	case "", ThenUnscripted, ThenRepeat:
	default:
		return fmt.Errorf("then must be %q or %q, not %q", ThenUnscripted, ThenRepeat, s.Then)
	}
	for i, st := range s.Steps {
		if err := st.validate(); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
	}
	for i, r := range s.Rules {
		if r.Contains == "" {
			return fmt.Errorf("rule %d: contains is required", i)
		}
		if err := r.Step.validate(); err != nil {
			return fmt.Errorf("rule %d: %w", i, err)
		}
	}
	return nil
}

func (st *Step) validate() error {
	switch st.FinishReason {
	case "", "stop", "length", "content_filter", "tool_calls":
	default:
		return fmt.Errorf("unknown finish_reason %q", st.FinishReason)
	}
	n := 0
	for _, set := range []bool{len(st.ToolCalls) > 0, st.Value != nil, st.Invalid, st.TextOnly, st.Refusal != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("tool_calls, value, invalid, text_only and refusal are mutually exclusive")
	}
	if st.Value != nil && !json.Valid(st.Value) {
		return errors.New("value is not valid JSON")
	}
	for j, tc := range st.ToolCalls {
		if tc.Name == "" {
			return fmt.Errorf("tool_calls[%d]: name is required", j)
		}
		if tc.Value != nil && tc.Arguments != "" {
			return fmt.Errorf("tool_calls[%d]: arguments and value are mutually exclusive", j)
		}
	}
	if e := st.Error; e != nil && e.Status != 0 && (e.Status < 400 || e.Status > 599) {
		return fmt.Errorf("error.status must be 4xx or 5xx, not %d", e.Status)
	}
	if st.DelayMS < 0 || st.ChunkDelayMS < 0 || st.Error != nil && st.Error.RetryAfter < 0 {
		return errors.New("delays must not be negative")
	}
	return nil
}
