package mockllm

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The Anthropic Messages API (POST /v1/messages), shaped after the recorded
// traffic in fantasy's providertests/testdata/TestAnthropic* cassettes:
// reading a request (parse and its steps, which apply the API's rules),
// then writing the answer (writeJSON, writeStream) or an error.

// anthropicFormat is the Anthropic Messages API.
type anthropicFormat struct{}

func (anthropicFormat) name() string   { return FormatAnthropic }
func (anthropicFormat) callID() string { return "toolu_" + rand.Text() }

// thinkingKey signs thinking blocks. The real API rejects a replayed
// thinking block whose signature it did not issue for that text; so does
// the mock, with the same message.
var thinkingKey = []byte("mockllm thinking signature v1")

// SignThinking returns the signature the mock issues for a thinking text.
func SignThinking(thinking string) string {
	m := hmac.New(sha256.New, thinkingKey)
	m.Write([]byte(thinking))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// anthropicBlock is a content block of any type, as far as the mock reads
// it.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature *string         `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// anthropicBlocks decodes a content field: a string or an array of blocks.
func anthropicBlocks(raw json.RawMessage) ([]anthropicBlock, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, errors.New("content: Input should be a valid string or a list of content blocks")
	}
	return blocks, nil
}

// anthropicRequest is the body of POST /v1/messages, as far as the mock
// reads it.
type anthropicRequest struct {
	Model      string            `json:"model"`
	MaxTokens  int64             `json:"max_tokens"`
	System     json.RawMessage   `json:"system"`
	Messages   []json.RawMessage `json:"messages"`
	Tools      []json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage   `json:"tool_choice"`
	Stream     bool              `json:"stream"`
	Thinking   *struct {
		Type         string `json:"type"`
		BudgetTokens int64  `json:"budget_tokens"`
	} `json:"thinking"`
}

