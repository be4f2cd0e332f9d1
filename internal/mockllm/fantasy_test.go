package mockllm

import (
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"charm.land/fantasy"
	"charm.land/fantasy/providers/openaicompat"
)

// These tests drive the server through the real client chatd uses, so that
// "faithful to the wire format" means "fantasy parses it as OpenAI".

const outputSchema = `{"type":"object","properties":{"answer":{"type":"string","minLength":2},"score":{"type":"number","minimum":0,"maximum":1,"multipleOf":0.25},"labels":{"type":"array","items":{"type":"string","pattern":"^[a-z]+$"},"minItems":2,"uniqueItems":true},"when":{"type":["string","null"],"format":"date"}},"required":["answer","score","labels","when"],"additionalProperties":false}`

func finalizerParamsFor(output string) string {
	return `{"type":"object","properties":{"output":` + output + `},"required":["output"],"additionalProperties":false}`
}

func finalizerTool(t *testing.T) fantasy.FunctionTool {
	t.Helper()
	var schema map[string]any
	if err := json.Unmarshal([]byte(finalizerParamsFor(outputSchema)), &schema); err != nil {
		t.Fatal(err)
	}
	return fantasy.FunctionTool{Name: FinalizerTool, Description: "Finish with the structured output.", InputSchema: schema}
}

