// Package config reads the server's configuration file: LLM providers, the
// models offered on them, and the default model.
package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/chatd/chatd/internal/hooks"
	"github.com/chatd/chatd/internal/mcp"
)

// Provider types.
const (
	TypeOpenAI           = "openai"            // OpenAI Responses API
	TypeOpenAIChat       = "openai-chat"       // OpenAI Chat Completions
	TypeAnthropic        = "anthropic"         // Anthropic Messages
	TypeOpenAICompatible = "openai-compatible" // any Chat Completions server
	TypeGoogle           = "google"            // the Gemini API (generateContent)
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
	// MCPServers are Model Context Protocol servers whose tools the agent
	// may use (see internal/mcp and docs/tools.md). Only the operator
	// configures them: the API can opt a chat into one by name, nothing more.
	MCPServers []mcp.ServerConfig `json:"mcp_servers,omitempty"`
	// Webhooks are the endpoints receipts are delivered to (see
	// internal/webhooks and docs/operations.md#webhooks). Only here, never
	// from the API. Parse leaves them to webhooks.Check, which owns their
	// events and secrets.
	Webhooks []Webhook `json:"webhooks,omitempty"`
	// SpawnAgent, when present, offers the spawn_agent server tool to
	// chats created with "spawn_agents": true (docs/tools.md).
	SpawnAgent *SpawnAgent `json:"spawn_agent,omitempty"`
}

// Webhook is one endpoint in the config file (`webhooks`).
type Webhook struct {
	// Name identifies the endpoint in the database, metrics and logs.
	Name string `json:"name"`
	// URL receives the POSTs (http or https).
	URL string `json:"url"`
	// Secret signs the deliveries; or SecretEnv names the environment
	// variable holding it (one of the two).
	Secret    string `json:"secret,omitempty"`
	SecretEnv string `json:"secret_env,omitempty"`
	// Events the endpoint takes (default: all three).
	Events []string `json:"events,omitempty"`
	// Timeout of one POST (default 10s).
	Timeout string `json:"timeout,omitempty"`
	// RetryFor bounds the retries, from the receipt's commit (default 24h);
	// a delivery still failing then is dead.
	RetryFor string `json:"retry_for,omitempty"`
}

// SpawnAgent caps child chats; zero fields take the defaults.
type SpawnAgent struct {
	// MaxDepth: a chat this many spawns deep cannot spawn (default 3).
	MaxDepth int `json:"max_depth,omitempty"`
	// MaxChildrenPerTurn and MaxChildrenPerChat bound fan-out (defaults 8
	// and 32).
	MaxChildrenPerTurn int `json:"max_children_per_turn,omitempty"`
	MaxChildrenPerChat int `json:"max_children_per_chat,omitempty"`
}

// Provider is one LLM endpoint. The API key is read from the environment
// variable named by APIKeyEnv, never from the file, and never logged.
// NoAPIKey says that the endpoint needs none (a local server): requests go
// without a key, and nothing is logged about it.
type Provider struct {
	Name      string            `json:"name"`
	Type      string            `json:"type"`
	BaseURL   string            `json:"base_url,omitempty"`
	APIKeyEnv string            `json:"api_key_env,omitempty"`
	NoAPIKey  bool              `json:"no_api_key,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	// MaxConcurrency bounds this process's calls in flight to the
	// provider (0: no bound); calls beyond wait their turn in order.
	MaxConcurrency int `json:"max_concurrency,omitempty"`
	// RequestsPerMinute bounds how many calls this process starts per
	// minute (0: no bound), evenly spaced.
	RequestsPerMinute int `json:"requests_per_minute,omitempty"`
}

// Model is a model offered to clients under ID.
type Model struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// ContextWindow (tokens) drives automatic compaction; 0 is unknown.
	ContextWindow int64 `json:"context_window,omitempty"`
	// MaxOutputTokens caps one provider step (0: the provider's default,
	// 4096 for anthropic).
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
	// ReasoningEffort is sent as OpenAI's reasoning effort (types openai,
	// openai-chat, openai-compatible): none, minimal, low, medium, high,
	// xhigh or max.
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// ReasoningSummary asks the Responses API for reasoning summaries
	// (type openai): auto, concise or detailed.
	ReasoningSummary string `json:"reasoning_summary,omitempty"`
	// ThinkingBudgetTokens turns on Anthropic extended thinking with this
	// budget (type anthropic): at least 1024 and below max_output_tokens.
	ThinkingBudgetTokens int64 `json:"thinking_budget_tokens,omitempty"`
	// StrictTools sets the Responses API's strict flag on every function
	// tool (type openai, the only type whose fantasy encoder has the
	// switch). Strict decoding would force the structured-output finalizer
	// into OpenAI's strict schema subset, and fantasy has no per-tool
	// override, so structured requests are refused on a model with
	// strict_tools true (see docs/providers.md).
	StrictTools *bool `json:"strict_tools,omitempty"`
	// ThinkingBudget (tokens, at least 128) and ThinkingLevel (minimal,
	// low, medium or high) set Gemini's thinking (type google); they are
	// mutually exclusive. IncludeThoughts asks Gemini for thought
	// summaries, which chatd stores as reasoning.
	ThinkingBudget  *int64 `json:"thinking_budget,omitempty"`
	ThinkingLevel   string `json:"thinking_level,omitempty"`
	IncludeThoughts *bool  `json:"include_thoughts,omitempty"`
}

// Reasoning effort and summary values accepted in the config.
var (
	reasoningEfforts   = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}
	reasoningSummaries = []string{"auto", "concise", "detailed"}
	thinkingLevels     = []string{"minimal", "low", "medium", "high"}
)

// MinGeminiThinkingBudget is the smallest thinking budget fantasy sends to
// Gemini: it raises anything lower (0 and the dynamic -1 included) to 128.
const MinGeminiThinkingBudget = 128

// MinThinkingBudget is Anthropic's smallest extended-thinking budget.
const MinThinkingBudget = 1024

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$`)

