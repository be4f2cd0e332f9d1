// Package provider turns the configured providers and models into
// charm.land/fantasy language models.
package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"

	"charm.land/fantasy"
	"charm.land/fantasy/providers/anthropic"
	"charm.land/fantasy/providers/openai"
	"charm.land/fantasy/providers/openaicompat"

	"github.com/chatd/chatd/internal/config"
)

// ErrUnknownModel: the model id is not configured.
var ErrUnknownModel = errors.New("unknown model")

// Model is a configured model ready to call.
type Model struct {
	Config   config.Model
	Provider config.Provider
	LM       fantasy.LanguageModel
}

// Registry resolves model ids. Language models are built on first use.
type Registry struct {
	cfg    *config.Config
	client *http.Client

	mu     sync.Mutex
	models map[string]*Model
}

// NewRegistry returns a registry over cfg. client may be nil.
func NewRegistry(cfg *config.Config, client *http.Client) *Registry {
	if cfg == nil {
		cfg = &config.Config{}
	}
	return &Registry{cfg: cfg, client: client, models: map[string]*Model{}}
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
	var pc config.Provider
	for _, p := range r.cfg.Providers {
		if p.Name == mc.Provider {
			pc = p
		}
	}
	p, err := r.build(pc)
	if err != nil {
		return nil, fmt.Errorf("provider %q: %w", pc.Name, err)
	}
	lm, err := p.LanguageModel(ctx, mc.Model)
	if err != nil {
		return nil, fmt.Errorf("provider %q model %q: %w", pc.Name, mc.Model, err)
	}
	m := &Model{Config: mc, Provider: pc, LM: lm}
	r.models[id] = m
	return m, nil
}

func (r *Registry) build(pc config.Provider) (fantasy.Provider, error) {
	key := ""
	if pc.APIKeyEnv != "" {
		key = os.Getenv(pc.APIKeyEnv)
	}
	switch pc.Type {
	case config.TypeOpenAICompatible:
		opts := []openaicompat.Option{openaicompat.WithBaseURL(pc.BaseURL), openaicompat.WithAPIKey(key), openaicompat.WithName(pc.Name)}
		if len(pc.Headers) > 0 {
			opts = append(opts, openaicompat.WithHeaders(pc.Headers))
		}
		if r.client != nil {
			opts = append(opts, openaicompat.WithHTTPClient(r.client))
		}
		return openaicompat.New(opts...)
	case config.TypeOpenAI, config.TypeOpenAIChat:
		opts := []openai.Option{openai.WithAPIKey(key), openai.WithName(pc.Name)}
		if pc.BaseURL != "" {
			opts = append(opts, openai.WithBaseURL(pc.BaseURL))
		}
		if pc.Type == config.TypeOpenAI {
			opts = append(opts, openai.WithUseResponsesAPI())
		}
		if len(pc.Headers) > 0 {
			opts = append(opts, openai.WithHeaders(pc.Headers))
		}
		if r.client != nil {
			opts = append(opts, openai.WithHTTPClient(r.client))
		}
		return openai.New(opts...)
	case config.TypeAnthropic:
		opts := []anthropic.Option{anthropic.WithAPIKey(key), anthropic.WithName(pc.Name)}
		if pc.BaseURL != "" {
			opts = append(opts, anthropic.WithBaseURL(pc.BaseURL))
		}
		if len(pc.Headers) > 0 {
			opts = append(opts, anthropic.WithHeaders(pc.Headers))
		}
		if r.client != nil {
			opts = append(opts, anthropic.WithHTTPClient(r.client))
		}
		return anthropic.New(opts...)
	}
	return nil, fmt.Errorf("unknown provider type %q", pc.Type)
}
