package mockllm

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"charm.land/fantasy"
	"charm.land/fantasy/providers/google"
)

// These tests drive the Gemini format through fantasy's real Google
// provider (google.golang.org/genai underneath).

func geminiModel(t *testing.T, opts Options) (*Server, fantasy.LanguageModel) {
	t.Helper()
	s := New(opts)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	p, err := google.New(google.WithGeminiAPIKey("k"), google.WithBaseURL(hs.URL))
	if err != nil {
		t.Fatal(err)
	}
	lm, err := p.LanguageModel(t.Context(), "gemini-3-pro-preview")
	if err != nil {
		t.Fatal(err)
	}
	return s, lm
}

func includeThoughts() fantasy.ProviderOptions {
	yes := true
	return fantasy.ProviderOptions{google.Name: &google.ProviderOptions{ThinkingConfig: &google.ThinkingConfig{IncludeThoughts: &yes}}}
}

func TestGeminiThinkingToolLoop(t *testing.T) {
	t.Parallel()
	sc := &Script{Steps: []Step{
		{Reasoning: "I should read the file.", ToolCalls: []ToolCall{{Name: "read_file", Arguments: `{"path":"a.txt"}`}}},
		{Text: "done"},
		{Text: "again"},
	}}
	s, lm := geminiModel(t, Options{Script: sc})
	read := fantasy.FunctionTool{Name: "read_file", Description: "read", InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []string{"path"}}}
	call := fantasy.Call{Prompt: fantasy.Prompt{fantasy.NewSystemMessage("be brief"), fantasy.NewUserMessage("read a.txt")},
		Tools: []fantasy.Tool{read}, ProviderOptions: includeThoughts()}
	parts, r := collectParts(t, lm, call)
	if r.err != nil || r.finish == nil || r.finish.FinishReason != fantasy.FinishReasonToolCalls || len(r.calls) != 1 ||
		r.reasoning != "I should read the file." || r.calls[0].ToolCallInput != `{"path":"a.txt"}` || len(r.calls[0].ID) != 8 {
		t.Fatalf("first step %+v", r)
	}
	req := s.Requests()[0]
	if !req.Stream || !req.IncludeThoughts || req.Format != FormatGemini || req.Model != "gemini-3-pro-preview" || req.Tool("read_file") == nil ||
		req.Messages[0].Role != "system" || req.Messages[1].Content != "read a.txt" {
		t.Fatalf("request %+v", req)
	}
	issued := req.IssuedSignatures()
	if len(issued) != 1 || !VerifyThoughtSignature("read_file", issued[0]) || utf8.Valid(issued[0]) {
		t.Fatalf("issued %q", issued)
	}
	// fantasy holds the signature as a string, on the reasoning part's end.
	var md *google.ReasoningMetadata
	for _, p := range parts {
		if m := google.GetReasoningMetadata(fantasy.ProviderOptions(p.ProviderMetadata)); p.Type == fantasy.StreamPartTypeReasoningEnd && m != nil {
			md = m
		}
	}
	if md == nil || md.Signature != string(issued[0]) || md.ToolID != r.calls[0].ID {
		t.Fatalf("reasoning metadata %+v", md)
	}

	next := func(sig string) fantasy.Call {
		c := call
		var opts fantasy.ProviderOptions
		if sig != "" {
			opts = fantasy.ProviderOptions{google.Name: &google.ReasoningMetadata{Signature: sig, ToolID: r.calls[0].ID}}
		}
		c.Prompt = append(append(fantasy.Prompt{}, call.Prompt...),
			fantasy.Message{Role: fantasy.MessageRoleAssistant, Content: []fantasy.MessagePart{
				fantasy.ReasoningPart{Text: r.reasoning, ProviderOptions: opts},
				fantasy.ToolCallPart{ToolCallID: r.calls[0].ID, ToolName: "read_file", Input: r.calls[0].ToolCallInput},
			}},
			fantasy.Message{Role: fantasy.MessageRoleTool, Content: []fantasy.MessagePart{
				fantasy.ToolResultPart{ToolCallID: r.calls[0].ID, Output: fantasy.ToolResultOutputContentText{Text: "hello"}}}})
		return c
	}
	var perr *fantasy.ProviderError
	for sig, want := range map[string]string{
		"":       "Function call is missing a thought_signature in functionCall parts",
		"forged": "Corrupted thought signature.",
		string(issued[0][:len(issued[0])-1]) + "x": "Corrupted thought signature.",
	} {
		_, r2 := collectParts(t, lm, next(sig))
		if !errors.As(r2.err, &perr) || perr.StatusCode != 400 || !strings.Contains(perr.Message, want) {
			t.Fatalf("signature %q: %v, want %q", sig, r2.err, want)
		}
	}
	if n := len(s.Requests()); n != 1 {
		t.Fatalf("refused requests were recorded or answered: %d", n)
	}
	_, r3 := collectParts(t, lm, next(md.Signature))
	if r3.err != nil || r3.text != "done" || r3.finish.FinishReason != fantasy.FinishReasonStop {
		t.Fatalf("replay: %+v", r3)
	}
	last := s.Requests()[1]
	if m := last.Messages[2]; m.Role != "assistant" || m.Signature != string(issued[0]) || m.ToolCalls[0].ID != r.calls[0].ID || m.ToolCalls[0].Name != "read_file" {
		t.Errorf("replayed model content %+v", m)
	}
	if m := last.Messages[3]; m.Role != "tool" || m.ToolCallID != r.calls[0].ID || m.Content != "hello" {
		t.Errorf("replayed response %+v", m)
	}
	// A new user turn: earlier calls need no signature any more, but a
	// forged one is still refused.
	c := next("")
	c.Prompt = append(c.Prompt, fantasy.NewUserMessage("and now?"))
	if _, r4 := collectParts(t, lm, c); r4.err != nil || r4.text != "again" {
		t.Errorf("earlier turn without its signature: %+v", r4)
	}
}

