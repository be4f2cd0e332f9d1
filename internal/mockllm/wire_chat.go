package mockllm

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The OpenAI Chat Completions API (POST /v1/chat/completions), shaped
// after the recorded traffic in fantasy's
// providertests/testdata/TestOpenAICommon cassettes. Its error envelope,
// usage figures and strict-schema rules, shared with Responses, are in
// wire_openai.go.

// chatFormat is the Chat Completions API.
type chatFormat struct{}

func (chatFormat) name() string                                  { return FormatOpenAI }
func (chatFormat) callID() string                                { return newCallID() }
func (chatFormat) writeError(w http.ResponseWriter, e ErrorSpec) { writeError(w, e) }

// chatRequest is the body of POST /v1/chat/completions, as far as the
// mock reads it.
type chatRequest struct {
	Model               string            `json:"model"`
	Messages            []json.RawMessage `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	Stream              bool              `json:"stream"`
	MaxTokens           int64             `json:"max_tokens"`
	MaxCompletionTokens int64             `json:"max_completion_tokens"`
	ReasoningEffort     string            `json:"reasoning_effort"`
	Options             *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// parse decodes what the mock needs and keeps the raw bytes where tests
// compare exactly (tool parameters, messages).
func (chatFormat) parse(body []byte) (Request, error) {
	var wire chatRequest
	if err := json.Unmarshal(body, &wire); err != nil {
		return Request{}, fmt.Errorf("we could not parse the JSON body of your request: %w", err)
	}
	if wire.Model == "" {
		return Request{}, errors.New("you must provide a model parameter")
	}
	if len(wire.Messages) == 0 {
		return Request{}, errors.New("messages must be a non-empty array")
	}
	req := Request{
		Model:           wire.Model,
		ToolChoice:      wire.ToolChoice,
		Stream:          wire.Stream,
		MaxTokens:       cmp.Or(wire.MaxCompletionTokens, wire.MaxTokens),
		ReasoningEffort: wire.ReasoningEffort,
		Body:            body,
	}
	req.IncludeUsage = wire.Options != nil && wire.Options.IncludeUsage
	for i, raw := range wire.Messages {
		msg, err := chatMessage(i, raw)
		if err != nil {
			return Request{}, err
		}
		req.Messages = append(req.Messages, msg)
	}
	for i, raw := range wire.Tools {
		tool, err := chatTool(i, raw)
		if err != nil {
			return Request{}, err
		}
		req.Tools = append(req.Tools, tool)
	}
	return req, nil
}

// chatMessage reads message i. Its reasoning is reasoning_content, or else
// the text of its reasoning_details entries, whose signatures make its
// Signature.
func chatMessage(i int, raw json.RawMessage) (Message, error) {
	var m struct {
		Role             string            `json:"role"`
		Content          json.RawMessage   `json:"content"`
		ReasoningContent string            `json:"reasoning_content"`
		ReasoningDetails []json.RawMessage `json:"reasoning_details"`
		ToolCallID       string            `json:"tool_call_id"`
		ToolCalls        []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return Message{}, fmt.Errorf("messages[%d]: %w", i, err)
	}
	msg := Message{Role: m.Role, Content: flattenContent(m.Content), ToolCallID: m.ToolCallID, Reasoning: m.ReasoningContent,
		ReasoningDetails: m.ReasoningDetails, Raw: raw}
	for _, d := range m.ReasoningDetails {
		var e struct{ Type, Text, Signature string }
		if json.Unmarshal(d, &e) == nil && e.Type == "reasoning.text" {
			if m.ReasoningContent == "" {
				msg.Reasoning += e.Text
			}
			msg.Signature += e.Signature
		}
	}
	for _, tc := range m.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, MessageToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return msg, nil
}

// chatTool reads tool i, which must be a function with a name.
func chatTool(i int, raw json.RawMessage) (Tool, error) {
	var t struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return Tool{}, fmt.Errorf("tools[%d]: %w", i, err)
	}
	if t.Type != "function" || t.Function.Name == "" {
		return Tool{}, fmt.Errorf("tools[%d]: only function tools with a name are supported", i)
	}
	return Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters,
		Strict: t.Function.Strict}, nil
}

// flattenContent turns a string or an array of content parts into text.
func flattenContent(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts) // anything else (null, images) has no text
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// check applies OpenAI's pairing rules (every tool call of an assistant
// message answered by tool messages right after it, every tool message
// answering one) and the strict-schema rules.
func (chatFormat) check(req *Request) error {
	var pending []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			i := slices.Index(pending, m.ToolCallID)
			if i < 0 {
				return errors.New("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.") //nolint:misspell // OpenAI's wording, verbatim
			}
			pending = slices.Delete(pending, i, i+1)
			continue
		}
		if len(pending) > 0 {
			return unansweredToolCalls(pending)
		}
		for _, tc := range m.ToolCalls {
			pending = append(pending, tc.ID)
		}
	}
	if len(pending) > 0 {
		return unansweredToolCalls(pending)
	}
	for i, m := range req.Messages {
		for _, d := range m.ReasoningDetails {
			var e struct{ Type, Text, Signature, Format string }
			if json.Unmarshal(d, &e) != nil {
				return fmt.Errorf("messages.%d.reasoning_details: each entry must be an object", i)
			}
			if e.Type == "reasoning.text" && strings.HasPrefix(e.Format, "anthropic-claude") && e.Signature != SignThinking(e.Text) {
				return fmt.Errorf("messages.%d.content.0: Invalid `signature` in `thinking` block", i)
			}
		}
	}
	return checkStrictTools(req.Tools)
}

// unansweredToolCalls is the API's error for tool calls without their tool
// messages right after the assistant message that made them.
func unansweredToolCalls(ids []string) error {
	return fmt.Errorf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. "+
		"The following tool_call_ids did not have response messages: %s", strings.Join(ids, ", "))
}

// reasoningDetailFormat is the format OpenRouter gives Anthropic's
// reasoning in reasoning_details.
const reasoningDetailFormat = "anthropic-claude-v1"

// fingerprint is every answer's system_fingerprint.
const fingerprint = "fp_mockllm"

// completion is a chat.completion object, the answer not streamed.
type completion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	Choices           []completionChoice `json:"choices"`
	Usage             any                `json:"usage"`
	ServiceTier       string             `json:"service_tier"`
	SystemFingerprint string             `json:"system_fingerprint"`
}

type completionChoice struct {
	Index        int            `json:"index"`
	Message      map[string]any `json:"message"`
	Logprobs     any            `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
}

