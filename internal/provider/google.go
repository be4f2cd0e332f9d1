package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"charm.land/fantasy"
	"charm.land/fantasy/providers/google"
	"google.golang.org/genai"

	"github.com/chatd/chatd/internal/validate"
)

// Gemini (type google) through fantasy's Google provider, the Gemini API
// with an API key. chatd's layer adds what fantasy v0.41.2 lacks:
//
//   - Thought signatures byte for byte. Gemini's are binary; fantasy holds
//     one as a Go string (ReasoningMetadata.Signature) whose JSON encoding
//     replaces every byte that is not UTF-8 with U+FFFD, so a signature
//     stored that way comes back corrupted and the API refuses it
//     ("Corrupted thought signature."). geminiModel turns fantasy's
//     metadata into ThoughtSignature (the bytes, base64 in JSON) on the way
//     out of a step, and back into fantasy's on the way into the next
//     request, where fantasy puts it on the function call (or text) that
//     followed the reasoning, as Gemini requires.
//   - parametersJsonSchema: see geminiSchema. The transport replaces the
//     parameters fantasy encoded with the tool's schema in that form.
//   - The usage of the stream's last event: every event carries the usage
//     so far and fantasy adds the events' figures up; Gemini's prompt
//     count includes the cached tokens and its candidates count excludes
//     the thoughts, chatd's input does not and its output does.
//   - A blocked prompt (promptFeedback.blockReason, no candidate) is a
//     content-filter finish, not fantasy's incomplete-stream error.
//   - The retry delay of a 429 (a google.rpc.RetryInfo detail) as the
//     Retry-After the runner honours.

// TypeThoughtSignature is the fantasy provider-data type id of
// ThoughtSignature, stored under the key "google" like fantasy's own.
const TypeThoughtSignature = "chatd.google.thought_signature"

// defaultGeminiBaseURL is set explicitly: genai would otherwise read
// GOOGLE_GEMINI_BASE_URL from the environment.
const defaultGeminiBaseURL = "https://generativelanguage.googleapis.com/"

// ThoughtSignature is a Gemini thought signature as stored with a step:
// the exact bytes, and the function call it came on (fantasy's ToolID).
type ThoughtSignature struct {
	Signature []byte `json:"signature"`
	ToolID    string `json:"tool_id,omitempty"`
}

func init() {
	fantasy.RegisterProviderType(TypeThoughtSignature, func(data []byte) (fantasy.ProviderOptionsData, error) {
		var v ThoughtSignature
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, err
		}
		return &v, nil
	})
}

// Options implements fantasy.ProviderOptionsData.
func (*ThoughtSignature) Options() {}

// MarshalJSON wraps the signature in fantasy's typed envelope.
func (s ThoughtSignature) MarshalJSON() ([]byte, error) {
	type plain ThoughtSignature
	return fantasy.MarshalProviderType(TypeThoughtSignature, plain(s))
}

// UnmarshalJSON reads fantasy's typed envelope.
func (s *ThoughtSignature) UnmarshalJSON(data []byte) error {
	type plain ThoughtSignature
	var p plain
	if err := fantasy.UnmarshalProviderType(data, &p); err != nil {
		return err
	}
	*s = ThoughtSignature(p)
	return nil
}

// GeminiSignature returns the thought signature in provider metadata or
// options ("google" key), from fantasy's type or chatd's; nil when none.
func GeminiSignature(md map[string]fantasy.ProviderOptionsData) []byte {
	switch v := md[google.Name].(type) {
	case *ThoughtSignature:
		return v.Signature
	case *google.ReasoningMetadata:
		return []byte(v.Signature)
	}
	return nil
}

type geminiModel struct{ fantasy.LanguageModel }

type geminiKey struct{}

// geminiCall is one call's state, shared with the transport.
type geminiCall struct {
	decls map[string]json.RawMessage // function name → parametersJsonSchema

	mu      sync.Mutex
	usage   json.RawMessage // the last event's usageMetadata
	blocked string          // promptFeedback.blockReason
	header  http.Header     // of an answer that was not 200
}