func TestGeminiShapes(t *testing.T) {
	t.Parallel()
	sc := &Script{Steps: []Step{
		{Refusal: "I can't help with that."},
		{Value: json.RawMessage(`{"answer":"x"}`), FinishReason: "length"},
		{Value: json.RawMessage(`{"answer":"x"}`), Truncate: true},
		{ToolCalls: []ToolCall{{Name: FinalizerTool, Arguments: `{"output":`}}},
		{Error: &ErrorSpec{Status: 429, RetryAfter: 3}},
		{Reasoning: "hmm", Value: json.RawMessage(`{"answer":"y"}`)},
		{Text: "plain", Usage: &Usage{InputTokens: n64(10), CacheReadTokens: n64(90), OutputTokens: n64(30), ReasoningTokens: n64(20)}},
	}}
	s, lm := geminiModel(t, Options{Script: sc})
	call := callWith(finalizerTool(t))

	_, r := collectParts(t, lm, call)
	if r.err != nil || r.finish.FinishReason != fantasy.FinishReasonContentFilter || r.text != "" {
		t.Errorf("refusal %+v", r)
	}
	// MAX_TOKENS, masked by the function call (chatd reads the wire).
	_, r = collectParts(t, lm, call)
	if r.err != nil || r.finish.FinishReason != fantasy.FinishReasonToolCalls || len(r.calls) != 1 {
		t.Errorf("max tokens %+v", r)
	}
	// Cut after the call, before any finishReason: fantasy reports a
	// complete tool-calls step (chatd reads the wire).
	_, r = collectParts(t, lm, call)
	if r.err != nil || r.finish == nil || len(r.calls) != 1 {
		t.Errorf("truncated %+v", r)
	}
	_, r = collectParts(t, lm, call)
	if r.err != nil || len(r.calls) != 0 || r.finish.FinishReason != fantasy.FinishReasonError {
		t.Errorf("malformed call %+v", r)
	}
	_, r = collectParts(t, lm, call)
	var perr *fantasy.ProviderError
	if !errors.As(r.err, &perr) || perr.StatusCode != 429 || !perr.IsRetryable() || !strings.Contains(perr.Cause.Error(), "retryDelay:3s") {
		t.Errorf("429 %v", r.err)
	}
	// Non-streaming; thoughts were not asked for.
	resp, err := lm.Generate(t.Context(), call)
	if err != nil || len(resp.Content.ToolCalls()) != 1 || resp.Content.ToolCalls()[0].Input != `{"output":{"answer":"y"}}` || resp.Content.ReasoningText() != "" {
		t.Fatalf("generate %+v %v", resp, err)
	}
	// Every event carries the usage so far (here the same figures on the
	// text and on the signature's empty part); fantasy adds the events'
	// output, reasoning and cache figures up (chatd reads the last event).
	_, r = collectParts(t, lm, call)
	if u := r.finish.Usage; r.err != nil || r.text != "plain" || u.InputTokens != 100 || u.OutputTokens != 2*10 ||
		u.CacheReadTokens != 2*90 || u.ReasoningTokens != 2*20 {
		t.Errorf("usage %+v", r.finish)
	}
	body := string(s.Requests()[6].Body)
	if !strings.Contains(body, `"parameters":{`) || strings.Contains(body, "parametersJsonSchema") {
		t.Errorf("fantasy's declarations: %s", body)
	}
}