// parse reads a request and applies the API's rules: the fields it
// requires, the thinking budget, and the conversation's
// (anthropicMessages).
func (anthropicFormat) parse(body []byte) (Request, error) {
	var wire anthropicRequest
	if err := json.Unmarshal(body, &wire); err != nil {
		return Request{}, fmt.Errorf("invalid JSON body: %w", err)
	}
	switch {
	case wire.Model == "":
		return Request{}, errors.New("model: Field required")
	case wire.MaxTokens < 1:
		return Request{}, errors.New("max_tokens: Field required (an integer of at least 1)")
	case len(wire.Messages) == 0:
		return Request{}, errors.New("messages: at least one message is required")
	}
	req := Request{Model: wire.Model, MaxTokens: wire.MaxTokens, ToolChoice: wire.ToolChoice, Stream: wire.Stream, IncludeUsage: true, Body: body}
	if t := wire.Thinking; t != nil && t.Type == "enabled" {
		if t.BudgetTokens < 1024 {
			return Request{}, errors.New("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
		}
		if t.BudgetTokens >= wire.MaxTokens {
			return Request{}, errors.New("`max_tokens` must be greater than `thinking.budget_tokens`")
		}
		req.ThinkingBudget = t.BudgetTokens
	}
	if len(wire.System) > 0 && string(wire.System) != "null" {
		blocks, err := anthropicBlocks(wire.System)
		if err != nil {
			return Request{}, fmt.Errorf("system: %w", err)
		}
		req.Messages = append(req.Messages, Message{Role: "system", Content: blocksText(blocks), Raw: wire.System})
	}
	if err := anthropicMessages(&req, wire.Messages); err != nil {
		return Request{}, err
	}
	tools, err := anthropicTools(wire.Tools)
	if err != nil {
		return Request{}, err
	}
	req.Tools = tools
	return req, nil
}

// anthropicMessages adds the conversation to req, each message read by
// anthropicUser or anthropicAssistant: it starts with a user message and
// every tool_use is answered by a tool_result in the next message.
func anthropicMessages(req *Request, messages []json.RawMessage) error {
	var prevToolUses []string // tool_use ids of the previous assistant message
	for i, raw := range messages {
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("messages.%d: %w", i, err)
		}
		if i == 0 && m.Role != "user" {
			return errors.New(`messages: first message must use the "user" role`)
		}
		blocks, err := anthropicBlocks(m.Content)
		if err != nil {
			return fmt.Errorf("messages.%d.%w", i, err)
		}
		switch m.Role {
		case "user":
			if err := anthropicUser(req, i, raw, blocks, prevToolUses); err != nil {
				return err
			}
			prevToolUses = nil
		case "assistant":
			if len(prevToolUses) > 0 {
				return unansweredToolUses(i-1, prevToolUses)
			}
			// With thinking on, the assistant turn that the request
			// continues (its tool calls answered by the final user message)
			// must start with its thinking block.
			continued := req.ThinkingBudget > 0 && i == len(messages)-2
			msg, err := anthropicAssistant(i, raw, blocks, continued)
			if err != nil {
				return err
			}
			for _, tc := range msg.ToolCalls {
				prevToolUses = append(prevToolUses, tc.ID)
			}
			req.Messages = append(req.Messages, msg)
		default:
			return fmt.Errorf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
	}
	if len(prevToolUses) > 0 {
		return unansweredToolUses(len(messages)-1, prevToolUses)
	}
	return nil
}

// unansweredToolUses is the API's error for tool_use blocks of message i
// without their tool_result in the next message.
func unansweredToolUses(i int, ids []string) error {
	return fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. "+
		"Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, strings.Join(ids, ", "))
}

// anthropicUser adds user message i to req: its text as a user Message,
// each tool_result as a tool Message. The tool_results must answer the
// previous message's tool_uses (prevToolUses), all of them.
func anthropicUser(req *Request, i int, raw json.RawMessage, blocks []anthropicBlock, prevToolUses []string) error {
	answered := map[string]bool{}
	var text *Message
	for j, bl := range blocks {
		switch bl.Type {
		case "text":
			if text == nil {
				req.Messages = append(req.Messages, Message{Role: "user", Raw: raw})
				text = &req.Messages[len(req.Messages)-1]
			}
			text.Content += bl.Text
		case "tool_result":
			if !slices.Contains(prevToolUses, bl.ToolUseID) {
				return fmt.Errorf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. "+
					"Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, bl.ToolUseID)
			}
			answered[bl.ToolUseID] = true
			req.Messages = append(req.Messages, Message{Role: "tool", ToolCallID: bl.ToolUseID, Content: toolResultText(bl.Content),
				IsError: bl.IsError, Raw: raw})
			text = nil
		case "image", "document":
		default:
			return fmt.Errorf("messages.%d.content.%d.type: unexpected block type %q in a user message", i, j, bl.Type)
		}
	}
	var missing []string
	for _, id := range prevToolUses {
		if !answered[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return unansweredToolUses(i-1, missing)
	}
	return nil
}

// anthropicAssistant reads assistant message i: text, thinking (with a
// signature the mock issued), tool_use blocks as ToolCalls, and server
// tool uses, each followed by its result in the same message. A continued
// turn with tool calls must start with its thinking block.
func anthropicAssistant(i int, raw json.RawMessage, blocks []anthropicBlock, continued bool) (Message, error) {
	msg := Message{Role: "assistant", Raw: raw}
	var serverUses []string // server_tool_use ids still without their result
	for j, bl := range blocks {
		switch bl.Type {
		case "text":
			msg.Content += bl.Text
		case "thinking":
			if bl.Signature == nil || !hmac.Equal([]byte(*bl.Signature), []byte(SignThinking(bl.Thinking))) {
				return Message{}, fmt.Errorf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			}
			msg.Reasoning += bl.Thinking
			msg.Signature = *bl.Signature
		case "redacted_thinking":
		case "tool_use":
			if bl.ID == "" || bl.Name == "" {
				return Message{}, fmt.Errorf("messages.%d.content.%d: tool_use needs an id and a name", i, j)
			}
			msg.ToolCalls = append(msg.ToolCalls, MessageToolCall{ID: bl.ID, Name: bl.Name, Arguments: string(bl.Input)})
		case "server_tool_use":
			// A tool Anthropic ran (web search): its result block must
			// follow in the same message.
			if !strings.HasPrefix(bl.ID, "srvtoolu_") || bl.Name == "" {
				return Message{}, fmt.Errorf("messages.%d.content.%d.id: server_tool_use needs a srvtoolu_ id and a name", i, j)
			}
			serverUses = append(serverUses, bl.ID)
		case "web_search_tool_result":
			k := slices.Index(serverUses, bl.ToolUseID)
			if k < 0 {
				return Message{}, fmt.Errorf("messages.%d.content.%d: unexpected `tool_use_id` found in `web_search_tool_result` blocks: %s. "+
					"Each `web_search_tool_result` block must have a corresponding `server_tool_use` block before it.", i, j, bl.ToolUseID)
			}
			serverUses = slices.Delete(serverUses, k, k+1)
		default:
			return Message{}, fmt.Errorf("messages.%d.content.%d.type: unexpected block type %q in an assistant message", i, j, bl.Type)
		}
	}
	if len(serverUses) > 0 {
		return Message{}, fmt.Errorf("messages.%d: `web_search` tool use with id `%s` was found without a corresponding "+
			"`web_search_tool_result` block", i, serverUses[0])
	}
	if continued && len(msg.ToolCalls) > 0 && blocks[0].Type != "thinking" && blocks[0].Type != "redacted_thinking" {
		return Message{}, fmt.Errorf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. "+
			"When `thinking` is enabled, a final `assistant` message must start with a thinking block.", i, blocks[0].Type)
	}
	return msg, nil
}

// anthropicTools reads the custom (function) tools; server tools such as
// web_search are not offered to the mock's answers.
func anthropicTools(raws []json.RawMessage) ([]Tool, error) {
	var tools []Tool
	for i, raw := range raws {
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("tools.%d: %w", i, err)
		}
		if t.Type != "" && t.Type != "custom" {
			continue // a server tool (web_search...): not a function tool
		}
		var schema struct {
			Type string `json:"type"`
		}
		if t.Name == "" || json.Unmarshal(t.InputSchema, &schema) != nil || schema.Type != "object" {
			return nil, fmt.Errorf("tools.%d: a custom tool needs a name and an input_schema of type object", i)
		}
		tools = append(tools, Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	return tools, nil
}

// toolResultText flattens a tool_result's content (a string or blocks).
func toolResultText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	blocks, err := anthropicBlocks(raw)
	if err != nil {
		return ""
	}
	return blocksText(blocks)
}

// blocksText is the text of the blocks, joined.
func blocksText(blocks []anthropicBlock) string {
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String()
}

func (anthropicFormat) check(*Request) error { return nil } // parse applies the rules

// anthropicReply adapts a reply to what the API would send for req: thinking
// only when the request enabled it (then always, with a default text), and
// Anthropic's stop reasons.
func anthropicReply(req *Request, rep reply) (reply, string) {
	switch {
	case req.ThinkingBudget == 0:
		rep.reasoning = ""
	case rep.reasoning == "":
		rep.reasoning = "Considering the request: " + strings.TrimPrefix(echo(req), "mockllm: ")
	}
	stop := "end_turn"
	switch {
	case rep.refusal != "":
		stop = "refusal"
		rep.text = rep.refusal
	case rep.finish == "length":
		stop = "max_tokens"
	case rep.finish == "content_filter":
		stop = "refusal"
	case rep.finish == "tool_calls":
		stop = "tool_use"
	}
	return rep, stop
}

// toolInput is a tool call's input as a JSON value: the arguments when they
// are JSON, else a string holding them (a non-streamed body must be JSON).
func toolInput(args string) json.RawMessage {
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(args)
	return b
}

func anthropicUsage(req *Request, rep reply) map[string]any {
	if u := rep.usage; u != nil {
		m := map[string]any{"service_tier": "standard"}
		for k, v := range map[string]*int64{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
			"cache_read_input_tokens": u.CacheReadTokens, "cache_creation_input_tokens": u.CacheWriteTokens} {
			if v != nil {
				m[k] = *v
			}
		}
		return m
	}
	return map[string]any{"input_tokens": tokens(len(req.Body)), "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
		"output_tokens": usageFor(req, rep).CompletionTokens, "service_tier": "standard"}
}

// deltaUsage is message_delta's usage: the final figures of the message.
func deltaUsage(usage map[string]any) map[string]any {
	m := map[string]any{}
	for _, k := range []string{"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"} {
		if v, ok := usage[k]; ok {
			m[k] = v
		}
	}
	return m
}

func (anthropicFormat) writeJSON(w http.ResponseWriter, req *Request, rep reply) {
	rep, stop := anthropicReply(req, rep)
	content := []any{}
	if rep.reasoning != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": rep.reasoning, "signature": SignThinking(rep.reasoning)})
	}
	if rep.text != "" {
		content = append(content, map[string]any{"type": "text", "text": rep.text})
	}
	for _, c := range rep.calls {
		content = append(content, map[string]any{"type": "tool_use", "id": c.id, "name": c.name, "input": toolInput(c.args)})
	}
	body, err := json.Marshal(map[string]any{
		"model": req.Model, "id": "msg_" + rand.Text(), "type": "message", "role": "assistant", "content": content,
		"stop_reason": stop, "stop_sequence": nil, "usage": anthropicUsage(req, rep),
	})
	if err != nil {
		anthropicFormat{}.writeError(w, ErrorSpec{Message: err.Error()})
		return
	}
	if rep.truncate {
		body = body[:len(body)/2]
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_"+rand.Text())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func (anthropicFormat) writeStream(ctx context.Context, w http.ResponseWriter, req *Request, rep reply, delay time.Duration) {
	rep, stop := anthropicReply(req, rep)
	usage := anthropicUsage(req, rep)
	start := map[string]any{}
	for k, v := range usage {
		start[k] = v
	}
	if _, ok := usage["output_tokens"]; ok {
		start["output_tokens"] = 1
	}
	events := []sseEvent{{"message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"model": req.Model, "id": "msg_" + rand.Text(), "type": "message", "role": "assistant", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": start}}}}
	index := 0
	block := func(cb map[string]any, deltas []map[string]any) {
		events = append(events, sseEvent{"content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": cb}})
		if index == 0 {
			events = append(events, sseEvent{"ping", map[string]any{"type": "ping"}})
		}
		for _, d := range deltas {
			events = append(events, sseEvent{"content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d}})
		}
		events = append(events, sseEvent{"content_block_stop", map[string]any{"type": "content_block_stop", "index": index}})
		index++
	}
	if rep.reasoning != "" {
		var ds []map[string]any
		for _, p := range pieces(rep.reasoning) {
			ds = append(ds, map[string]any{"type": "thinking_delta", "thinking": p})
		}
		ds = append(ds, map[string]any{"type": "signature_delta", "signature": SignThinking(rep.reasoning)})
		block(map[string]any{"type": "thinking", "thinking": "", "signature": ""}, ds)
	}
	if rep.text != "" {
		var ds []map[string]any
		for _, p := range pieces(rep.text) {
			ds = append(ds, map[string]any{"type": "text_delta", "text": p})
		}
		block(map[string]any{"type": "text", "text": ""}, ds)
	}
	for _, c := range rep.calls {
		ds := []map[string]any{{"type": "input_json_delta", "partial_json": ""}}
		for _, p := range pieces(c.args) {
			ds = append(ds, map[string]any{"type": "input_json_delta", "partial_json": p})
		}
		block(map[string]any{"type": "tool_use", "id": c.id, "name": c.name, "input": map[string]any{}}, ds)
	}
	if rep.truncate {
		events = events[:(len(events)+1)/2] // no message_delta, no message_stop
	} else {
		events = append(events,
			sseEvent{"message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
				"usage": deltaUsage(usage)}},
			sseEvent{"message_stop", map[string]any{"type": "message_stop"}})
	}
	w.Header().Set("Request-Id", "req_"+rand.Text())
	writeEvents(ctx, w, events, delay)
}

// anthropicErrorType is the error.type Anthropic uses for a status.
func anthropicErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	case 504:
		return "timeout_error"
	}
	return "api_error"
}

func (anthropicFormat) writeError(w http.ResponseWriter, e ErrorSpec) {
	status := cmp.Or(e.Status, http.StatusInternalServerError)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatFloat(e.RetryAfter, 'f', -1, 64))
	}
	if e.ShouldRetry != nil {
		w.Header().Set("X-Should-Retry", strconv.FormatBool(*e.ShouldRetry))
	}
	id := "req_" + rand.Text()
	w.Header().Set("Request-Id", id)
	writeJSON(w, status, map[string]any{"type": "error", "request_id": id, "error": map[string]any{
		"type":    cmp.Or(e.Type, anthropicErrorType(status)),
		"message": cmp.Or(e.Message, http.StatusText(status)),
	}})
}