// Load reads and checks a config file, all but its webhooks.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(b)
}

// Parse decodes and checks a config document, all but its webhooks;
// unknown fields are errors.
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
	types, err := c.checkProviders()
	if err != nil {
		return err
	}
	models, err := c.checkModels(types)
	if err != nil {
		return err
	}
	if err := c.checkSpawnAgent(); err != nil {
		return err
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
	ids := make([]string, 0, len(c.Models))
	for _, m := range c.Models {
		ids = append(ids, m.ID)
	}
	if err := mcp.CheckConfigs(c.MCPServers, ids); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if c.DefaultModel == "" && len(c.Models) > 0 {
		c.DefaultModel = c.Models[0].ID
	}
	return nil
}

// checkProviders checks each provider and returns their types by name.
func (c *Config) checkProviders() (map[string]string, error) {
	types := map[string]string{}
	for i, p := range c.Providers {
		if !nameRE.MatchString(p.Name) {
			return nil, fmt.Errorf("config: providers[%d].name %q is not a valid name", i, p.Name)
		}
		if _, dup := types[p.Name]; dup {
			return nil, fmt.Errorf("config: provider %q is defined twice", p.Name)
		}
		types[p.Name] = p.Type
		if err := p.check(); err != nil {
			return nil, err
		}
	}
	return types, nil
}

func (p Provider) check() error {
	if p.NoAPIKey && p.APIKeyEnv != "" {
		return fmt.Errorf("config: provider %q: no_api_key and api_key_env exclude each other: remove one", p.Name)
	}
	if p.MaxConcurrency < 0 || p.RequestsPerMinute < 0 || p.RequestsPerMinute > 600_000 {
		return fmt.Errorf("config: provider %q: max_concurrency and requests_per_minute are 0 (no bound) or positive "+
			"(requests_per_minute at most 600000)", p.Name)
	}
	switch p.Type {
	case TypeOpenAI, TypeOpenAIChat, TypeAnthropic:
	case TypeGoogle:
		if u := strings.TrimRight(p.BaseURL, "/"); strings.HasSuffix(u, "/v1beta") || strings.HasSuffix(u, "/v1") {
			return fmt.Errorf("config: provider %q: base_url for type %s is the address without the API version (genai adds /v1beta)", p.Name, p.Type)
		}
	case TypeOpenAICompatible:
		if p.BaseURL == "" {
			return fmt.Errorf("config: provider %q: base_url is required for type %s", p.Name, p.Type)
		}
	default:
		return fmt.Errorf("config: provider %q: unknown type %q (openai, openai-chat, anthropic, openai-compatible, google)", p.Name, p.Type)
	}
	return nil
}

// checkModels checks each model against the providers' types and returns
// the set of model ids.
func (c *Config) checkModels(types map[string]string) (map[string]bool, error) {
	models := map[string]bool{}
	for i, m := range c.Models {
		if !nameRE.MatchString(m.ID) {
			return nil, fmt.Errorf("config: models[%d].id %q is not a valid id", i, m.ID)
		}
		if models[m.ID] {
			return nil, fmt.Errorf("config: model %q is defined twice", m.ID)
		}
		models[m.ID] = true
		typ, known := types[m.Provider]
		if !known {
			return nil, fmt.Errorf("config: model %q: unknown provider %q", m.ID, m.Provider)
		}
		if m.Model == "" {
			return nil, fmt.Errorf("config: model %q: model (the provider's model name) is required", m.ID)
		}
		if err := m.checkOptions(typ); err != nil {
			return nil, fmt.Errorf("config: model %q: %w", m.ID, err)
		}
		if m.StrictTools != nil && *m.StrictTools && c.Workspace != "" {
			// OpenAI's strict mode requires every property to be required;
			// read_file and list_files have optional ones, so every call with
			// the workspace tools would be refused by the API.
			return nil, fmt.Errorf("config: model %q: strict_tools cannot be used with a workspace: "+
				"the read_file and list_files tools have optional properties, which strict mode refuses", m.ID)
		}
	}
	return models, nil
}