func n64(v int64) *int64 { return &v }

func TestGeminiDeclarations(t *testing.T) {
	t.Parallel()
	_, hs := startServer(t, Options{Formats: []string{FormatGemini}})
	url := hs.URL + "/v1beta/models/gemini-2.5-flash:generateContent"
	req := func(decl string) string {
		return `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[` + decl + `]}]}`
	}
	for decl, want := range map[string]string{
		`{"name":"f","parametersJsonSchema":{"type":"object","properties":{"a":{"$ref":"#/$defs/A","minLength":1}},"$defs":{"A":{"type":"string"}}}}`:                               "was set alongside unsupported fields",
		`{"name":"f","parametersJsonSchema":{"type":"object","properties":{"a":{"$ref":"#/$defs/B"}},"$defs":{"A":{"type":"string"}}}}`:                                             "reference to undefined schema",
		`{"name":"f","parametersJsonSchema":{"type":"object","properties":{"a":{"$ref":"#/properties/b"},"b":{"type":"string"}}}}`:                                                  "reference to undefined schema",
		`{"name":"f","parameters":{"type":"OBJECT"},"parametersJsonSchema":{"type":"object"}}`:                                                                                      "mutually exclusive",
		`{"name":"f","parametersJsonSchema":{"type":"object","properties":{"a":{"anyOf":[{"$ref":"#/$defs/A"}],"minLength":1,"description":"x"}},"$defs":{"A":{"type":"string"}}}}`: "",
		`{"name":"f","parametersJsonSchema":{"type":"object","properties":{"a":{"$ref":"#/$defs/A","description":"x","default":"y"}},"$defs":{"A":{"type":"string"}}}}`:             "",
	} {
		resp, body := post(t, url, req(decl))
		if want == "" && resp.StatusCode != 200 || want != "" && (resp.StatusCode != 400 || !strings.Contains(string(body), want) ||
			!strings.Contains(string(body), `"INVALID_ARGUMENT"`)) {
			t.Errorf("%s: %d %s", decl, resp.StatusCode, body)
		}
	}
	// The OpenAPI subset is read as JSON Schema: a value is generated.
	resp, body := post(t, url, req(`{"name":"`+FinalizerTool+`","parameters":{"type":"OBJECT","properties":{"output":{"type":"OBJECT",`+
		`"properties":{"n":{"type":"INTEGER"}},"required":["n"]}},"required":["output"]}}`))
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"functionCall":{"args":{"output":{"n":`) {
		t.Errorf("openapi parameters: %d %s", resp.StatusCode, body)
	}
	if resp, _ := post(t, hs.URL+"/v1beta/models/gemini-2.5-flash:countTokens", req(`{"name":"f"}`)); resp.StatusCode != 404 {
		t.Errorf("unknown method: %d", resp.StatusCode)
	}
	// Pairing: a response without its call, a call without its response.
	for _, bad := range []string{
		`{"contents":[{"role":"user","parts":[{"functionResponse":{"id":"x","name":"f","response":{"result":"r"}}}]}]}`,
		`{"contents":[{"role":"user","parts":[{"text":"x"}]},{"role":"model","parts":[{"functionCall":{"id":"c","name":"f","args":{}}}]},{"role":"user","parts":[{"text":"y"}]}]}`,
		`{"contents":[{"role":"system","parts":[{"text":"x"}]}]}`,
	} {
		if resp, body := post(t, url, bad); resp.StatusCode != 400 {
			t.Errorf("%s: %d %s", bad, resp.StatusCode, body)
		}
	}
}
