package provider

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"charm.land/fantasy"
	"charm.land/fantasy/providers/openai"
	openaisdk "github.com/openai/openai-go/v3"
)

func TestEncryptedReasoningModels(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		model, effort, summary string
		want                   bool
	}{
		{"gpt-5", "", "", true},
		{"gpt-5-mini-2025-08-07", "", "", true},
		{"gpt-5-chat-latest", "", "", false},
		{"o3", "", "", true},
		{"o4-mini", "", "", true},
		{"azure-o3-deploy", "", "", true},
		{"codex-mini-latest", "", "", true},
		{"gpt-4o", "", "", false},
		{"gpt-4.1", "", "", false},
		{"my-deployment", "", "", false},
		{"my-deployment", "high", "", true},
		{"my-deployment", "", "auto", true},
	} {
		if got := encryptedReasoning(c.model, c.effort, c.summary); got != c.want {
			t.Errorf("%s effort %q summary %q: %v, want %v", c.model, c.effort, c.summary, got, c.want)
		}
	}
	r := registry(t, fourTypes, nil)
	for id, want := range map[string]bool{"strict": true, "lenient": true} {
		m, err := r.Model(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := m.Options[openai.Name].(*openai.ResponsesProviderOptions)
		if got := o != nil && slices.Equal(o.Include, []openai.IncludeType{openai.IncludeReasoningEncryptedContent}); got != want {
			t.Errorf("%s: include %+v", id, o)
		}
	}
}

func reasoningPart(id, ec string, summary ...string) fantasy.ReasoningPart {
	md := &openai.ResponsesReasoningMetadata{ItemID: id, Summary: summary}
	if ec != "" {
		md.EncryptedContent = &ec
	}
	return fantasy.ReasoningPart{Text: strings.Join(summary, "\n"), ProviderOptions: fantasy.ProviderOptions{openai.Name: md}}
}

