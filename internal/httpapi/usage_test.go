package httpapi_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

func tokens(v int64) *int64 { return &v }

func usageText(u *client.Usage) string {
	if u == nil {
		return "absent"
	}
	b, _ := json.Marshal(u)
	return string(b)
}

// TestTokenUsage plays a structured turn with a tool step and a repair on
// every provider type, each over its own wire format from mockllm with
// scripted figures: each step's message carries what its provider
// reported (null for what it did not: a figure the script left out, or
// one the format has no field for), the receipt sums the three steps the
// request governed, the lookup returns the receipt's sum, the stream's
// message events carry the same, and the metric counts the same totals.
func TestTokenUsage(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{config.TypeOpenAICompatible, config.TypeOpenAIChat, config.TypeOpenAI, config.TypeAnthropic} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			tokenUsage(t, typ)
		})
	}
}

func tokenUsage(t *testing.T, typ string) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("make test"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Every figure scripted except the repair's reasoning tokens.
	scripted := []mockllm.Usage{
		{InputTokens: tokens(100), OutputTokens: tokens(10), CacheReadTokens: tokens(50), CacheWriteTokens: tokens(7), ReasoningTokens: tokens(4)},
		{InputTokens: tokens(120), OutputTokens: tokens(12), CacheReadTokens: tokens(60), CacheWriteTokens: tokens(8)},
		{InputTokens: tokens(140), OutputTokens: tokens(14), CacheReadTokens: tokens(70), CacheWriteTokens: tokens(9), ReasoningTokens: tokens(6)},
	}
	script := &mockllm.Script{Steps: []mockllm.Step{
		{ToolCalls: []mockllm.ToolCall{{Name: "read_file", Arguments: `{"path":"notes.txt"}`}}, Usage: &scripted[0]},
		{Value: json.RawMessage(`{"command":5}`), Usage: &scripted[1]}, // invalid: a repair follows
		{Value: json.RawMessage(`{"command":"make test"}`), Usage: &scripted[2]},
	}}
	env := testenv.New(t, testenv.Options{Provider: typ, Workspace: dir, Mock: mockllm.Options{Script: script}})
	// What each format can carry: OpenAI has no cache writes, Anthropic no
	// reasoning figure.
	want := func(u mockllm.Usage) client.Usage {
		c := client.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
			CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens}
		if typ == config.TypeAnthropic {
			c.ReasoningTokens = nil
		} else {
			c.CacheWriteTokens = nil
		}
		return c
	}
	var sum client.Usage
	add := func(dst **int64, v *int64) {
		if v != nil {
			*dst = tokens(*v + func() int64 {
				if *dst == nil {
					return 0
				}
				return **dst
			}())
		}
	}
	for _, u := range scripted {
		w := want(u)
		add(&sum.InputTokens, w.InputTokens)
		add(&sum.OutputTokens, w.OutputTokens)
		add(&sum.CacheReadTokens, w.CacheReadTokens)
		add(&sum.CacheWriteTokens, w.CacheWriteTokens)
		add(&sum.ReasoningTokens, w.ReasoningTokens)
	}

	ctx := t.Context()
	c := env.Client("alice")
	created, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("report"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	req := *created.Messages[0].StructuredOutputRequestID
	s := collect(t, c.Stream(ctx, created.Chat.ID, 0))
	res, err := c.WaitStructuredOutput(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v", res)
	}
	if usageText(res.Usage) != usageText(&sum) {
		t.Errorf("lookup usage %s, want the sum of the steps %s", usageText(res.Usage), usageText(&sum))
	}

	// The history: three steps with their own figures, nothing on the
	// user, tool and receipt messages; the receipt holds the sum.
	hist, err := c.ListMessages(ctx, created.Chat.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var steps []*client.Usage
	var receipt *client.StructuredOutput
	for _, m := range hist.Messages {
		switch {
		case m.StructuredOutput != nil:
			receipt = m.StructuredOutput
			if m.Usage != nil {
				t.Errorf("the receipt message has step usage %s", usageText(m.Usage))
			}
		case m.Role == client.RoleAssistant:
			steps = append(steps, m.Usage)
		case m.Usage != nil:
			t.Errorf("%s message %d has usage %s", m.Role, m.ID, usageText(m.Usage))
		}
	}
	if len(steps) != len(scripted) {
		t.Fatalf("%d assistant steps, want %d", len(steps), len(scripted))
	}
	for i, u := range steps {
		if w := want(scripted[i]); usageText(u) != usageText(&w) {
			t.Errorf("step %d usage %s, want %s", i, usageText(u), usageText(&w))
		}
	}
	if steps[1].ReasoningTokens != nil {
		t.Errorf("the repair step's unreported reasoning is %d, want null", *steps[1].ReasoningTokens)
	}
	if receipt == nil || usageText(receipt.Usage) != usageText(res.Usage) {
		t.Fatalf("receipt %+v, lookup usage %s", receipt, usageText(res.Usage))
	}

	// The stream's message events carry the same.
	evs := s.until(t, "the receipt", isReceipt(req))
	var streamed []string
	for _, ev := range evs {
		if m := ev.Message; m != nil && m.Role == client.RoleAssistant {
			if m.StructuredOutput != nil {
				streamed = append(streamed, "receipt "+usageText(m.StructuredOutput.Usage))
			} else {
				streamed = append(streamed, usageText(m.Usage))
			}
		}
	}
	var rest []string
	for _, u := range steps {
		rest = append(rest, usageText(u))
	}
	rest = append(rest, "receipt "+usageText(receipt.Usage))
	if fmt.Sprint(streamed) != fmt.Sprint(rest) {
		t.Errorf("stream %v, history %v", streamed, rest)
	}

	// The metric: the same totals by kind; no series for a kind nothing
	// reported.
	m := scrape(t, env)
	for kind, v := range map[string]*int64{"input": sum.InputTokens, "output": sum.OutputTokens, "cache_read": sum.CacheReadTokens,
		"cache_write": sum.CacheWriteTokens, "reasoning": sum.ReasoningTokens} {
		got, ok := m.Get("chatd_provider_tokens_total", "model", "mock/model", "kind", kind)
		switch {
		case v == nil && ok:
			t.Errorf("chatd_provider_tokens_total{kind=%q} = %v, want no series", kind, got)
		case v != nil && (!ok || got != float64(*v)):
			t.Errorf("chatd_provider_tokens_total{kind=%q} = %v (present %v), want %d", kind, got, ok, *v)
		}
	}

	// The GenAI conventions' client metrics: three chat operations of the
	// mock model at its provider; input tokens are the whole prompt
	// (cached ones included), one observation per step.
	provider := map[string]string{config.TypeOpenAICompatible: "mock", config.TypeOpenAIChat: "openai", config.TypeOpenAI: "openai",
		config.TypeAnthropic: "anthropic"}[typ]
	op := []string{"gen_ai_operation_name", "chat", "gen_ai_provider_name", provider, "gen_ai_request_model", "mock-1"}
	wantValue(t, m, 3, "gen_ai_client_operation_duration_seconds", append(op, "error_type", "")...)
	prompt := *sum.InputTokens + *sum.CacheReadTokens
	if sum.CacheWriteTokens != nil {
		prompt += *sum.CacheWriteTokens
	}
	wantValue(t, m, 3, "gen_ai_client_token_usage_count", append(op, "gen_ai_token_type", "input")...)
	wantValue(t, m, float64(prompt), "gen_ai_client_token_usage_sum", append(op, "gen_ai_token_type", "input")...)
	wantValue(t, m, float64(*sum.OutputTokens), "gen_ai_client_token_usage_sum", append(op, "gen_ai_token_type", "output")...)
}
