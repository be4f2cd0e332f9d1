// Package provider turns the configured providers and models into
// charm.land/fantasy language models, with the per-model call options
// (reasoning, thinking, strict tools), the API keys read from the
// environment, and an HTTP transport that observes what fantasy's stream
// parts do not carry (see Observe).
package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

	"charm.land/fantasy"
	"charm.land/fantasy/providers/anthropic"
	"charm.land/fantasy/providers/google"
	"charm.land/fantasy/providers/openai"
	"charm.land/fantasy/providers/openaicompat"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/config"
)

// ErrUnknownModel: the model id is not configured.
var ErrUnknownModel = errors.New("unknown model")

// ErrStructuredUnsupported: the model's configuration cannot carry a
// structured request (see StructuredOutputSupported).
var ErrStructuredUnsupported = errors.New("structured output is not supported by this model's configuration")

// Model is a configured model ready to call.
type Model struct {
	Config   config.Model
	Provider config.Provider
	LM       fantasy.LanguageModel
	// Options are the provider options every call to this model carries
	// (reasoning effort, extended thinking, the strict-tools switch); nil
	// when the model sets none.
	Options fantasy.ProviderOptions
}

// Options configure a Registry.
type Options struct {
	// HTTPClient is the base client for provider calls (nil: one over a
	// copy of http.DefaultTransport that keeps Calls idle connections per
	// host). Its transport is wrapped, never replaced.
	HTTPClient *http.Client
	// Calls is how many provider calls may run at once (the server's
	// --max-running); 0 means 64. http.DefaultTransport keeps 2 idle
	// connections per host, so with more calls than that calls to one
	// provider closed their connections and dialed (and shook hands) again.
	Calls int
	// Metrics receives the providers' call gauges (nil: none).
	Metrics *prometheus.Registry
	// Getenv reads the API key variables (nil: os.Getenv).
	Getenv func(string) string
	// Logger receives configuration warnings; keys are never logged.
	Logger *slog.Logger
}

// Registry resolves model ids. Language models are built on first use.
type Registry struct {
	cfg  *config.Config
	opts Options

	mu       sync.Mutex
	models   map[string]*Model
	keys     map[string]string   // provider name → API key, for Redact
	limiters map[string]*limiter // provider name → its limits, shared by its models
	lm       limiterMetrics
}

// NewRegistry returns a registry over cfg.
func NewRegistry(cfg *config.Config, o Options) *Registry {
	if cfg == nil {
		cfg = &config.Config{}
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Transport: pooledTransport(cmp.Or(o.Calls, 64))}
	}
	return &Registry{cfg: cfg, opts: o, models: map[string]*Model{}, keys: map[string]string{}, limiters: map[string]*limiter{},
		lm: newLimiterMetrics(o.Metrics)}
}

// pooledTransport is http.DefaultTransport's configuration keeping calls
// idle connections per host: every worker's next call finds one. Each
// HTTP/1.1 connection keeps a read and a write buffer for as long as it
// lives, that is for every chat waiting on its model: 1 KiB each instead
// of 4 (a request body and the streamed answer's larger reads go around
// them, straight to and from the socket).
func pooledTransport(calls int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = calls
	t.MaxIdleConns = max(t.MaxIdleConns, calls)
	t.ReadBufferSize, t.WriteBufferSize = 1<<10, 1<<10
	return t
}

// Default is the default model id ("" when none is configured).
func (r *Registry) Default() string { return r.cfg.DefaultModel }

// Has reports whether id is a configured model.
func (r *Registry) Has(id string) bool {
	_, ok := r.modelConfig(id)
	return ok
}

// IDs lists the configured model ids.
func (r *Registry) IDs() []string {
	out := make([]string, 0, len(r.cfg.Models))
	for _, m := range r.cfg.Models {
		out = append(out, m.ID)
	}
	return out
}

func (r *Registry) modelConfig(id string) (config.Model, bool) {
	for _, m := range r.cfg.Models {
		if m.ID == id {
			return m, true
		}
	}
	return config.Model{}, false
}

func (r *Registry) providerConfig(name string) config.Provider {
	for _, p := range r.cfg.Providers {
		if p.Name == name {
			return p
		}
	}
	return config.Provider{}
}

