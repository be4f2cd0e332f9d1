package config

import (
	"os"
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
		{TypeGoogle, `{"id":"m","provider":"p","model":"gemini-3-pro-preview","thinking_level":"high","include_thoughts":true}`, ""},
		{TypeGoogle, `{"id":"m","provider":"p","model":"gemini-2.5-flash","thinking_budget":1024,"include_thoughts":false}`, ""},
		{TypeGoogle, `{"id":"m","provider":"p","model":"g","thinking_budget":1024,"thinking_level":"low"}`, "mutually exclusive"},
		{TypeGoogle, `{"id":"m","provider":"p","model":"g","thinking_budget":0}`, "at least 128"},
		{TypeGoogle, `{"id":"m","provider":"p","model":"g","thinking_budget":-1}`, "at least 128"},
		{TypeGoogle, `{"id":"m","provider":"p","model":"g","thinking_level":"HIGH"}`, "thinking_level"},
		{TypeGoogle, `{"id":"m","provider":"p","model":"g","reasoning_effort":"high"}`, "thinking_level or thinking_budget for google"},
		{TypeGoogle, `{"id":"m","provider":"p","model":"g","thinking_budget_tokens":2048,"max_output_tokens":8192}`, "only available on type anthropic"},
		{TypeGoogle, `{"id":"m","provider":"p","model":"g","strict_tools":false}`, "no strict flag"},
		{TypeGoogle, `{"id":"m","provider":"p","model":"claude-sonnet-4@20250514"}`, "use type anthropic"},
		{TypeAnthropic, `{"id":"m","provider":"p","model":"claude","include_thoughts":true}`, "only available on type google"},
		{TypeOpenAI, `{"id":"m","provider":"p","model":"gpt","thinking_level":"low"}`, "only available on type google"},
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
	if err != nil || len(c.Models) != 3 || c.Models[1].ThinkingBudgetTokens == 0 || c.Providers[2].Type != TypeGoogle {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestGoogleBaseURL(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"":                              "",
		"http://127.0.0.1:9999":         "",
		"https://proxy.example/gemini/": "",
		"https://generativelanguage.googleapis.com/v1beta": "without the API version",
		"http://127.0.0.1:9999/v1/":                        "without the API version",
	} {
		_, err := Parse([]byte(`{"providers":[{"name":"g","type":"google","base_url":"` + url + `"}],"models":[{"id":"m","provider":"g","model":"gemini-2.5-flash"}]}`))
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", url, err, want)
		}
	}
}

// TestReadmeConfig: the README's config example parses.
func TestReadmeConfig(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "The config file (`--config`):\n\n```json\n")
	doc, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("no config example in the README")
	}
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{}
	for _, p := range c.Providers {
		types[p.Type] = true
	}
	if !types[TypeGoogle] || !types[TypeAnthropic] || !types[TypeOpenAI] {
		t.Errorf("provider types %v", types)
	}
}

// mcp_servers are checked with the file: names, transports, models, and
// unknown fields (a typo in an operator's config is an error, not ignored).
func TestMCPServers(t *testing.T) {
	t.Parallel()
	doc := func(servers string) string {
		return `{"providers":[{"name":"p","type":"openai"}],"models":[{"id":"m","provider":"p","model":"gpt"}],"mcp_servers":[` + servers + `]}`
	}
	for _, tc := range []struct{ servers, err string }{
		{`{"name":"fs","transport":"stdio","command":"node","args":["server.js","/srv"],"env":{"TOKEN":"FS_TOKEN"},"allow":["read_file"],"timeout":"10s","models":["m"],"idempotent":true}`, ""},
		{`{"name":"remote","transport":"http","url":"https://mcp.example.com/mcp","headers":{"Authorization":"MCP_AUTH"},"chats":"all"}`, ""},
		{`{"name":"a_b","transport":"stdio","command":"x"}`, "name"},
		{`{"name":"x","transport":"stdio","command":"x"},{"name":"x","transport":"stdio","command":"y"}`, "defined twice"},
		{`{"name":"x","transport":"ws","url":"ws://h"}`, "not stdio or http"},
		{`{"name":"x","transport":"stdio","command":"x","models":["nope"]}`, "not a configured model"},
		{`{"name":"x","transport":"stdio","command":"x","env":{"A":"$(id)"}}`, "environment variable names"},
		{`{"name":"x","transport":"http","url":"https://u:p@h/mcp"}`, "credentials"},
		{`{"name":"x","transport":"stdio","command":"x","timeout":"1h"}`, "timeout"},
		{`{"name":"x","transport":"stdio","command":"x","shell":"sh -c"}`, "unknown field"},
	} {
		_, err := Parse([]byte(doc(tc.servers)))
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want %q", tc.servers, err, tc.err)
		}
	}
}
