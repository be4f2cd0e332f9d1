package mockllm

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The OpenAI Responses API (POST /v1/responses), shaped after the recorded
// traffic in fantasy's providertests/testdata/TestOpenAIResponses*
// cassettes: reading a request (parse and its input items), then writing
// the answer (writeJSON, writeStream). Errors use the OpenAI envelope, like
// Chat Completions (wire_openai.go).

// responsesFormat is the OpenAI Responses API.
type responsesFormat struct{}

func (responsesFormat) name() string                                  { return FormatResponses }
func (responsesFormat) callID() string                                { return newCallID() }
func (responsesFormat) writeError(w http.ResponseWriter, e ErrorSpec) { writeError(w, e) }

// responsesRequest is the body of POST /v1/responses, as far as the mock
// reads it.
type responsesRequest struct {
	Model           string            `json:"model"`
	Input           json.RawMessage   `json:"input"`
	Instructions    *string           `json:"instructions"`
	Tools           []json.RawMessage `json:"tools"`
	ToolChoice      json.RawMessage   `json:"tool_choice"`
	Stream          bool              `json:"stream"`
	MaxOutputTokens int64             `json:"max_output_tokens"`
	Include         []string          `json:"include"`
	Reasoning       *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
}

// parse reads a request: instructions as a system message, the input (a
// string, or items read by responsesInput) and the function tools.
func (responsesFormat) parse(body []byte) (Request, error) {
	var wire responsesRequest
	if err := json.Unmarshal(body, &wire); err != nil {
		return Request{}, fmt.Errorf("we could not parse the JSON body of your request: %w", err)
	}
	if wire.Model == "" {
		return Request{}, errors.New("missing required parameter: 'model'")
	}
	req := Request{Model: wire.Model, ToolChoice: wire.ToolChoice, Stream: wire.Stream, IncludeUsage: true,
		MaxTokens: wire.MaxOutputTokens, Body: body, responsesInclude: wire.Include}
	if wire.Reasoning != nil {
		req.ReasoningEffort = wire.Reasoning.Effort
	}
	if wire.Instructions != nil {
		req.Messages = append(req.Messages, Message{Role: "system", Content: *wire.Instructions})
	}
	var text string
	if json.Unmarshal(wire.Input, &text) == nil {
		req.Messages = append(req.Messages, Message{Role: "user", Content: text, Raw: wire.Input})
	} else if err := responsesInput(&req, wire.Input); err != nil {
		return Request{}, err
	}
	tools, err := responsesTools(wire.Tools)
	if err != nil {
		return Request{}, err
	}
	req.Tools = tools
	return req, nil
}

