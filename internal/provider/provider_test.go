package provider

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"charm.land/fantasy"
	"charm.land/fantasy/providers/anthropic"
	"charm.land/fantasy/providers/google"
	"charm.land/fantasy/providers/openai"
	"charm.land/fantasy/providers/openaicompat"

	"github.com/chatd/chatd/internal/config"
)

func registry(t *testing.T, doc string, env map[string]string) *Registry {
	t.Helper()
	cfg, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return NewRegistry(cfg, Options{Getenv: func(k string) string { return env[k] }})
}

const fourTypes = `{"providers":[
	{"name":"resp","type":"openai","base_url":"http://127.0.0.1:1/v1","api_key_env":"RESP_KEY"},
	{"name":"chat","type":"openai-chat","base_url":"http://127.0.0.1:1/v1"},
	{"name":"compat","type":"openai-compatible","base_url":"http://127.0.0.1:1/v1"},
	{"name":"claude","type":"anthropic","base_url":"http://127.0.0.1:1","api_key_env":"CLAUDE_KEY"},
	{"name":"gemini","type":"google","base_url":"http://127.0.0.1:1","api_key_env":"GEMINI_KEY"}],
"models":[
	{"id":"strict","provider":"resp","model":"gpt-5","strict_tools":true,"reasoning_effort":"low","reasoning_summary":"auto"},
	{"id":"lenient","provider":"resp","model":"gpt-5","strict_tools":false},
	{"id":"plain","provider":"resp","model":"my-deployment"},
	{"id":"chat","provider":"chat","model":"o4-mini","reasoning_effort":"high"},
	{"id":"compat","provider":"compat","model":"qwen","reasoning_effort":"medium"},
	{"id":"claude","provider":"claude","model":"claude-sonnet-4","thinking_budget_tokens":2048,"max_output_tokens":8192},
	{"id":"gemini","provider":"gemini","model":"gemini-3-pro-preview","thinking_level":"high","include_thoughts":true},
	{"id":"gemini-budget","provider":"gemini","model":"gemini-2.5-flash","thinking_budget":1024},
	{"id":"gemini-plain","provider":"gemini","model":"gemini-2.5-flash"}]}`