// prepare turns stored signatures back into fantasy's metadata (on a copy
// of the prompt) and puts every function tool's schema in Gemini's form.
func prepare(call fantasy.Call) (*geminiCall, fantasy.Call) {
	gc := &geminiCall{decls: map[string]json.RawMessage{}}
	for _, t := range call.Tools {
		ft, ok := t.(fantasy.FunctionTool)
		if !ok {
			continue
		}
		schema := ft.InputSchema
		if g, err := geminiSchema(schema); err == nil {
			schema = g // else as written: the API says what it refuses
		}
		if b, err := json.Marshal(schema); err == nil {
			gc.decls[ft.Name] = b
		}
	}
	prompt := make(fantasy.Prompt, len(call.Prompt))
	for i, m := range call.Prompt {
		prompt[i] = m
		if m.Role != fantasy.MessageRoleAssistant {
			continue
		}
		var content []fantasy.MessagePart
		for j, p := range m.Content {
			r, ok := fantasy.AsMessagePart[fantasy.ReasoningPart](p)
			if !ok {
				continue
			}
			sig, ok := r.ProviderOptions[google.Name].(*ThoughtSignature)
			if !ok {
				continue
			}
			if content == nil {
				content = append([]fantasy.MessagePart{}, m.Content...)
			}
			opts := maps.Clone(r.ProviderOptions)
			opts[google.Name] = &google.ReasoningMetadata{Signature: string(sig.Signature), ToolID: sig.ToolID}
			r.ProviderOptions = opts
			content[j] = r
		}
		if content != nil {
			prompt[i].Content = content
		}
	}
	call.Prompt = prompt
	return gc, call
}