// chunk is a chat.completion.chunk, one event of a streamed answer.
type chunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	ServiceTier       string        `json:"service_tier"`
	SystemFingerprint string        `json:"system_fingerprint"`
	Choices           []chunkChoice `json:"choices"`
	// Usage is null on every chunk but the last when the client asked for
	// usage, and absent otherwise, as OpenAI does.
	Usage any `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int            `json:"index"`
	Delta        map[string]any `json:"delta"`
	Logprobs     any            `json:"logprobs"`
	FinishReason *string        `json:"finish_reason"`
}

// chatUsage is the usage object of a Chat Completions answer.
func chatUsage(req *Request, rep reply) any {
	if rep.usage != nil {
		return openAIUsage(rep.usage, false)
	}
	return usageFor(req, rep)
}

// writeJSON sends the chat.completion object.
func (chatFormat) writeJSON(w http.ResponseWriter, req *Request, rep reply) {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil, "annotations": []any{}}
	if rep.text != "" {
		msg["content"] = rep.text
	}
	if rep.refusal != "" {
		msg["refusal"] = rep.refusal
	}
	switch {
	case rep.details:
		msg["reasoning"] = rep.reasoning
		msg["reasoning_details"] = []any{map[string]any{"type": "reasoning.text", "text": rep.reasoning,
			"signature": SignThinking(rep.reasoning), "format": reasoningDetailFormat, "index": 0}}
	case rep.reasoning != "":
		msg["reasoning_content"] = rep.reasoning
	}
	if len(rep.calls) > 0 {
		calls := make([]any, len(rep.calls))
		for i, c := range rep.calls {
			calls[i] = map[string]any{"id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": c.args}}
		}
		msg["tool_calls"] = calls
	}
	body, err := json.Marshal(completion{
		ID:                "chatcmpl-" + rand.Text(),
		Object:            "chat.completion",
		Created:           time.Now().Unix(),
		Model:             req.Model,
		Choices:           []completionChoice{{Message: msg, FinishReason: rep.finish}},
		Usage:             chatUsage(req, rep),
		ServiceTier:       "default",
		SystemFingerprint: fingerprint,
	})
	if err != nil { // cannot happen with these types; fail loudly if it does
		writeError(w, ErrorSpec{Message: err.Error()})
		return
	}
	if rep.truncate {
		body = body[:len(body)/2]
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// writeStream sends the reply as server-sent events: a role chunk, then
// reasoning, text and tool-call deltas in small pieces, the finish_reason
// chunk, the usage chunk (empty choices) and [DONE]. A truncated stream
// stops half-way through the deltas.
func (chatFormat) writeStream(ctx context.Context, w http.ResponseWriter, req *Request, rep reply, delay time.Duration) {
	deltas := streamDeltas(rep)
	s := startChatStream(ctx, w, req, delay)
	if rep.truncate {
		deltas = deltas[:(len(deltas)+1)/2]
	}
	for _, d := range deltas {
		c := s.base
		c.Choices = []chunkChoice{{Delta: d}}
		if !s.sendChunk(c) {
			return
		}
	}
	if rep.truncate {
		return // no finish_reason, no usage, no [DONE]: the stream just ends
	}
	c := s.base
	c.Choices = []chunkChoice{{Delta: map[string]any{}, FinishReason: &rep.finish}}
	if !s.sendChunk(c) {
		return
	}
	if req.IncludeUsage {
		c := s.base
		c.Choices = []chunkChoice{}
		c.Usage = chatUsage(req, rep)
		if !s.sendChunk(c) {
			return
		}
	}
	s.send([]byte("[DONE]"))
}

// chatStream writes the events of one streamed answer, delay apart.
type chatStream struct {
	ctx   context.Context
	w     http.ResponseWriter
	rc    *http.ResponseController
	delay time.Duration
	base  chunk // the fields every chunk repeats
	sent  int
}

// startChatStream sends the headers, as a real server does before the
// model speaks.
func startChatStream(ctx context.Context, w http.ResponseWriter, req *Request, delay time.Duration) *chatStream {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	s := &chatStream{ctx: ctx, w: w, rc: rc, delay: delay, base: chunk{
		ID:                "chatcmpl-" + rand.Text(),
		Object:            "chat.completion.chunk",
		Created:           time.Now().Unix(),
		Model:             req.Model,
		ServiceTier:       "default",
		SystemFingerprint: fingerprint,
	}}
	if req.IncludeUsage {
		s.base.Usage = json.RawMessage("null")
	}
	return s
}

// send writes one event; false when the stream cannot go on (the client
// went away).
func (s *chatStream) send(data []byte) bool {
	if s.sent > 0 && !sleep(s.ctx, s.delay) {
		return false
	}
	s.sent++
	if _, err := fmt.Fprintf(s.w, "data: %s\n\n", data); err != nil {
		return false
	}
	return s.rc.Flush() == nil && s.ctx.Err() == nil
}

func (s *chatStream) sendChunk(c chunk) bool {
	data, err := json.Marshal(c)
	return err == nil && s.send(data)
}

func streamDeltas(rep reply) []map[string]any {
	var deltas []map[string]any
	// Like OpenAI: a separate role chunk before text, but the role rides on
	// the first tool call when the answer is only tool calls.
	preamble := rep.reasoning != "" || rep.text != "" || rep.refusal != "" || len(rep.calls) == 0
	if preamble {
		deltas = append(deltas, map[string]any{"role": "assistant", "content": "", "refusal": nil})
	}
	for _, p := range pieces(rep.reasoning) {
		if rep.details {
			deltas = append(deltas, map[string]any{"reasoning": p, "reasoning_details": []any{
				map[string]any{"type": "reasoning.text", "text": p, "format": reasoningDetailFormat, "index": 0}}})
			continue
		}
		deltas = append(deltas, map[string]any{"reasoning_content": p})
	}
	if rep.details {
		// The signature comes last, alone, as OpenRouter sends it.
		deltas = append(deltas, map[string]any{"reasoning_details": []any{
			map[string]any{"type": "reasoning.text", "signature": SignThinking(rep.reasoning), "format": reasoningDetailFormat, "index": 0}}})
	}
	for _, p := range pieces(rep.text) {
		deltas = append(deltas, map[string]any{"content": p})
	}
	for _, p := range pieces(rep.refusal) {
		deltas = append(deltas, map[string]any{"refusal": p})
	}
	for i, c := range rep.calls {
		head := map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c.id, "type": "function",
			"function": map[string]any{"name": c.name, "arguments": ""},
		}}}
		if i == 0 && !preamble {
			head["role"], head["content"], head["refusal"] = "assistant", nil, nil
		}
		deltas = append(deltas, head)
		for _, p := range pieces(c.args) {
			deltas = append(deltas, map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": p},
			}}})
		}
	}
	return deltas
}

// checkSigned refuses an assistant message that replays reasoning the mock
// sent as reasoning_details without that entry and its signature, as the
// upstream model refuses thinking it cannot verify.
func (s *Server) checkSigned(req *Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range req.Messages {
		if m.Role == "assistant" && s.signedReasoning[m.Reasoning] && len(m.ReasoningDetails) == 0 {
			return fmt.Errorf("messages.%d: the thinking of this assistant message was sent without its reasoning_details signature", i)
		}
	}
	return nil
}

// rememberSigned notes reasoning answered as reasoning_details, which
// checkSigned then requires back with its signature.
func (s *Server) rememberSigned(rep reply) {
	if !rep.details {
		return
	}
	s.mu.Lock()
	s.signedReasoning[rep.reasoning] = true
	s.mu.Unlock()
}