// StructuredOutputSupported reports whether a structured request for
// schema (as admitted) may run on model id, judged from the configuration
// and the schema (no provider call). The finalizer's parameters are the
// caller's schema inside a wrapper, sent as they are: a model whose
// settings would force strict decoding on every tool, with no per-tool
// override in fantasy's encoder, cannot carry it without rewriting the
// schema, which chatd never does; and Gemini refuses a schema whose
// recursion runs through required properties only (see geminiCarries).
// The error wraps ErrStructuredUnsupported and says why; it names no
// secret.
func (r *Registry) StructuredOutputSupported(id string, schema json.RawMessage) error {
	mc, ok := r.modelConfig(id)
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownModel, id)
	}
	pc := r.providerConfig(mc.Provider)
	if pc.Type == config.TypeOpenAI && mc.StrictTools != nil && *mc.StrictTools {
		return fmt.Errorf("%w: model %q has strict_tools on the OpenAI Responses API, which sends every function tool "+
			"with strict:true and has no per-tool override, so the finalizer's schema would have to be rewritten "+
			"into OpenAI's strict subset; turn strict_tools off for this model or use another model", ErrStructuredUnsupported, id)
	}
	if pc.Type == config.TypeGoogle && len(schema) > 0 {
		if err := geminiCarries(schema); err != nil {
			return fmt.Errorf("%w: model %q is a Gemini model, which cannot carry this schema: %v", ErrStructuredUnsupported, id, err)
		}
	}
	return nil
}

// Model returns the model id, building its client on first use.
func (r *Registry) Model(ctx context.Context, id string) (*Model, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.models[id]; ok {
		return m, nil
	}
	mc, ok := r.modelConfig(id)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownModel, id)
	}
	pc := r.providerConfig(mc.Provider)
	p, err := r.build(pc)
	if err != nil {
		return nil, fmt.Errorf("provider %q: %w", pc.Name, err)
	}
	lm, err := p.LanguageModel(ctx, mc.Model)
	if err != nil {
		return nil, fmt.Errorf("provider %q model %q: %w", pc.Name, mc.Model, err)
	}
	switch pc.Type {
	case config.TypeOpenAI:
		lm = responsesModel{lm, encryptedReasoning(mc.Model, mc.ReasoningEffort, mc.ReasoningSummary)}
	case config.TypeGoogle:
		lm = geminiModel{lm}
	}
	m := &Model{Config: mc, Provider: pc, LM: lm, Options: callOptions(pc, mc, lm)}
	r.models[id] = m
	return m, nil
}

// Redact replaces every configured API key in s; use it on any provider
// text that may be logged or stored (error messages can echo a key).
func (r *Registry) Redact(s string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.keys {
		if len(k) >= minRedactLen {
			s = strings.ReplaceAll(s, k, "[redacted]")
		}
	}
	return s
}

// minRedactLen avoids redacting every occurrence of a toy key like "x".
const minRedactLen = 6

func (r *Registry) apiKey(pc config.Provider) string {
	if pc.NoAPIKey {
		return ""
	}
	if pc.APIKeyEnv == "" {
		r.opts.Logger.Warn("provider has no api_key_env: its requests go without a key (say \"no_api_key\": true when none is needed)",
			slog.String("provider", pc.Name))
		return ""
	}
	key := r.opts.Getenv(pc.APIKeyEnv)
	if key == "" {
		r.opts.Logger.Warn("provider API key variable is empty or unset", slog.String("provider", pc.Name),
			slog.String("variable", pc.APIKeyEnv))
	}
	r.keys[pc.Name] = key
	return key
}

// httpClient is the base client with the observing transport around it.
// Without a configured key it also strips credentials: the provider SDKs
// fall back to their own environment variables (OPENAI_API_KEY,
// ANTHROPIC_API_KEY...), which would send a key the configuration did not
// name to whatever base URL it does name.
func (r *Registry) httpClient(pc config.Provider, api, key string) *http.Client {
	c := new(http.Client)
	*c = *r.opts.HTTPClient
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	lim := r.limiters[pc.Name]
	if lim == nil {
		lim = newLimiter(base, pc.Name, pc.MaxConcurrency, pc.RequestsPerMinute, r.lm)
		r.limiters[pc.Name] = lim
	}
	c.Transport = &transport{base: lim, api: api, stripAuth: key == "", log: r.opts.Logger}
	return c
}

// unsetKey stands in for a missing Anthropic or Gemini key: the SDKs
// refuse to send a request without a credential (after searching the
// environment and, for Anthropic, its profile files); the transport
// removes it again.
const unsetKey = "chatd-no-key-configured"