// storable replaces fantasy's signature metadata with ThoughtSignature;
// metadata without a signature is dropped. md itself is not changed.
func storable(md fantasy.ProviderMetadata) fantasy.ProviderMetadata {
	r, ok := md[google.Name].(*google.ReasoningMetadata)
	if !ok {
		return md
	}
	out := maps.Clone(md)
	delete(out, google.Name)
	if r != nil && r.Signature != "" {
		out[google.Name] = &ThoughtSignature{Signature: []byte(r.Signature), ToolID: r.ToolID}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Stream keeps every thought signature as its bytes, the usage of the last
// event, a blocked prompt as a content-filter finish, and a 429's retry
// delay.
func (m geminiModel) Stream(ctx context.Context, call fantasy.Call) (fantasy.StreamResponse, error) {
	gc, call := prepare(call)
	s, err := m.LanguageModel.Stream(context.WithValue(ctx, geminiKey{}, gc), call)
	if err != nil {
		return nil, gc.providerError(err)
	}
	return func(yield func(fantasy.StreamPart) bool) {
		for p := range s {
			p.ProviderMetadata = storable(p.ProviderMetadata)
			switch p.Type {
			case fantasy.StreamPartTypeFinish:
				p.Usage = gc.finalUsage(p.Usage)
			case fantasy.StreamPartTypeError:
				if gc.blockReason() != "" {
					p = fantasy.StreamPart{Type: fantasy.StreamPartTypeFinish, FinishReason: fantasy.FinishReasonContentFilter,
						Usage: gc.finalUsage(fantasy.Usage{})}
				} else {
					p.Error = gc.providerError(p.Error)
				}
			}
			if !yield(p) {
				return
			}
		}
	}, nil
}

// Generate does the same for a non-streaming call (the compaction summary).
func (m geminiModel) Generate(ctx context.Context, call fantasy.Call) (*fantasy.Response, error) {
	gc, call := prepare(call)
	resp, err := m.LanguageModel.Generate(context.WithValue(ctx, geminiKey{}, gc), call)
	if err != nil {
		return nil, gc.providerError(err)
	}
	for i, c := range resp.Content {
		if r, ok := fantasy.AsContentType[fantasy.ReasoningContent](c); ok {
			r.ProviderMetadata = storable(r.ProviderMetadata)
			resp.Content[i] = r
		}
	}
	return resp, nil
}

// event reads one server-sent event of the response.
func (gc *geminiCall) event(data []byte) {
	var ev struct {
		UsageMetadata  json.RawMessage `json:"usageMetadata"`
		PromptFeedback *struct {
			BlockReason string `json:"blockReason"`
		} `json:"promptFeedback"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if len(ev.UsageMetadata) > 0 && string(ev.UsageMetadata) != "null" {
		gc.usage = ev.UsageMetadata
	}
	if ev.PromptFeedback != nil && ev.PromptFeedback.BlockReason != "" {
		gc.blocked = ev.PromptFeedback.BlockReason
	}
}

func (gc *geminiCall) blockReason() string {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return gc.blocked
}

// geminiUsageMetadata is Gemini's usage object.
type geminiUsageMetadata struct {
	PromptTokenCount        *int64 `json:"promptTokenCount"`
	CachedContentTokenCount *int64 `json:"cachedContentTokenCount"`
	CandidatesTokenCount    *int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      *int64 `json:"thoughtsTokenCount"`
	TotalTokenCount         *int64 `json:"totalTokenCount"`
}

// finalUsage is the last event's usage in chatd's terms: input without the
// cached tokens, output with the thoughts. Without one, fantasy's.
func (gc *geminiCall) finalUsage(u fantasy.Usage) fantasy.Usage {
	gc.mu.Lock()
	raw := gc.usage
	gc.mu.Unlock()
	var w geminiUsageMetadata
	if !present(raw, &w) {
		return u
	}
	v := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	return fantasy.Usage{
		InputTokens:     v(w.PromptTokenCount) - v(w.CachedContentTokenCount),
		CacheReadTokens: v(w.CachedContentTokenCount),
		OutputTokens:    v(w.CandidatesTokenCount) + v(w.ThoughtsTokenCount),
		ReasoningTokens: v(w.ThoughtsTokenCount),
		TotalTokens:     v(w.TotalTokenCount),
	}
}

// geminiReported says which figures a usageMetadata carried.
func geminiReported(raw json.RawMessage) reported {
	var w geminiUsageMetadata
	if !present(raw, &w) {
		return reported{}
	}
	return reported{
		Input:     w.PromptTokenCount != nil,
		CacheRead: w.CachedContentTokenCount != nil,
		Output:    w.CandidatesTokenCount != nil || w.ThoughtsTokenCount != nil,
		Reasoning: w.ThoughtsTokenCount != nil,
	}
}

// providerError gives a provider error the Retry-After the runner reads:
// the answer's own header, or the retry delay of the error's RetryInfo
// detail, where Gemini puts it.
func (gc *geminiCall) providerError(err error) error {
	var pe *fantasy.ProviderError
	if !errors.As(err, &pe) || pe.StatusCode == 0 || len(pe.ResponseHeaders) > 0 {
		return err
	}
	h := map[string]string{}
	gc.mu.Lock()
	for k, v := range gc.header {
		if len(v) > 0 {
			h[strings.ToLower(k)] = v[0]
		}
	}
	gc.mu.Unlock()
	var ae genai.APIError
	if errors.As(err, &ae) && h["retry-after"] == "" {
		if d := retryDelay(ae.Details); d > 0 {
			h["retry-after"] = strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
		}
	}
	if len(h) == 0 {
		return err
	}
	c := *pe
	c.ResponseHeaders = h
	return &c
}

// retryDelay reads a google.rpc.RetryInfo detail ("retryDelay": "3s").
func retryDelay(details []map[string]any) time.Duration {
	for _, d := range details {
		if t, _ := d["@type"].(string); !strings.HasSuffix(t, "google.rpc.RetryInfo") {
			continue
		}
		s, _ := d["retryDelay"].(string)
		if v, err := time.ParseDuration(s); err == nil && v > 0 {
			return v
		}
	}
	return 0
}

// rewrite puts each function declaration's schema in
// parametersJsonSchema (in place of fantasy's parameters); the contents,
// signatures included, keep their bytes.
func (gc *geminiCall) rewrite(body []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	raw, ok := top["tools"]
	if !ok {
		return body, nil
	}
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, err
	}
	for _, tool := range tools {
		fd, ok := tool["functionDeclarations"]
		if !ok {
			continue
		}
		var decls []map[string]json.RawMessage
		if err := json.Unmarshal(fd, &decls); err != nil {
			return nil, err
		}
		for _, d := range decls {
			var name string
			_ = json.Unmarshal(d["name"], &name)
			schema, ok := gc.decls[name]
			if !ok {
				return nil, fmt.Errorf("function %q is not one of the call's tools", name)
			}
			delete(d, "parameters")
			d["parametersJsonSchema"] = schema
		}
		if tool["functionDeclarations"], ok = marshalRaw(decls); !ok {
			return nil, errors.New("function declarations do not encode")
		}
	}
	if top["tools"], ok = marshalRaw(tools); !ok {
		return nil, errors.New("tools do not encode")
	}
	out, ok := marshalRaw(top)
	if !ok {
		return nil, errors.New("the body does not encode")
	}
	return out, nil
}

// marshalRaw encodes without escaping HTML, so that raw members keep
// their bytes.
func marshalRaw(v any) (json.RawMessage, bool) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil, false
	}
	return bytes.TrimRight(b.Bytes(), "\n"), true
}

// geminiCarries says why a structured request's schema cannot be sent to
// Gemini, embedded as the finalizer embeds it; nil when it can.
func geminiCarries(schema json.RawMessage) error {
	s, err := validate.ToolSchema(schema, "/properties/output")
	if err != nil {
		return err
	}
	g, err := geminiSchema(map[string]any{"type": "object", "properties": map[string]any{"output": s}, "required": []any{"output"}})
	if err != nil {
		return err
	}
	if c := requiredCycle(g); c != "" {
		return fmt.Errorf("its references %s form a cycle through required properties only, and Gemini unrolls "+
			"recursive references only within properties that are not required; make a property on the cycle optional", c)
	}
	return nil
}
