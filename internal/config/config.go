// Package config reads the server's configuration file: LLM providers, the
// models offered on them, and the default model.
package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"

	"github.com/chatd/chatd/internal/hooks"
)

// Provider types.
const (
	TypeOpenAI           = "openai"            // OpenAI Responses API
	TypeOpenAIChat       = "openai-chat"       // OpenAI Chat Completions
	TypeAnthropic        = "anthropic"         // Anthropic Messages
	TypeOpenAICompatible = "openai-compatible" // any Chat Completions server
)

// Config is the whole file.
type Config struct {
	Providers    []Provider `json:"providers"`
	Models       []Model    `json:"models"`
	DefaultModel string     `json:"default_model"`
	// Workspace, when set, is the directory the read_file and list_files
	// server tools may read.
	Workspace string `json:"workspace,omitempty"`
	// Hooks are stop hooks (see internal/hooks).
	Hooks []hooks.Config `json:"hooks,omitempty"`
	// CompactionThreshold is the fraction of a model's context window the
	// prompt may fill before older history is summarised (default 0.7).
	CompactionThreshold float64 `json:"compaction_threshold,omitempty"`
}

// Provider is one LLM endpoint. The API key is read from the environment
// variable named by APIKeyEnv, never from the file, and never logged.
type Provider struct {
	Name      string            `json:"name"`
	Type      string            `json:"type"`
	BaseURL   string            `json:"base_url,omitempty"`
	APIKeyEnv string            `json:"api_key_env,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
}

// Model is a model offered to clients under ID.
type Model struct {
	ID              string `json:"id"`
	Provider        string `json:"provider"`
	Model           string `json:"model"`
	ContextWindow   int64  `json:"context_window,omitempty"`
	MaxOutputTokens int64  `json:"max_output_tokens,omitempty"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$`)

// Load reads and checks a config file.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(b)
}

// Parse decodes and checks a config document; unknown fields are errors.
func Parse(b []byte) (*Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return &c, c.check()
}

func (c *Config) check() error {
	providers := map[string]bool{}
	for i, p := range c.Providers {
		if !nameRE.MatchString(p.Name) {
			return fmt.Errorf("config: providers[%d].name %q is not a valid name", i, p.Name)
		}
		if providers[p.Name] {
			return fmt.Errorf("config: provider %q is defined twice", p.Name)
		}
		providers[p.Name] = true
		switch p.Type {
		case TypeOpenAI, TypeOpenAIChat, TypeAnthropic:
		case TypeOpenAICompatible:
			if p.BaseURL == "" {
				return fmt.Errorf("config: provider %q: base_url is required for type %s", p.Name, p.Type)
			}
		default:
			return fmt.Errorf("config: provider %q: unknown type %q (openai, openai-chat, anthropic, openai-compatible)", p.Name, p.Type)
		}
	}
	models := map[string]bool{}
	for i, m := range c.Models {
		if !nameRE.MatchString(m.ID) {
			return fmt.Errorf("config: models[%d].id %q is not a valid id", i, m.ID)
		}
		if models[m.ID] {
			return fmt.Errorf("config: model %q is defined twice", m.ID)
		}
		models[m.ID] = true
		if !providers[m.Provider] {
			return fmt.Errorf("config: model %q: unknown provider %q", m.ID, m.Provider)
		}
		if m.Model == "" {
			return fmt.Errorf("config: model %q: model (the provider's model name) is required", m.ID)
		}
	}
	if c.DefaultModel != "" && !models[c.DefaultModel] {
		return fmt.Errorf("config: default_model %q is not one of the models", c.DefaultModel)
	}
	if c.CompactionThreshold < 0 || c.CompactionThreshold >= 1 {
		return fmt.Errorf("config: compaction_threshold %v must be between 0 and 1", c.CompactionThreshold)
	}
	if c.CompactionThreshold == 0 {
		c.CompactionThreshold = 0.7
	}
	if _, err := hooks.New(c.Hooks, nil); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if c.DefaultModel == "" && len(c.Models) > 0 {
		c.DefaultModel = c.Models[0].ID
	}
	return nil
}
