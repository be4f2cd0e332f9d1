package mockllm

import (
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"charm.land/fantasy"
	"charm.land/fantasy/providers/anthropic"
	"charm.land/fantasy/providers/openai"
)

// These tests drive the Anthropic and Responses formats through fantasy's
// real providers, as TestFantasy* do for Chat Completions.

func anthropicModel(t *testing.T, opts Options) (*Server, fantasy.LanguageModel) {
	t.Helper()
	s := New(opts)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	p, err := anthropic.New(anthropic.WithBaseURL(hs.URL), anthropic.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	lm, err := p.LanguageModel(t.Context(), "claude-sonnet-4")
	if err != nil {
		t.Fatal(err)
	}
	return s, lm
}

func responsesModel(t *testing.T, opts Options) (*Server, fantasy.LanguageModel) {
	t.Helper()
	s := New(opts)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	p, err := openai.New(openai.WithBaseURL(hs.URL+"/v1"), openai.WithAPIKey("k"), openai.WithUseResponsesAPI(),
		openai.WithResponsesAPIFunc(func(string) bool { return true }))
	if err != nil {
		t.Fatal(err)
	}
	lm, err := p.LanguageModel(t.Context(), "gpt-5")
	if err != nil {
		t.Fatal(err)
	}
	return s, lm
}

func thinking(budget int64) fantasy.ProviderOptions {
	return anthropic.NewProviderOptions(&anthropic.ProviderOptions{Thinking: &anthropic.ThinkingProviderOption{BudgetTokens: budget}})
}

// collectParts keeps every stream part.
func collectParts(t *testing.T, lm fantasy.LanguageModel, call fantasy.Call) ([]fantasy.StreamPart, streamResult) {
	t.Helper()
	stream, err := lm.Stream(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	var all []fantasy.StreamPart
	var r streamResult
	for part := range stream {
		all = append(all, part)
		switch part.Type {
		case fantasy.StreamPartTypeTextDelta:
			r.text += part.Delta
		case fantasy.StreamPartTypeReasoningDelta:
			r.reasoning += part.Delta
		case fantasy.StreamPartTypeToolCall:
			r.calls = append(r.calls, part)
		case fantasy.StreamPartTypeFinish:
			r.finish = &part
		case fantasy.StreamPartTypeError:
			r.err = part.Error
		}
	}
	return all, r
}

func TestAnthropicThinkingToolLoop(t *testing.T) {
	t.Parallel()
	sc := &Script{Steps: []Step{
		{Reasoning: "I should read the file.", ToolCalls: []ToolCall{{Name: "read_file", Arguments: `{"path":"a.txt"}`}}},
		{Text: "done"},
	}}
	s, lm := anthropicModel(t, Options{Script: sc})
	max := int64(8000)
	read := fantasy.FunctionTool{Name: "read_file", Description: "read", InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []string{"path"}, "additionalProperties": false}}
	call := fantasy.Call{Prompt: fantasy.Prompt{fantasy.NewSystemMessage("be brief"), fantasy.NewUserMessage("read a.txt")},
		Tools: []fantasy.Tool{read}, MaxOutputTokens: &max, ProviderOptions: thinking(2048)}
	parts, r := collectParts(t, lm, call)
	if r.err != nil || r.finish == nil || r.finish.FinishReason != fantasy.FinishReasonToolCalls || len(r.calls) != 1 ||
		r.reasoning != "I should read the file." || r.calls[0].ToolCallInput != `{"path":"a.txt"}` || !strings.HasPrefix(r.calls[0].ID, "toolu_") {
		t.Fatalf("first step %+v", r)
	}
	var sig string
	for _, p := range parts {
		if md := anthropic.GetReasoningMetadata(fantasy.ProviderOptions(p.ProviderMetadata)); p.Type == fantasy.StreamPartTypeReasoningEnd && md != nil {
			sig = md.Signature
		}
	}
	if sig != SignThinking("I should read the file.") {
		t.Fatalf("signature on reasoning_end %q", sig)
	}
	// The tool's root schema reached the wire as properties/required only.
	var body struct {
		Tools []struct {
			InputSchema map[string]any `json:"input_schema"`
		} `json:"tools"`
		Thinking map[string]any `json:"thinking"`
	}
	if err := json.Unmarshal(s.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if _, ok := body.Tools[0].InputSchema["additionalProperties"]; ok || body.Tools[0].InputSchema["required"] == nil {
		t.Errorf("input_schema sent %v", body.Tools[0].InputSchema)
	}

	// Replaying with the signature is accepted; without it, refused as the
	// real API does.
	next := func(md fantasy.ProviderOptions) fantasy.Call {
		c := call
		c.Prompt = append(fantasy.Prompt{}, call.Prompt...)
		c.Prompt = append(c.Prompt,
			fantasy.Message{Role: fantasy.MessageRoleAssistant, Content: []fantasy.MessagePart{
				fantasy.ReasoningPart{Text: r.reasoning, ProviderOptions: md},
				fantasy.ToolCallPart{ToolCallID: r.calls[0].ID, ToolName: "read_file", Input: r.calls[0].ToolCallInput},
			}},
			fantasy.Message{Role: fantasy.MessageRoleTool, Content: []fantasy.MessagePart{
				fantasy.ToolResultPart{ToolCallID: r.calls[0].ID, Output: fantasy.ToolResultOutputContentText{Text: "hello"}}}})
		return c
	}
	_, r2 := collectParts(t, lm, next(fantasy.ProviderOptions{anthropic.Name: &anthropic.ReasoningOptionMetadata{Signature: "forged"}}))
	var perr *fantasy.ProviderError
	if !errors.As(r2.err, &perr) || perr.StatusCode != 400 || !strings.Contains(perr.Message, "Invalid `signature`") {
		t.Fatalf("forged signature: %v", r2.err)
	}
	_, r3 := collectParts(t, lm, next(fantasy.ProviderOptions{anthropic.Name: &anthropic.ReasoningOptionMetadata{Signature: sig}}))
	if r3.err != nil || r3.text != "done" || r3.finish.FinishReason != fantasy.FinishReasonStop {
		t.Fatalf("replay: %+v", r3)
	}
	reqs := s.Requests()
	last := reqs[len(reqs)-1]
	if m := last.Messages[2]; m.Role != "assistant" || m.Signature != sig || m.Reasoning != r.reasoning || m.ToolCalls[0].ID != r.calls[0].ID {
		t.Errorf("replayed assistant %+v", m)
	}
	if m := last.Messages[3]; m.Role != "tool" || m.ToolCallID != r.calls[0].ID || m.Content != "hello" {
		t.Errorf("replayed result %+v", m)
	}
}

func TestAnthropicShapes(t *testing.T) {
	t.Parallel()
	sc := &Script{Steps: []Step{
		{Refusal: "I can't help with that."},
		{Value: json.RawMessage(`{"answer":"x"}`), FinishReason: "length"},
		{Text: "cut", Truncate: true},
		{Error: &ErrorSpec{Status: 429, RetryAfter: 3}},
		{Error: &ErrorSpec{Status: 529}},
		{Reasoning: "hmm", Value: json.RawMessage(`{"answer":"y"}`)},
	}}
	s, lm := anthropicModel(t, Options{Script: sc})
	call := callWith(finalizerTool(t))

	_, r := collectParts(t, lm, call)
	if r.err != nil || r.finish.FinishReason != fantasy.FinishReasonContentFilter || r.text != "I can't help with that." {
		t.Errorf("refusal %+v", r)
	}
	_, r = collectParts(t, lm, call)
	if r.err != nil || r.finish.FinishReason != fantasy.FinishReasonLength || len(r.calls) != 1 {
		t.Errorf("max_tokens %+v", r)
	}
	_, r = collectParts(t, lm, call)
	if r.err == nil || !errors.Is(r.err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated %+v", r)
	}
	_, r = collectParts(t, lm, call)
	var perr *fantasy.ProviderError
	if !errors.As(r.err, &perr) || perr.StatusCode != 429 || !perr.IsRetryable() || header(perr.ResponseHeaders, "retry-after") != "3" {
		t.Errorf("429 %v", r.err)
	}
	_, err := lm.Generate(t.Context(), call)
	if !errors.As(err, &perr) || perr.StatusCode != 529 || !perr.IsRetryable() {
		t.Errorf("529 %v", err)
	}
	// Non-streaming, no thinking requested: the scripted reasoning is not sent.
	resp, err := lm.Generate(t.Context(), call)
	if err != nil || len(resp.Content.ToolCalls()) != 1 || resp.Content.ToolCalls()[0].Input != `{"output":{"answer":"y"}}` || resp.Content.ReasoningText() != "" {
		t.Fatalf("generate %+v %v", resp, err)
	}
	if reqs := s.Requests(); len(reqs) != 6 || reqs[0].Format != FormatAnthropic || reqs[0].Tool(FinalizerTool) == nil {
		t.Errorf("requests %+v", reqs)
	}
}

func TestResponsesShapes(t *testing.T) {
	t.Parallel()
	sc := &Script{Steps: []Step{
		{Reasoning: "plan it", ToolCalls: []ToolCall{{ID: "call_1", Name: "read_file", Arguments: `{"path":"a"}`}}},
		{Text: "here"},
		{Refusal: "I can't."},
		{Value: json.RawMessage(`{"answer":"x"}`), FinishReason: "length"},
		{Text: "cut", Truncate: true},
		{Reasoning: "quietly", Value: json.RawMessage(`{"answer":"y"}`)},
	}}
	s, lm := responsesModel(t, Options{Script: sc})
	read := fantasy.FunctionTool{Name: "read_file", Description: "read", InputSchema: map[string]any{"type": "object"}}
	call := callWith(read, finalizerTool(t))

	parts, r := collectParts(t, lm, call)
	if r.err != nil || r.finish.FinishReason != fantasy.FinishReasonToolCalls || len(r.calls) != 1 || r.calls[0].ID != "call_1" ||
		!strings.Contains(r.reasoning, "plan it") {
		t.Fatalf("tool step %+v", r)
	}
	var item string
	for _, p := range parts {
		if md, ok := p.ProviderMetadata[openai.Name].(*openai.ResponsesReasoningMetadata); ok && p.Type == fantasy.StreamPartTypeReasoningEnd {
			item = md.ItemID
		}
	}
	if !strings.HasPrefix(item, "rs_") {
		t.Errorf("reasoning item id %q", item)
	}
	c := call
	c.Prompt = append(append(fantasy.Prompt{}, call.Prompt...),
		fantasy.Message{Role: fantasy.MessageRoleAssistant, Content: []fantasy.MessagePart{
			fantasy.ToolCallPart{ToolCallID: "call_1", ToolName: "read_file", Input: `{"path":"a"}`}}},
		fantasy.Message{Role: fantasy.MessageRoleTool, Content: []fantasy.MessagePart{
			fantasy.ToolResultPart{ToolCallID: "call_1", Output: fantasy.ToolResultOutputContentText{Text: "content"}}}})
	_, r = collectParts(t, lm, c)
	if r.err != nil || r.text != "here" || r.finish.FinishReason != fantasy.FinishReasonStop {
		t.Fatalf("after tool %+v", r)
	}
	if m := s.Requests()[1].Messages; m[len(m)-1].Role != "tool" || m[len(m)-1].Content != "content" || m[len(m)-2].ToolCalls[0].ID != "call_1" {
		t.Errorf("second request messages %+v", m)
	}

	// A refusal: fantasy drops the refusal part (chatd reads it off the wire).
	_, r = collectParts(t, lm, call)
	if r.err != nil || r.text != "" || r.finish.FinishReason != fantasy.FinishReasonStop {
		t.Errorf("refusal %+v", r)
	}
	// Incomplete for max_output_tokens, masked by the function call.
	_, r = collectParts(t, lm, call)
	if r.err != nil || r.finish.FinishReason != fantasy.FinishReasonToolCalls || len(r.calls) != 1 {
		t.Errorf("incomplete %+v", r)
	}
	_, r = collectParts(t, lm, call)
	if !errors.Is(r.err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated %+v", r)
	}
	resp, err := lm.Generate(t.Context(), call)
	if err != nil || len(resp.Content.ToolCalls()) != 1 || resp.Content.ReasoningText() != "quietly" || resp.FinishReason != fantasy.FinishReasonToolCalls {
		t.Fatalf("generate %+v %v", resp, err)
	}
}

func TestStrictToolsAreChecked(t *testing.T) {
	t.Parallel()
	_, hs := startServer(t, Options{})
	strict := func(params string) string {
		return `{"model":"gpt-5","input":"hi","tools":[{"type":"function","name":"f","parameters":` + params + `,"strict":true}]}`
	}
	optional := `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false}`
	resp, body := post(t, hs.URL+"/v1/responses", strict(optional))
	if resp.StatusCode != 400 || !strings.Contains(string(body), "Missing 'b'") {
		t.Errorf("optional property under strict: %d %s", resp.StatusCode, body)
	}
	ok := `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`
	if resp, body := post(t, hs.URL+"/v1/responses", strict(ok)); resp.StatusCode != 200 {
		t.Errorf("strict-compliant schema: %d %s", resp.StatusCode, body)
	}
}

func TestNamedScriptsAndFormats(t *testing.T) {
	t.Parallel()
	s, hs := startServer(t, Options{Formats: []string{FormatAnthropic},
		Scripts: map[string]*Script{"a": {Steps: []Step{{Text: "from a"}}}}, Script: &Script{Steps: []Step{{Text: "default"}}}})
	resp, body := post(t, hs.URL+"/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"go [script:a]"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "from a") {
		t.Errorf("named: %d %s", resp.StatusCode, body)
	}
	_, body = post(t, hs.URL+"/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"go [script:zz]"}]}`)
	if !strings.Contains(string(body), "default") {
		t.Errorf("unknown name: %s", body)
	}
	if reqs := s.Requests(); reqs[0].Script != "a" || reqs[1].Script != "" {
		t.Errorf("script names %q %q", reqs[0].Script, reqs[1].Script)
	}
	if resp, _ := post(t, hs.URL+"/v1/chat/completions", chatBody(false, "x")); resp.StatusCode != 404 {
		t.Errorf("chat completions served although only anthropic was asked: %d", resp.StatusCode)
	}
	// Anthropic's own rules: unanswered tool_use and a bare tool_result.
	for _, bad := range []string{
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":"y"}]}`,
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9","content":"r"}]}]}`,
		`{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":4000},"messages":[{"role":"user","content":"x"}]}`,
	} {
		resp, body := post(t, hs.URL+"/v1/messages", bad)
		if resp.StatusCode != 400 || !strings.Contains(string(body), `"invalid_request_error"`) {
			t.Errorf("%s: %d %s", bad, resp.StatusCode, body)
		}
	}
}

// A replayed server tool use (web search) must be followed by its result in
// the same assistant message, as the Anthropic API requires.
func TestAnthropicServerToolReplay(t *testing.T) {
	t.Parallel()
	const use = `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"q"}}`
	const result = `{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}`
	for _, tc := range []struct {
		name, assistant, wantErr string
	}{
		{"paired", use + `,` + result + `,{"type":"text","text":"found"}`, ""},
		{"no result", use + `,{"type":"text","text":"found"}`, "`web_search` tool use with id `srvtoolu_1` was found without a corresponding `web_search_tool_result` block"},
		{"result first", result + `,` + use, "unexpected `tool_use_id` found in `web_search_tool_result` blocks: srvtoolu_1"},
		{"not a server id", `{"type":"server_tool_use","id":"toolu_1","name":"web_search","input":{}}`, "needs a srvtoolu_ id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"search"},{"role":"assistant","content":[` +
				tc.assistant + `]},{"role":"user","content":"go on"}]}`
			_, err := anthropicFormat{}.parse([]byte(body))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}