func (r *Registry) build(pc config.Provider) (fantasy.Provider, error) {
	key := r.apiKey(pc)
	switch pc.Type {
	case config.TypeOpenAICompatible:
		opts := []openaicompat.Option{openaicompat.WithBaseURL(pc.BaseURL), openaicompat.WithAPIKey(key),
			openaicompat.WithName(pc.Name), openaicompat.WithHTTPClient(r.httpClient(pc, apiChat, key)), compatOptions()}
		if len(pc.Headers) > 0 {
			opts = append(opts, openaicompat.WithHeaders(pc.Headers))
		}
		return openaicompat.New(opts...)
	case config.TypeOpenAI, config.TypeOpenAIChat:
		api := apiChat
		if pc.Type == config.TypeOpenAI {
			api = apiResponses
		}
		opts := []openai.Option{openai.WithAPIKey(key), openai.WithName(pc.Name), openai.WithHTTPClient(r.httpClient(pc, api, key))}
		if pc.BaseURL != "" {
			opts = append(opts, openai.WithBaseURL(pc.BaseURL))
		}
		if pc.Type == config.TypeOpenAI {
			// fantasy would fall back to Chat Completions for model names
			// it does not list; the type says Responses, so always.
			opts = append(opts, openai.WithUseResponsesAPI(), openai.WithResponsesAPIFunc(func(string) bool { return true }))
		}
		if len(pc.Headers) > 0 {
			opts = append(opts, openai.WithHeaders(pc.Headers))
		}
		return openai.New(opts...)
	case config.TypeAnthropic:
		opts := []anthropic.Option{anthropic.WithAPIKey(cmp.Or(key, unsetKey)), anthropic.WithName(pc.Name),
			anthropic.WithHTTPClient(r.httpClient(pc, apiAnthropic, key))}
		if pc.BaseURL != "" {
			opts = append(opts, anthropic.WithBaseURL(pc.BaseURL))
		}
		if len(pc.Headers) > 0 {
			opts = append(opts, anthropic.WithHeaders(pc.Headers))
		}
		return anthropic.New(opts...)
	case config.TypeGoogle:
		// The Gemini API with a key (never Vertex: without a key genai
		// would read GOOGLE_GENAI_USE_VERTEXAI and credentials from the
		// environment).
		opts := []google.Option{google.WithGeminiAPIKey(cmp.Or(key, unsetKey)), google.WithName(pc.Name),
			google.WithBaseURL(cmp.Or(pc.BaseURL, defaultGeminiBaseURL)), google.WithHTTPClient(r.httpClient(pc, apiGoogle, key))}
		if len(pc.Headers) > 0 {
			opts = append(opts, google.WithHeaders(pc.Headers))
		}
		return google.New(opts...)
	}
	return nil, fmt.Errorf("unknown provider type %q", pc.Type)
}

// callOptions are the per-model provider options, keyed as each encoder
// reads them: "openai" for both OpenAI APIs, "anthropic", "google", and
// the provider's own name for openai-compatible (its encoder looks options up
// under the language model's provider name).
func callOptions(pc config.Provider, mc config.Model, lm fantasy.LanguageModel) fantasy.ProviderOptions {
	var effort *openai.ReasoningEffort
	if mc.ReasoningEffort != "" {
		e := openai.ReasoningEffort(mc.ReasoningEffort)
		effort = &e
	}
	switch pc.Type {
	case config.TypeOpenAI:
		// fantasy always sends store:false: without its encrypted content
		// a reasoning item cannot be sent back (responsesModel).
		include := encryptedReasoning(mc.Model, mc.ReasoningEffort, mc.ReasoningSummary)
		if effort == nil && mc.ReasoningSummary == "" && mc.StrictTools == nil && !include {
			return nil
		}
		o := &openai.ResponsesProviderOptions{ReasoningEffort: effort, StrictJSONSchema: mc.StrictTools}
		if include {
			o.Include = []openai.IncludeType{openai.IncludeReasoningEncryptedContent}
		}
		if mc.ReasoningSummary != "" {
			s := mc.ReasoningSummary
			o.ReasoningSummary = &s
		}
		return fantasy.ProviderOptions{openai.Name: o}
	case config.TypeOpenAIChat:
		if effort == nil {
			return nil
		}
		return fantasy.ProviderOptions{openai.Name: &openai.ProviderOptions{ReasoningEffort: effort}}
	case config.TypeOpenAICompatible:
		if effort == nil {
			return nil
		}
		return fantasy.ProviderOptions{lm.Provider(): &openaicompat.ProviderOptions{ReasoningEffort: effort}}
	case config.TypeAnthropic:
		if mc.ThinkingBudgetTokens == 0 {
			return nil
		}
		return fantasy.ProviderOptions{anthropic.Name: &anthropic.ProviderOptions{
			Thinking: &anthropic.ThinkingProviderOption{BudgetTokens: mc.ThinkingBudgetTokens}}}
	case config.TypeGoogle:
		if mc.ThinkingBudget == nil && mc.ThinkingLevel == "" && mc.IncludeThoughts == nil {
			return nil
		}
		// The config refuses a budget under 128, which fantasy would
		// rewrite in these shared options.
		tc := &google.ThinkingConfig{ThinkingBudget: mc.ThinkingBudget, IncludeThoughts: mc.IncludeThoughts}
		if mc.ThinkingLevel != "" {
			l := strings.ToUpper(mc.ThinkingLevel)
			tc.ThinkingLevel = &l
		}
		return fantasy.ProviderOptions{google.Name: &google.ProviderOptions{ThinkingConfig: tc}}
	}
	return nil
}