// inputItem is an input item, as far as the mock reads it.
type inputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ID        string          `json:"id"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// inputReader turns input items into req's messages: messages, function
// calls (ToolCalls of an assistant message), their outputs (tool
// messages) and replayed reasoning (on the assistant message it leads to).
type inputReader struct {
	req      *Request
	calls    map[string]bool // function_call call_ids seen
	answered map[string]bool // function_call_output call_ids seen
	order    []string        // the call_ids, in order
	pending  replayedReasoning
}

// responsesInput reads the input items into req, applying the API's
// rules: every function call has its output and every output its call.
func responsesInput(req *Request, input json.RawMessage) error {
	var items []json.RawMessage
	if err := json.Unmarshal(input, &items); err != nil || len(items) == 0 {
		return errors.New("invalid 'input': expected a string or a non-empty array of input items")
	}
	r := inputReader{req: req, calls: map[string]bool{}, answered: map[string]bool{}}
	for i, raw := range items {
		if err := r.item(items, i, raw); err != nil {
			return err
		}
	}
	for _, id := range r.order {
		if !r.answered[id] {
			return fmt.Errorf("No tool output found for function call %s.", id)
		}
	}
	return nil
}

// item reads input item i of items.
func (r *inputReader) item(items []json.RawMessage, i int, raw json.RawMessage) error {
	var it inputItem
	if err := json.Unmarshal(raw, &it); err != nil {
		return fmt.Errorf("input[%d]: %w", i, err)
	}
	req := r.req
	switch it.Type {
	case "", "message":
		switch it.Role {
		case "system", "developer", "user", "assistant":
		default:
			return fmt.Errorf("input[%d].role: invalid value %q", i, it.Role)
		}
		req.Messages = append(req.Messages, Message{Role: it.Role, Content: responsesText(it.Content), Raw: raw})
		if it.Role == "assistant" {
			r.pending.attach(&req.Messages[len(req.Messages)-1])
		}
	case "function_call":
		return r.functionCall(i, it, raw)
	case "function_call_output":
		if !r.calls[it.CallID] {
			return fmt.Errorf("No tool call found for function call output with call_id %s.", it.CallID)
		}
		r.answered[it.CallID] = true
		var out string
		if json.Unmarshal(it.Output, &out) != nil {
			out = string(it.Output)
		}
		req.Messages = append(req.Messages, Message{Role: "tool", ToolCallID: it.CallID, Content: out, Raw: raw})
	case "reasoning":
		return r.reasoning(items, i, it.ID, raw)
	case "item_reference":
		return fmt.Errorf("Item with id '%s' not found. Items are not persisted when `store` is set to false.", it.ID)
	default:
		return fmt.Errorf("input[%d].type: unsupported item type %q", i, it.Type)
	}
	return nil
}

// functionCall adds a call to the assistant message before it, or to a
// new one.
func (r *inputReader) functionCall(i int, it inputItem, raw json.RawMessage) error {
	if it.CallID == "" || it.Name == "" {
		return fmt.Errorf("input[%d]: a function_call needs call_id and name", i)
	}
	r.calls[it.CallID] = true
	r.order = append(r.order, it.CallID)
	req := r.req
	tc := MessageToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments}
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "assistant" {
		req.Messages[n-1].ToolCalls = append(req.Messages[n-1].ToolCalls, tc)
	} else {
		req.Messages = append(req.Messages, Message{Role: "assistant", ToolCalls: []MessageToolCall{tc}, Raw: raw})
	}
	r.pending.attach(&req.Messages[len(req.Messages)-1])
	return nil
}

// reasoning keeps a replayed reasoning item for the item it leads to. With
// store false (the mock stores nothing) an item is usable only through its
// encrypted_content, which must be one the mock issued, and it must lead
// to a following item.
func (r *inputReader) reasoning(items []json.RawMessage, i int, id string, raw json.RawMessage) error {
	var it struct {
		EncryptedContent *string `json:"encrypted_content"`
	}
	_ = json.Unmarshal(raw, &it)
	if it.EncryptedContent == nil {
		return fmt.Errorf("Item with id '%s' not found. Items are not persisted when `store` is set to false. "+
			"Try again with `store` set to `true`, or remove this item from your input.", id)
	}
	text, ok := decryptReasoning(*it.EncryptedContent)
	if !ok {
		return fmt.Errorf("The encrypted content for item %s could not be verified.", id)
	}
	if i+1 >= len(items) || !followsReasoning(items[i+1]) {
		return fmt.Errorf("Item '%s' of type 'reasoning' was provided without its required following item.", id)
	}
	r.pending = append(r.pending, replayed{text: text, encrypted: *it.EncryptedContent})
	return nil
}

// responsesTools reads the function tools; built-in tools (web_search...)
// are not offered to the mock's answers.
func responsesTools(raws []json.RawMessage) ([]Tool, error) {
	var tools []Tool
	for i, raw := range raws {
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		if t.Type != "function" {
			continue // a built-in tool (web_search...)
		}
		if t.Name == "" {
			return nil, fmt.Errorf("missing required parameter: 'tools[%d].name'", i)
		}
		tools = append(tools, Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict})
	}
	return tools, nil
}

// EncryptReasoning is the encrypted_content the mock issues for a
// reasoning text: the text, readable by the mock only, and its signature.
func EncryptReasoning(text string) string {
	return "mockllm-encrypted:" + base64.RawURLEncoding.EncodeToString([]byte(text)) + "." + SignThinking(text)
}

// decryptReasoning reads an encrypted_content the mock issued.
func decryptReasoning(ec string) (string, bool) {
	body, ok := strings.CutPrefix(ec, "mockllm-encrypted:")
	if !ok {
		return "", false
	}
	enc, sig, ok := strings.Cut(body, ".")
	text, err := base64.RawURLEncoding.DecodeString(enc)
	if !ok || err != nil || sig != SignThinking(string(text)) {
		return "", false
	}
	return string(text), true
}

// followsReasoning: the item a reasoning item leads to (an assistant
// message or a function call).
func followsReasoning(raw json.RawMessage) bool {
	var it struct {
		Type string `json:"type"`
		Role string `json:"role"`
	}
	_ = json.Unmarshal(raw, &it)
	return it.Type == "function_call" || (it.Type == "" || it.Type == "message") && it.Role == "assistant"
}

type replayed struct{ text, encrypted string }

// replayedReasoning are replayed reasoning items not yet attached to the
// assistant message they precede.
type replayedReasoning []replayed

func (p *replayedReasoning) attach(m *Message) {
	for _, r := range *p {
		m.Reasoning += r.text
		m.Signature += r.encrypted
	}
	*p = nil
}

// responsesText flattens a message content: a string or input_text /
// output_text parts.
func responsesText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (responsesFormat) check(req *Request) error { return checkStrictTools(req.Tools) }

// responsesItem is one output item of an answer.
type responsesItem struct {
	kind string // reasoning, message, function_call
	id   string
	call call
}

// responsesPlan lists the output items of a reply, with fresh ids.
func responsesPlan(rep reply) []responsesItem {
	var items []responsesItem
	if rep.reasoning != "" {
		items = append(items, responsesItem{kind: "reasoning", id: "rs_" + rand.Text()})
	}
	if rep.text != "" || rep.refusal != "" {
		items = append(items, responsesItem{kind: "message", id: "msg_" + rand.Text()})
	}
	for _, c := range rep.calls {
		items = append(items, responsesItem{kind: "function_call", id: "fc_" + rand.Text(), call: c})
	}
	return items
}

// responsesStatus is the response status and incomplete reason for a reply.
func responsesStatus(rep reply) (string, any) {
	switch rep.finish {
	case "length":
		return "incomplete", map[string]any{"reason": "max_output_tokens"}
	case "content_filter":
		return "incomplete", map[string]any{"reason": "content_filter"}
	}
	return "completed", nil
}

func (it responsesItem) done(req *Request, rep reply, status string) map[string]any {
	switch it.kind {
	case "reasoning":
		m := map[string]any{"id": it.id, "type": "reasoning", "summary": []any{map[string]any{"type": "summary_text", "text": rep.reasoning}}}
		if slices.Contains(req.responsesInclude, "reasoning.encrypted_content") {
			m["encrypted_content"] = EncryptReasoning(rep.reasoning)
		}
		return m
	case "message":
		part := map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": rep.text}
		if rep.refusal != "" {
			part = map[string]any{"type": "refusal", "refusal": rep.refusal}
		}
		return map[string]any{"id": it.id, "type": "message", "status": status, "content": []any{part}, "role": "assistant"}
	}
	return map[string]any{"id": it.id, "type": "function_call", "status": status, "arguments": it.call.args,
		"call_id": it.call.id, "name": it.call.name}
}

func responsesUsage(req *Request, rep reply) map[string]any {
	if rep.usage != nil {
		return openAIUsage(rep.usage, true)
	}
	u := usageFor(req, rep)
	return map[string]any{"input_tokens": u.PromptTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": u.CompletionTokens, "output_tokens_details": map[string]any{"reasoning_tokens": u.CompletionTokensDetails.ReasoningTokens},
		"total_tokens": u.TotalTokens}
}

func responseObject(req *Request, id, status string, incomplete any, output []any, usage any) map[string]any {
	var maxOut any
	if req.MaxTokens > 0 {
		maxOut = req.MaxTokens
	}
	return map[string]any{
		"id": id, "object": "response", "created_at": time.Now().Unix(), "status": status, "background": false,
		"error": nil, "incomplete_details": incomplete, "instructions": nil, "max_output_tokens": maxOut,
		"model": req.Model, "output": output, "parallel_tool_calls": true, "previous_response_id": nil,
		"reasoning": map[string]any{"effort": nil, "summary": nil}, "store": false, "temperature": 1.0,
		"text": map[string]any{"format": map[string]any{"type": "text"}}, "tool_choice": "auto", "tools": []any{},
		"top_p": 1.0, "truncation": "disabled", "usage": usage, "user": nil, "metadata": map[string]any{},
	}
}

func (responsesFormat) writeJSON(w http.ResponseWriter, req *Request, rep reply) {
	status, incomplete := responsesStatus(rep)
	itemStatus := "completed"
	if status == "incomplete" {
		itemStatus = "incomplete"
	}
	var output []any
	for _, it := range responsesPlan(rep) {
		output = append(output, it.done(req, rep, itemStatus))
	}
	if output == nil {
		output = []any{}
	}
	body, err := json.Marshal(responseObject(req, "resp_"+rand.Text(), status, incomplete, output, responsesUsage(req, rep)))
	if err != nil {
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

// writeStream sends response.created and in_progress, each output item's
// events (added, its parts and deltas, done), then response.completed or
// response.incomplete; a truncated stream stops half-way without one.
func (responsesFormat) writeStream(ctx context.Context, w http.ResponseWriter, req *Request, rep reply, delay time.Duration) {
	status, incomplete := responsesStatus(rep)
	itemStatus := "completed"
	if status == "incomplete" {
		itemStatus = "incomplete"
	}
	id := "resp_" + rand.Text()
	var events responsesEvents
	events.add("response.created", map[string]any{"response": responseObject(req, id, "in_progress", nil, []any{}, nil)})
	events.add("response.in_progress", map[string]any{"response": responseObject(req, id, "in_progress", nil, []any{}, nil)})
	output := []any{}
	for n, it := range responsesPlan(rep) {
		done := it.done(req, rep, itemStatus)
		output = append(output, done)
		switch it.kind {
		case "reasoning":
			events.reasoning(n, it, done, rep.reasoning)
		case "message":
			events.message(n, it, rep)
		case "function_call":
			events.functionCall(n, it)
		}
		events.add("response.output_item.done", map[string]any{"output_index": n, "item": done})
	}
	if rep.truncate {
		events = events[:(len(events)+1)/2] // no response.completed
	} else {
		terminal := "response.completed"
		if status == "incomplete" {
			terminal = "response.incomplete"
		}
		events.add(terminal, map[string]any{"response": responseObject(req, id, status, incomplete, output, responsesUsage(req, rep))})
	}
	for i := range events {
		events[i].data.(map[string]any)["sequence_number"] = i
	}
	writeEvents(ctx, w, events, delay)
}

// responsesEvents are a stream's events, each named by its type.
type responsesEvents []sseEvent

func (e *responsesEvents) add(typ string, fields map[string]any) {
	fields["type"] = typ
	*e = append(*e, sseEvent{typ, fields})
}

// addFor adds an event about output item n.
func (e *responsesEvents) addFor(n int, it responsesItem, typ string, fields map[string]any) {
	fields["item_id"], fields["output_index"] = it.id, n
	e.add(typ, fields)
}

// reasoning adds a reasoning item's events: its summary part and deltas.
func (e *responsesEvents) reasoning(n int, it responsesItem, done map[string]any, text string) {
	added := map[string]any{"id": it.id, "type": "reasoning", "summary": []any{}}
	if _, ok := done["encrypted_content"]; ok {
		// Like the API: the added item carries an encrypted content issued
		// before the model reasoned; only the done item's holds the
		// reasoning.
		added["encrypted_content"] = EncryptReasoning("")
	}
	e.add("response.output_item.added", map[string]any{"item": added, "output_index": n})
	e.addFor(n, it, "response.reasoning_summary_part.added", map[string]any{"summary_index": 0, "part": map[string]any{"type": "summary_text", "text": ""}})
	for _, p := range pieces(text) {
		e.addFor(n, it, "response.reasoning_summary_text.delta", map[string]any{"summary_index": 0, "delta": p})
	}
	e.addFor(n, it, "response.reasoning_summary_text.done", map[string]any{"summary_index": 0, "text": text})
	e.addFor(n, it, "response.reasoning_summary_part.done", map[string]any{"summary_index": 0, "part": map[string]any{"type": "summary_text", "text": text}})
}

// message adds a message item's events: one content part, a refusal or
// output text, and its deltas.
func (e *responsesEvents) message(n int, it responsesItem, rep reply) {
	e.add("response.output_item.added", map[string]any{"output_index": n,
		"item": map[string]any{"id": it.id, "type": "message", "status": "in_progress", "content": []any{}, "role": "assistant"}})
	if rep.refusal != "" {
		e.addFor(n, it, "response.content_part.added", map[string]any{"content_index": 0, "part": map[string]any{"type": "refusal", "refusal": ""}})
		for _, p := range pieces(rep.refusal) {
			e.addFor(n, it, "response.refusal.delta", map[string]any{"content_index": 0, "delta": p})
		}
		e.addFor(n, it, "response.refusal.done", map[string]any{"content_index": 0, "refusal": rep.refusal})
		e.addFor(n, it, "response.content_part.done", map[string]any{"content_index": 0, "part": map[string]any{"type": "refusal", "refusal": rep.refusal}})
		return
	}
	e.addFor(n, it, "response.content_part.added", map[string]any{"content_index": 0,
		"part": map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": ""}})
	for _, p := range pieces(rep.text) {
		e.addFor(n, it, "response.output_text.delta", map[string]any{"content_index": 0, "delta": p, "logprobs": []any{}})
	}
	e.addFor(n, it, "response.output_text.done", map[string]any{"content_index": 0, "text": rep.text, "logprobs": []any{}})
	e.addFor(n, it, "response.content_part.done", map[string]any{"content_index": 0,
		"part": map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": rep.text}})
}

// functionCall adds a function_call item's events: its arguments deltas.
func (e *responsesEvents) functionCall(n int, it responsesItem) {
	e.add("response.output_item.added", map[string]any{"output_index": n, "item": map[string]any{"id": it.id, "type": "function_call",
		"status": "in_progress", "arguments": "", "call_id": it.call.id, "name": it.call.name}})
	for _, p := range pieces(it.call.args) {
		e.addFor(n, it, "response.function_call_arguments.delta", map[string]any{"delta": p})
	}
	e.addFor(n, it, "response.function_call_arguments.done", map[string]any{"arguments": it.call.args})
}