func TestStructuredOutputSupported(t *testing.T) {
	t.Parallel()
	r := registry(t, fourTypes, nil)
	err := r.StructuredOutputSupported("strict", nil)
	if !errors.Is(err, ErrStructuredUnsupported) || !strings.Contains(err.Error(), "strict_tools") {
		t.Errorf("strict: %v", err)
	}
	for _, id := range []string{"lenient", "plain", "chat", "compat", "claude", "gemini"} {
		if err := r.StructuredOutputSupported(id, nil); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	// Gemini unrolls recursion only within optional properties.
	for schema, want := range map[string]string{
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`:                                                  "",
		`{"type":"object","properties":{"next":{"$ref":"#"}}}`:                                                                     "",
		`{"$defs":{"N":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/N"}}}}},"$ref":"#/$defs/N"}`: "",
		`{"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]}`:                                                 "#/$defs/output → #/$defs/output",
		`{"type":"object","properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["next"]}`:                     "#/$defs/output → #/$defs/output",
		`{"$defs":{"A":{"type":"object","properties":{"b":{"$ref":"#/$defs/B"}},"required":["b"]},"B":{"type":"object","properties":{"a":{"type":"array","items":{"$ref":"#/$defs/A"}}},"required":["a"]}},"$ref":"#/$defs/A"}`: "#/$defs/A → #/$defs/B → #/$defs/A",
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"A":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/A","anyOf":[{"minLength":1}]}}}`:                                                          "a $ref beside anyOf or oneOf",
	} {
		err := r.StructuredOutputSupported("gemini", json.RawMessage(schema))
		if want == "" && err != nil || want != "" && (!errors.Is(err, ErrStructuredUnsupported) || !strings.Contains(err.Error(), want)) {
			t.Errorf("gemini %s: %v, want %q", schema, err, want)
		}
		if err := r.StructuredOutputSupported("claude", json.RawMessage(schema)); err != nil {
			t.Errorf("claude %s: %v", schema, err)
		}
	}
	if err := r.StructuredOutputSupported("nope", nil); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("unknown: %v", err)
	}
}

func TestCallOptions(t *testing.T) {
	t.Parallel()
	r := registry(t, fourTypes, nil)
	ctx := context.Background()
	get := func(id string) *Model {
		m, err := r.Model(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	o, ok := get("strict").Options[openai.Name].(*openai.ResponsesProviderOptions)
	if !ok || o.StrictJSONSchema == nil || !*o.StrictJSONSchema || *o.ReasoningEffort != "low" || *o.ReasoningSummary != "auto" {
		t.Errorf("responses options %+v", get("strict").Options)
	}
	if get("plain").Options != nil {
		t.Errorf("plain model has options %+v", get("plain").Options)
	}
	if o, ok := get("chat").Options[openai.Name].(*openai.ProviderOptions); !ok || *o.ReasoningEffort != "high" {
		t.Errorf("chat options %+v", get("chat").Options)
	}
	// openaicompat reads its options under the provider's configured name.
	if o, ok := get("compat").Options["compat"].(*openaicompat.ProviderOptions); !ok || *o.ReasoningEffort != "medium" {
		t.Errorf("compat options %+v", get("compat").Options)
	}
	if o, ok := get("claude").Options[anthropic.Name].(*anthropic.ProviderOptions); !ok || o.Thinking.BudgetTokens != 2048 {
		t.Errorf("anthropic options %+v", get("claude").Options)
	}
	if o, ok := get("gemini").Options[google.Name].(*google.ProviderOptions); !ok || *o.ThinkingConfig.ThinkingLevel != "HIGH" ||
		!*o.ThinkingConfig.IncludeThoughts || o.ThinkingConfig.ThinkingBudget != nil {
		t.Errorf("gemini options %+v", get("gemini").Options)
	}
	if o, ok := get("gemini-budget").Options[google.Name].(*google.ProviderOptions); !ok || *o.ThinkingConfig.ThinkingBudget != 1024 ||
		o.ThinkingConfig.ThinkingLevel != nil || o.ThinkingConfig.IncludeThoughts != nil {
		t.Errorf("gemini budget options %+v", get("gemini-budget").Options)
	}
	if get("gemini-plain").Options != nil {
		t.Errorf("plain gemini model has options %+v", get("gemini-plain").Options)
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	r := registry(t, fourTypes, map[string]string{"RESP_KEY": "sk-resp-0123456789", "CLAUDE_KEY": "x"})
	for _, id := range []string{"strict", "claude"} {
		if _, err := r.Model(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	got := r.Redact("Incorrect API key provided: sk-resp-0123456789 (x marks)")
	if got != "Incorrect API key provided: [redacted] (x marks)" {
		t.Errorf("redacted %q", got)
	}
}

// TestResponsesAlways: a model name fantasy does not list still goes to
// /responses on type openai (fantasy would otherwise fall back to Chat
// Completions).
func TestResponsesAlways(t *testing.T) {
	t.Parallel()
	var paths []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		http.Error(w, `{"error":{"message":"no","type":"invalid_request_error"}}`, http.StatusBadRequest)
	}))
	defer hs.Close()
	r := registry(t, `{"providers":[{"name":"p","type":"openai","base_url":"`+hs.URL+`/v1"}],"models":[{"id":"m","provider":"p","model":"my-deployment"}]}`, nil)
	m, err := r.Model(context.Background(), "m")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = m.LM.Generate(context.Background(), fantasy.Call{Prompt: fantasy.Prompt{fantasy.NewUserMessage("hi")}})
	if len(paths) != 1 || paths[0] != "/v1/responses" {
		t.Errorf("paths %v", paths)
	}
}

// observe feeds body through the observing transport in small reads.
func observe(t *testing.T, api, body string) Verdict {
	t.Helper()
	tr := &transport{api: api, base: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}},
			Body: io.NopCloser(strings.NewReader(body))}, nil
	})}
	ctx, o := Observe(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://x", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7) // events split at arbitrary points
	for {
		if _, err := resp.Body.Read(buf); err != nil {
			break
		}
	}
	return o.Verdict()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestObservation(t *testing.T) {
	t.Parallel()
	chunk := func(delta, finish string) string {
		return `data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	for _, tc := range []struct {
		name, api, body string
		want            Verdict
	}{
		{"chat length behind tool calls", apiChat,
			chunk(`{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`, "null") +
				chunk(`{}`, `"length"`) + "data: [DONE]\n\n",
			Verdict{Seen: true, FinishReason: fantasy.FinishReasonLength, Raw: "length"}},
		{"chat cut before finish_reason", apiChat, chunk(`{"content":"hi"}`, "null"),
			Verdict{Seen: true, Incomplete: true}},
		{"chat ended by [DONE] alone", apiChat, chunk(`{"content":"hi"}`, "null") + "data: [DONE]\n\n",
			Verdict{Seen: true}},
		{"chat refusal", apiChat, chunk(`{"refusal":"I can"}`, "null") + chunk(`{"refusal":"'t."}`, "null") + chunk(`{}`, `"stop"`),
			Verdict{Seen: true, Refused: true, Refusal: "I can't.", Raw: "stop"}},
		{"chat content filter, CRLF lines", apiChat, strings.ReplaceAll(chunk(`{}`, `"content_filter"`), "\n", "\r\n"),
			Verdict{Seen: true, FinishReason: fantasy.FinishReasonContentFilter, Raw: "content_filter"}},
		{"responses incomplete", apiResponses,
			"event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"incomplete_details\":{\"reason\":\"max_output_tokens\"}}}\n\n",
			Verdict{Seen: true, FinishReason: fantasy.FinishReasonLength, Raw: "max_output_tokens"}},
		{"responses refusal", apiResponses,
			"event: response.refusal.delta\ndata: {\"type\":\"response.refusal.delta\",\"delta\":\"No.\"}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"incomplete_details\":null}}\n\n",
			Verdict{Seen: true, Refused: true, Refusal: "No.", Raw: "completed"}},
		{"responses cut", apiResponses, "event: response.created\ndata: {\"type\":\"response.created\"}\n\n",
			Verdict{Seen: true, Incomplete: true}},
		{"gemini max tokens behind a function call", apiGoogle,
			"data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{}}}]}}]," +
				"\"usageMetadata\":{\"promptTokenCount\":5,\"totalTokenCount\":5}}\r\n\r\n" +
				"data: {\"candidates\":[{\"finishReason\":\"MAX_TOKENS\"}],\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":2,\"totalTokenCount\":7}}\r\n\r\n",
			Verdict{Seen: true, FinishReason: fantasy.FinishReasonLength, Raw: "MAX_TOKENS", Reported: Reported{Input: true, Output: true}}},
		{"gemini cut after a function call", apiGoogle,
			"data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{}}}]}}]}\r\n\r\n",
			Verdict{Seen: true, Incomplete: true}},
		{"gemini safety", apiGoogle, "data: {\"candidates\":[{\"finishReason\":\"SAFETY\"}]}\r\n\r\n",
			Verdict{Seen: true, FinishReason: fantasy.FinishReasonContentFilter, Raw: "SAFETY"}},
		{"gemini blocked prompt", apiGoogle, "data: {\"promptFeedback\":{\"blockReason\":\"PROHIBITED_CONTENT\"}}\r\n\r\n",
			Verdict{Seen: true, FinishReason: fantasy.FinishReasonContentFilter, Raw: geminiBlocked}},
		{"anthropic refusal", apiAnthropic,
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"refusal\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			Verdict{Seen: true, Refused: true, Raw: "refusal"}},
	} {
		if got := observe(t, tc.api, tc.body); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// Not under Observe, or not an event stream: nothing is recorded.
	_, o := Observe(context.Background())
	if v := o.Verdict(); v.Seen {
		t.Errorf("unused observation %+v", v)
	}
}

// TestKeysOnlyFromTheConfiguredVariable: the SDKs' own environment
// variables never supply a key (not parallel: it sets the environment).
func TestKeysOnlyFromTheConfiguredVariable(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-sdk-environment")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-sdk-environment")
	t.Setenv("GOOGLE_API_KEY", "goog-from-the-sdk-environment")
	t.Setenv("GEMINI_API_KEY", "gemini-from-the-sdk-environment")
	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
	t.Setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:1/from-the-environment")
	var mu sync.Mutex
	seen := map[string]http.Header{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Clone()
		mu.Unlock()
		http.Error(w, `{"error":{"message":"no","type":"invalid_request_error"}}`, http.StatusBadRequest)
	}))
	defer hs.Close()
	doc := `{"providers":[
		{"name":"compat","type":"openai-compatible","base_url":"` + hs.URL + `/compat","api_key_env":"UNSET"},
		{"name":"claude","type":"anthropic","base_url":"` + hs.URL + `/claude","api_key_env":"UNSET"},
		{"name":"keyed","type":"anthropic","base_url":"` + hs.URL + `/keyed","api_key_env":"KEYED"},
		{"name":"gemini","type":"google","base_url":"` + hs.URL + `/gemini","api_key_env":"UNSET"},
		{"name":"gemini-keyed","type":"google","base_url":"` + hs.URL + `/gemini-keyed","api_key_env":"KEYED"}],
	"models":[{"id":"compat","provider":"compat","model":"m"},{"id":"claude","provider":"claude","model":"m"},{"id":"keyed","provider":"keyed","model":"m"},
		{"id":"gemini","provider":"gemini","model":"g"},{"id":"gemini-keyed","provider":"gemini-keyed","model":"g"}]}`
	r := registry(t, doc, map[string]string{"KEYED": "sk-configured-key"})
	for _, id := range []string{"compat", "claude", "keyed", "gemini", "gemini-keyed"} {
		m, err := r.Model(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.LM.Generate(context.Background(), fantasy.Call{Prompt: fantasy.Prompt{fantasy.NewUserMessage("hi")}}); err == nil {
			t.Fatalf("%s: no error from a 400", id)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for path, h := range seen {
		for _, name := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"} {
			if v := h.Get(name); strings.Contains(v, "environment") || (!strings.Contains(path, "keyed") && v != "") {
				t.Errorf("%s sent %s: %q", path, name, v)
			}
		}
	}
	if h := seen["/keyed/v1/messages"]; h == nil || h.Get("X-Api-Key") != "sk-configured-key" {
		t.Errorf("configured key not sent: %v", seen)
	}
	// The Gemini API, not Vertex, at the configured base URL.
	if h := seen["/gemini-keyed/v1beta/models/g:generateContent"]; h == nil || h.Get("X-Goog-Api-Key") != "sk-configured-key" {
		t.Errorf("configured Gemini key not sent: %v", seen)
	}
	if len(seen) != 5 {
		t.Errorf("requests %v", seen)
	}
}

// TestExampleConfigNeedsNoKey: the example config (make run's) builds every
// model without a warning, its local providers saying no_api_key; a
// provider that names no key variable and does not say so is warned about,
// and no_api_key with api_key_env is refused.
func TestExampleConfigNeedsNoKey(t *testing.T) {
	t.Parallel()
	warnings := func(cfg *config.Config) string {
		var log strings.Builder
		logger := slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))
		r := NewRegistry(cfg, Options{Logger: logger, Getenv: func(string) string { return "" }})
		for _, m := range cfg.Models {
			if _, err := r.Model(t.Context(), m.ID); err != nil {
				t.Fatalf("model %s: %v", m.ID, err)
			}
		}
		return log.String()
	}
	cfg, err := config.Load("../../examples/chatd.json")
	if err != nil {
		t.Fatal(err)
	}
	if w := warnings(cfg); w != "" {
		t.Fatalf("examples/chatd.json warns:\n%s", w)
	}
	cfg, err = config.Parse([]byte(`{"providers":[{"name":"local","type":"openai-compatible","base_url":"http://127.0.0.1:1/v1"}],
		"models":[{"id":"m","provider":"local","model":"m"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if w := warnings(cfg); !strings.Contains(w, "no_api_key") {
		t.Fatalf("no api_key_env and no no_api_key: %q", w)
	}
	_, err = config.Parse([]byte(`{"providers":[{"name":"local","type":"openai-compatible","base_url":"http://127.0.0.1:1/v1",
		"api_key_env":"K","no_api_key":true}]}`))
	if err == nil || !strings.Contains(err.Error(), "no_api_key") {
		t.Fatalf("no_api_key with api_key_env: %v", err)
	}
}