// TestReplayRewrite: reasoning items go right before the item that
// followed them in their assistant message; the rest of the body is kept
// byte for byte; a body that does not match the prompt is refused (and
// then sent as fantasy encoded it).
func TestReplayRewrite(t *testing.T) {
	t.Parallel()
	prompt := fantasy.Prompt{
		{Role: fantasy.MessageRoleUser, Content: []fantasy.MessagePart{fantasy.TextPart{Text: "hi"}}},
		{Role: fantasy.MessageRoleAssistant, Content: []fantasy.MessagePart{
			reasoningPart("rs_1", "enc1", "first"),
			fantasy.ToolCallPart{ToolCallID: "call_1", ToolName: "read", Input: `{}`},
		}},
		{Role: fantasy.MessageRoleTool, Content: []fantasy.MessagePart{fantasy.ToolResultPart{ToolCallID: "call_1",
			Output: fantasy.ToolResultOutputContentText{Text: "x"}}}},
		{Role: fantasy.MessageRoleAssistant, Content: []fantasy.MessagePart{
			reasoningPart("rs_2", "", "no encrypted content: not sent"),
			fantasy.TextPart{Text: "Let me look."},
			reasoningPart("rs_3", "enc3"),
			fantasy.ToolCallPart{ToolCallID: "call_2", ToolName: "read", Input: `{}`},
			reasoningPart("rs_4", "enc4", "trailing: not sent"),
		}},
	}
	rp := newReplay(prompt)
	input := `[{"content":[{"text":"hi","type":"input_text"}],"role":"user"},` +
		`{"arguments":"{}","call_id":"call_1","name":"read","type":"function_call"},` +
		`{"call_id":"call_1","output":"x","type":"function_call_output"},` +
		`{"content":"Let me look.","role":"assistant"},` +
		`{"arguments":"{}","call_id":"call_2","name":"read","type":"function_call"}]`
	body := `{"store":false,"input" : ` + input + `,"model":"gpt-5"}`
	got, err := rp.rewrite([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"store":false,"input" : [{"content":[{"text":"hi","type":"input_text"}],"role":"user"},` +
		`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"first"}],"encrypted_content":"enc1"},` +
		`{"arguments":"{}","call_id":"call_1","name":"read","type":"function_call"},` +
		`{"call_id":"call_1","output":"x","type":"function_call_output"},` +
		`{"content":"Let me look.","role":"assistant"},` +
		`{"type":"reasoning","id":"rs_3","summary":[],"encrypted_content":"enc3"},` +
		`{"arguments":"{}","call_id":"call_2","name":"read","type":"function_call"}],"model":"gpt-5"}`
	if string(got) != want {
		t.Fatalf("rewritten\n%s\nwant\n%s", got, want)
	}

	// The input does not match the prompt: another call id, a missing item.
	for _, bad := range []string{
		strings.Replace(body, `"call_id":"call_2","name"`, `"call_id":"call_9","name"`, 1),
		strings.Replace(body, `{"content":"Let me look.","role":"assistant"},`, ``, 1),
		`{"store":false}`,
		`[]`,
	} {
		if _, err := rp.rewrite([]byte(bad)); err == nil {
			t.Errorf("rewrote a body that does not match the prompt: %s", bad)
		}
	}
	// No reasoning to send: the body is left alone.
	if got, err := newReplay(prompt[:1]).rewrite([]byte(`not even JSON`)); err != nil || string(got) != `not even JSON` {
		t.Errorf("%s %v", got, err)
	}
}

// TestDetailsMerge: fragments of one entry (same index and type) are
// concatenated; the signature seals it; other entries stay apart, in order.
func TestDetailsMerge(t *testing.T) {
	t.Parallel()
	frag := func(s string) []map[string]json.RawMessage { return parseDetails(`{"reasoning_details":` + s + `}`) }
	var a detailsAcc
	if a.add(frag(`[{"type":"reasoning.text","text":"Hel","signature":"","format":"anthropic-claude-v1","index":0}]`)) {
		t.Error("sealed without a signature")
	}
	a.add(frag(`[{"type":"reasoning.text","text":"lo","signature":"","format":"anthropic-claude-v1","index":0}]`))
	if !a.add(frag(`[{"type":"reasoning.text","signature":"SIG","format":"anthropic-claude-v1","index":0}]`)) {
		t.Error("the signature did not seal the entry")
	}
	a.add(frag(`[{"type":"reasoning.encrypted","data":"REDACTED","format":"anthropic-claude-v1","index":1}]`))
	d := a.metadata()[reasoningDetailsKey].(*ReasoningDetails)
	got, _ := json.Marshal(d.Details)
	want := `[{"format":"anthropic-claude-v1","index":0,"signature":"SIG","text":"Hello","type":"reasoning.text"},` +
		`{"data":"REDACTED","format":"anthropic-claude-v1","index":1,"type":"reasoning.encrypted"}]`
	if string(got) != want {
		t.Errorf("merged %s\nwant %s", got, want)
	}
	// Stored and read back as fantasy provider options, as the runner does.
	raw, err := json.Marshal(a.metadata())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	opts, err := fantasy.UnmarshalProviderOptions(m)
	if err != nil {
		t.Fatal(err)
	}
	if back, ok := opts[reasoningDetailsKey].(*ReasoningDetails); !ok || len(back.Details) != 2 {
		t.Errorf("read back %+v", opts)
	}
}

// TestCompatStreamSignatureAfterToolCall: a signature that arrives after
// the tool call started (fantasy notes Anthropic does so through
// OpenRouter) still lands on the step's one reasoning part, and the
// trailing "reasoning": null does not open another.
func TestCompatStreamSignatureAfterToolCall(t *testing.T) {
	t.Parallel()
	chunks := []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","reasoning":"Think","reasoning_details":[{"type":"reasoning.text","text":"Think","format":"anthropic-claude-v1","index":0}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"toolu_1","type":"function","function":{"name":"read","arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.text","signature":"SIG","format":"anthropic-claude-v1","index":0}]}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning":null},"finish_reason":"tool_calls"}]}`,
	}
	var parts []fantasy.StreamPart
	ctx := map[string]any{}
	for _, c := range chunks {
		var chunk openaisdk.ChatCompletionChunk
		if err := json.Unmarshal([]byte(c), &chunk); err != nil {
			t.Fatal(err)
		}
		var ok bool
		ctx, ok = compatStreamExtra(chunk, func(p fantasy.StreamPart) bool { parts = append(parts, p); return true }, ctx)
		if !ok {
			t.Fatal("stopped")
		}
	}
	starts, text := 0, ""
	var last fantasy.ProviderMetadata
	for _, p := range parts {
		switch p.Type {
		case fantasy.StreamPartTypeReasoningStart:
			starts++
		case fantasy.StreamPartTypeReasoningEnd:
			t.Errorf("reasoning ended before its signature: %+v", p)
		case fantasy.StreamPartTypeReasoningDelta:
			text += p.Delta
		}
		if p.ProviderMetadata != nil {
			last = p.ProviderMetadata
		}
	}
	if starts != 1 || text != "Think" {
		t.Fatalf("%d reasoning starts, text %q: %+v", starts, text, parts)
	}
	d, ok := last[reasoningDetailsKey].(*ReasoningDetails)
	if !ok || len(d.Details) != 1 || !strings.Contains(string(d.Details[0]), `"signature":"SIG"`) || !strings.Contains(string(d.Details[0]), `"text":"Think"`) {
		t.Fatalf("metadata %+v", last)
	}
}

// TestCompatExtraContent: a non-streamed message's reasoning_details
// become the metadata of its reasoning content.
func TestCompatExtraContent(t *testing.T) {
	t.Parallel()
	var choice openaisdk.ChatCompletionChoice
	if err := json.Unmarshal([]byte(`{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"",`+
		`"reasoning":"Think","reasoning_details":[{"type":"reasoning.text","text":"Think","signature":"SIG","format":"anthropic-claude-v1","index":0}]}}`), &choice); err != nil {
		t.Fatal(err)
	}
	content := compatExtraContent(choice)
	if len(content) != 1 {
		t.Fatalf("content %+v", content)
	}
	r, ok := content[0].(fantasy.ReasoningContent)
	d, _ := r.ProviderMetadata[reasoningDetailsKey].(*ReasoningDetails)
	if !ok || r.Text != "Think" || d == nil || len(d.Details) != 1 || !strings.Contains(string(d.Details[0]), `"signature":"SIG"`) {
		t.Fatalf("reasoning %+v", content[0])
	}
}