func fantasyModel(t *testing.T, opts Options) (*Server, fantasy.LanguageModel) {
	t.Helper()
	s := New(opts)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	p, err := openaicompat.New(openaicompat.WithBaseURL(hs.URL+"/v1"), openaicompat.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	lm, err := p.LanguageModel(t.Context(), "mock-1")
	if err != nil {
		t.Fatal(err)
	}
	return s, lm
}

func callWith(tools ...fantasy.Tool) fantasy.Call {
	return fantasy.Call{
		Prompt: fantasy.Prompt{fantasy.NewSystemMessage("be brief"), fantasy.NewUserMessage("summarise the repo")},
		Tools:  tools,
	}
}

// streamResult collects what a fantasy stream reported.
type streamResult struct {
	text, reasoning string
	calls           []fantasy.StreamPart
	finish          *fantasy.StreamPart
	err             error
}

func collect(t *testing.T, lm fantasy.LanguageModel, call fantasy.Call) streamResult {
	t.Helper()
	stream, err := lm.Stream(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	var r streamResult
	for part := range stream {
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
	return r
}

func assertFinalizerArgs(t *testing.T, args string, wantValid bool) {
	t.Helper()
	params := compileDraft7(t, finalizerParamsFor(outputSchema))
	if ok, why := validates(t, params, []byte(args)); ok != wantValid {
		t.Errorf("arguments %s: valid=%v, want %v (%s)", args, ok, wantValid, why)
	}
}

func TestFantasyFinalizer(t *testing.T) {
	t.Parallel()
	s, lm := fantasyModel(t, Options{})
	other := fantasy.FunctionTool{Name: "read_file", Description: "read", InputSchema: map[string]any{"type": "object"}}

	r := collect(t, lm, callWith(other, finalizerTool(t)))
	if r.err != nil || r.finish == nil {
		t.Fatalf("stream: err=%v finish=%v", r.err, r.finish)
	}
	if r.finish.FinishReason != fantasy.FinishReasonToolCalls || r.finish.Usage.InputTokens == 0 || r.finish.Usage.OutputTokens == 0 ||
		r.finish.Usage.TotalTokens != r.finish.Usage.InputTokens+r.finish.Usage.OutputTokens {
		t.Errorf("finish %+v", r.finish)
	}
	if len(r.calls) != 1 || r.calls[0].ToolCallName != FinalizerTool || !strings.HasPrefix(r.calls[0].ID, "call_") {
		t.Fatalf("tool calls %+v", r.calls)
	}
	assertFinalizerArgs(t, r.calls[0].ToolCallInput, true)

	resp, err := lm.Generate(t.Context(), callWith(other, finalizerTool(t)))
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Content.ToolCalls()
	if resp.FinishReason != fantasy.FinishReasonToolCalls || resp.Usage.InputTokens == 0 || len(calls) != 1 || calls[0].ToolName != FinalizerTool {
		t.Fatalf("generate %+v", resp)
	}
	assertFinalizerArgs(t, calls[0].Input, true)
	if calls[0].ToolCallID == r.calls[0].ID {
		t.Error("tool call ids repeat across responses")
	}

	// (c) the server saw the tools exactly as fantasy sent them.
	reqs := s.Requests()
	if len(reqs) != 2 || !reqs[0].Stream || !reqs[0].IncludeUsage || reqs[1].Stream {
		t.Fatalf("requests %+v", reqs)
	}
	for _, req := range reqs {
		if len(req.Tools) != 2 || req.Tools[0].Name != "read_file" || req.Tools[1].Name != FinalizerTool || req.Tools[1].Description != "Finish with the structured output." {
			t.Fatalf("tools %+v", req.Tools)
		}
		if !strings.Contains(string(req.Body), string(req.Tools[1].Parameters)) {
			t.Errorf("recorded parameters are not the bytes sent")
		}
		var got, want any
		_ = json.Unmarshal(req.Tools[1].Parameters, &got)
		_ = json.Unmarshal([]byte(finalizerParamsFor(outputSchema)), &want)
		if !jsonEqualLoose(got, want) {
			t.Errorf("parameters sent %s, want %s", req.Tools[1].Parameters, finalizerParamsFor(outputSchema))
		}
		if req.Messages[1].Role != "user" || req.Messages[1].Content != "summarise the repo" {
			t.Errorf("messages %+v", req.Messages)
		}
	}
}

func jsonEqualLoose(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestFantasyTextOnly(t *testing.T) {
	t.Parallel()
	_, lm := fantasyModel(t, Options{})
	r := collect(t, lm, callWith())
	if r.err != nil || r.finish == nil || r.finish.FinishReason != fantasy.FinishReasonStop || r.text != "mockllm: summarise the repo" || len(r.calls) != 0 {
		t.Errorf("stream %+v", r)
	}
	resp, err := lm.Generate(t.Context(), callWith())
	if err != nil || resp.Content.Text() != "mockllm: summarise the repo" || resp.FinishReason != fantasy.FinishReasonStop {
		t.Errorf("generate %+v %v", resp, err)
	}
}

func TestFantasyScriptedSequence(t *testing.T) {
	t.Parallel()
	sc, err := ParseScript([]byte(`{"steps":[
		{"invalid": true},
		{"text_only": true, "text": "not done yet"},
		{"error": {"status": 500, "message": "upstream exploded", "retry_after": 1}},
		{"text": "this answer never finishes properly", "truncate": true},
		{"error": {"status": 429, "retry_after": 0.5}},
		{"reasoning": "weighing options", "text": "done thinking", "chunk_delay_ms": 1},
		{"reasoning": "quietly", "value": {"answer": "ok", "score": 0.5, "labels": ["a", "b"], "when": null}}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	s, lm := fantasyModel(t, Options{Script: sc})
	tools := callWith(finalizerTool(t))

	// 1. A finalizer call whose output violates the schema.
	r := collect(t, lm, tools)
	if r.err != nil || len(r.calls) != 1 || r.finish.FinishReason != fantasy.FinishReasonToolCalls {
		t.Fatalf("invalid step: %+v", r)
	}
	assertFinalizerArgs(t, r.calls[0].ToolCallInput, false)

	// 2. Text although the finalizer is offered.
	r = collect(t, lm, tools)
	if r.err != nil || len(r.calls) != 0 || r.text != "not done yet" || r.finish.FinishReason != fantasy.FinishReasonStop {
		t.Errorf("text_only step: %+v", r)
	}

	// 3. An HTTP 500 with Retry-After. fantasy turns off the SDK's own
	// retries (its agent retries instead), so exactly one request is made.
	_, err = lm.Generate(t.Context(), tools)
	var perr *fantasy.ProviderError
	if !errors.As(err, &perr) || perr.StatusCode != 500 || !strings.Contains(perr.Message, "upstream exploded") ||
		header(perr.ResponseHeaders, "retry-after") != "1" || !perr.IsRetryable() {
		t.Errorf("error step: %#v", err)
	}
	if n := len(s.Requests()); n != 3 {
		t.Errorf("%d requests after the error step, want 3", n)
	}

	// 4. A stream that stops without finish_reason: fantasy reports it.
	r = collect(t, lm, tools)
	if r.err == nil || r.finish != nil || !errors.As(r.err, &perr) || !errors.Is(r.err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated step: err=%v finish=%v", r.err, r.finish)
	}

	// 5. A rate limit on a stream request.
	r = collect(t, lm, callWith())
	if !errors.As(r.err, &perr) || perr.StatusCode != 429 || !perr.IsRetryable() || header(perr.ResponseHeaders, "retry-after") != "0.5" {
		t.Errorf("rate limit step: %#v", r.err)
	}

	// 6. Streamed reasoning, then text.
	r = collect(t, lm, callWith())
	if r.err != nil || r.text != "done thinking" || r.reasoning != "weighing options" || r.finish == nil {
		t.Errorf("reasoning step: %+v", r)
	}

	// 7. Non-streaming reasoning plus a scripted value.
	resp, err := lm.Generate(t.Context(), tools)
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Content.ToolCalls()
	if len(calls) != 1 || calls[0].Input != `{"output":{"answer": "ok", "score": 0.5, "labels": ["a", "b"], "when": null}}` || resp.Content.ReasoningText() != "quietly" {
		t.Fatalf("value step: %+v", resp.Content)
	}
	assertFinalizerArgs(t, calls[0].Input, true)
}

func header(h map[string]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}
