package config

import (
	"strings"
	"testing"
)

func TestModelOptions(t *testing.T) {
	t.Parallel()
	doc := func(typ, model string) string {
		return `{"providers":[{"name":"p","type":"` + typ + `","base_url":"http://x"}],"models":[` + model + `]}`
	}
	for _, tc := range []struct {
		typ, model, err string
	}{
		{TypeOpenAI, `{"id":"m","provider":"p","model":"gpt-5","reasoning_effort":"high","reasoning_summary":"auto","strict_tools":true}`, ""},
		{TypeOpenAIChat, `{"id":"m","provider":"p","model":"o4-mini","reasoning_effort":"low"}`, ""},
		{TypeOpenAICompatible, `{"id":"m","provider":"p","model":"m","reasoning_effort":"medium"}`, ""},
		{TypeAnthropic, `{"id":"m","provider":"p","model":"claude","thinking_budget_tokens":2048,"max_output_tokens":8192}`, ""},
		{TypeOpenAI, `{"id":"m","provider":"p","model":"gpt-5","reasoning_effort":"extreme"}`, "reasoning_effort"},
		{TypeOpenAIChat, `{"id":"m","provider":"p","model":"gpt","reasoning_summary":"auto"}`, "reasoning_summary is only available"},
		{TypeOpenAI, `{"id":"m","provider":"p","model":"gpt","reasoning_summary":"long"}`, "reasoning_summary"},
		{TypeAnthropic, `{"id":"m","provider":"p","model":"claude","reasoning_effort":"high"}`, "thinking_budget_tokens for anthropic"},
		{TypeOpenAI, `{"id":"m","provider":"p","model":"gpt","thinking_budget_tokens":2048}`, "only available on type anthropic"},
		{TypeAnthropic, `{"id":"m","provider":"p","model":"claude","thinking_budget_tokens":512,"max_output_tokens":8192}`, "at least 1024"},
		{TypeAnthropic, `{"id":"m","provider":"p","model":"claude","thinking_budget_tokens":4096}`, "max_output_tokens must be set above"},
		{TypeAnthropic, `{"id":"m","provider":"p","model":"claude","strict_tools":false}`, "no strict flag"},
		{TypeOpenAIChat, `{"id":"m","provider":"p","model":"gpt","strict_tools":true}`, "always sends strict:false"},
		{TypeOpenAICompatible, `{"id":"m","provider":"p","model":"m","strict_tools":true}`, "always sends strict:false"},
		{TypeOpenAI, `{"id":"m","provider":"p","model":"gpt","max_output_tokens":-1}`, "negative"},
	} {
		_, err := Parse([]byte(doc(tc.typ, tc.model)))
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s %s: %v, want %q", tc.typ, tc.model, err, tc.err)
		}
	}
}

func TestStrictToolsWithoutWorkspace(t *testing.T) {
	t.Parallel()
	doc := `{"workspace":"/tmp","providers":[{"name":"p","type":"openai"}],"models":[{"id":"m","provider":"p","model":"gpt-5","strict_tools":true}]}`
	if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), "workspace") {
		t.Errorf("strict_tools with a workspace: %v", err)
	}
	if _, err := Parse([]byte(strings.Replace(doc, `"workspace":"/tmp",`, "", 1))); err != nil {
		t.Errorf("strict_tools alone: %v", err)
	}
}

// TestExampleConfig: the shipped example parses.
func TestExampleConfig(t *testing.T) {
	t.Parallel()
	c, err := Load("../../examples/chatd.json")
	if err != nil || len(c.Models) != 2 || c.Models[1].ThinkingBudgetTokens == 0 {
		t.Fatalf("%+v %v", c, err)
	}
}