func (c *Config) checkSpawnAgent() error {
	sp := c.SpawnAgent
	if sp == nil {
		return nil
	}
	if sp.MaxDepth < 0 || sp.MaxDepth > 16 || sp.MaxChildrenPerTurn < 0 || sp.MaxChildrenPerTurn > 128 ||
		sp.MaxChildrenPerChat < 0 || sp.MaxChildrenPerChat > 1024 {
		return fmt.Errorf("config: spawn_agent: max_depth is at most 16, max_children_per_turn at most 128, " +
			"max_children_per_chat at most 1024, none negative")
	}
	for _, m := range c.Models {
		if m.StrictTools != nil && *m.StrictTools {
			return fmt.Errorf("config: model %q: strict_tools cannot be used with spawn_agent, whose optional properties strict mode refuses", m.ID)
		}
	}
	return nil
}

// checkOptions checks the per-model provider options against the provider
// type: an option the type's encoder cannot send is an error, not ignored.
func (m Model) checkOptions(typ string) error {
	if m.ContextWindow < 0 || m.MaxOutputTokens < 0 {
		return fmt.Errorf("context_window and max_output_tokens must not be negative")
	}
	if m.ReasoningEffort != "" {
		switch typ {
		case TypeAnthropic:
			return fmt.Errorf("reasoning_effort is for OpenAI types; use thinking_budget_tokens for anthropic")
		case TypeGoogle:
			return fmt.Errorf("reasoning_effort is for OpenAI types; use thinking_level or thinking_budget for google")
		}
		if !slices.Contains(reasoningEfforts, m.ReasoningEffort) {
			return fmt.Errorf("reasoning_effort %q is not one of %s", m.ReasoningEffort, strings.Join(reasoningEfforts, ", "))
		}
	}
	if m.ReasoningSummary != "" {
		if typ != TypeOpenAI {
			return fmt.Errorf("reasoning_summary is only available on type %s (the Responses API)", TypeOpenAI)
		}
		if !slices.Contains(reasoningSummaries, m.ReasoningSummary) {
			return fmt.Errorf("reasoning_summary %q is not one of %s", m.ReasoningSummary, strings.Join(reasoningSummaries, ", "))
		}
	}
	if m.ThinkingBudgetTokens != 0 {
		if typ != TypeAnthropic {
			return fmt.Errorf("thinking_budget_tokens is only available on type %s", TypeAnthropic)
		}
		if m.ThinkingBudgetTokens < MinThinkingBudget {
			return fmt.Errorf("thinking_budget_tokens must be at least %d", MinThinkingBudget)
		}
		if m.MaxOutputTokens <= m.ThinkingBudgetTokens {
			return fmt.Errorf("max_output_tokens must be set above thinking_budget_tokens (Anthropic counts thinking in max_tokens)")
		}
	}
	if err := m.checkGemini(typ); err != nil {
		return err
	}
	if m.StrictTools != nil && typ != TypeOpenAI {
		switch typ {
		case TypeAnthropic:
			return fmt.Errorf("strict_tools: Anthropic tools have no strict flag")
		case TypeGoogle:
			return fmt.Errorf("strict_tools: Gemini function declarations have no strict flag")
		default:
			return fmt.Errorf("strict_tools: the Chat Completions encoder always sends strict:false; only type %s has the switch", TypeOpenAI)
		}
	}
	return nil
}

// checkGemini checks the thinking options of type google.
func (m Model) checkGemini(typ string) error {
	if n := strings.ToLower(m.Model); typ == TypeGoogle && (strings.Contains(n, "claude") || strings.Contains(n, "anthropic")) {
		// fantasy's Google provider sends such names to Anthropic on
		// Vertex AI, which chatd does not configure.
		return fmt.Errorf("a model name containing claude or anthropic is sent to Anthropic on Vertex AI by fantasy's Google provider; use type anthropic")
	}
	if m.ThinkingBudget == nil && m.ThinkingLevel == "" && m.IncludeThoughts == nil {
		return nil
	}
	if typ != TypeGoogle {
		return fmt.Errorf("thinking_budget, thinking_level and include_thoughts are only available on type %s", TypeGoogle)
	}
	if m.ThinkingBudget != nil && m.ThinkingLevel != "" {
		return fmt.Errorf("thinking_budget and thinking_level are mutually exclusive")
	}
	if m.ThinkingBudget != nil && *m.ThinkingBudget < MinGeminiThinkingBudget {
		// fantasy would silently send 128 instead (0 and -1, "off" and
		// "dynamic", included): say so rather than send another budget.
		return fmt.Errorf("thinking_budget must be at least %d (leave it out for the model's default)", MinGeminiThinkingBudget)
	}
	if m.ThinkingLevel != "" && !slices.Contains(thinkingLevels, m.ThinkingLevel) {
		return fmt.Errorf("thinking_level %q is not one of %s", m.ThinkingLevel, strings.Join(thinkingLevels, ", "))
	}
	return nil
}
