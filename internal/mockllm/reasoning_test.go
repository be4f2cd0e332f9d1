package mockllm

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestReasoningDetailsShapes: with reasoning_details the reasoning goes out
// as OpenRouter relays Anthropic thinking (delta.reasoning beside
// reasoning_details fragments, the signature alone last, before the tool
// call; message.reasoning and the whole entry without streaming), and a
// conversation that comes back must carry the entry with a valid signature.
func TestReasoningDetailsShapes(t *testing.T) {
	t.Parallel()
	const thought = "Look it up first."
	step := Step{Reasoning: thought, ReasoningDetails: true, ToolCalls: []ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{}`}}}
	_, hs := startServer(t, Options{Script: &Script{Steps: []Step{step, step, {Text: "done"}}, Then: ThenRepeat}})
	url := hs.URL + "/v1/chat/completions"

	_, body := post(t, url, chatBody(true, "go", toolJSON("lookup", `{"type":"object"}`)))
	var text, sig string
	sigAt, callAt := -1, -1
	for i, data := range sseEvents(t, body) {
		var c struct {
			Choices []struct {
				Delta struct {
					Reasoning        *string `json:"reasoning"`
					ReasoningContent *string `json:"reasoning_content"`
					Details          []struct {
						Type, Text, Signature, Format string
						Index                         *int
					} `json:"reasoning_details"`
					ToolCalls []any `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if data == "[DONE]" || json.Unmarshal([]byte(data), &c) != nil || len(c.Choices) == 0 {
			continue
		}
		d := c.Choices[0].Delta
		if d.ReasoningContent != nil {
			t.Errorf("reasoning_content beside reasoning_details: %s", data)
		}
		for _, e := range d.Details {
			if e.Type != "reasoning.text" || e.Format != "anthropic-claude-v1" || e.Index == nil || *e.Index != 0 {
				t.Errorf("detail %s", data)
			}
			text += e.Text
			if e.Signature != "" {
				sig, sigAt = e.Signature, i
			}
		}
		if len(d.ToolCalls) > 0 && callAt < 0 {
			callAt = i
		}
	}
	if text != thought || sig != SignThinking(thought) || sigAt < 0 || callAt < sigAt {
		t.Fatalf("text %q signature %q at %d, call at %d", text, sig, sigAt, callAt)
	}

	_, body = post(t, url, chatBody(false, "go", toolJSON("lookup", `{"type":"object"}`)))
	var resp struct {
		Choices []struct {
			Message struct {
				Reasoning string            `json:"reasoning"`
				Details   []json.RawMessage `json:"reasoning_details"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || len(resp.Choices) != 1 || resp.Choices[0].Message.Reasoning != thought ||
		len(resp.Choices[0].Message.Details) != 1 || !strings.Contains(string(resp.Choices[0].Message.Details[0]), SignThinking(thought)) {
		t.Fatalf("non-streaming answer %s", body)
	}

	back := func(assistant string) (int, string) {
		b := `{"model":"mock-1","messages":[{"role":"user","content":"go"},` + assistant +
			`,{"role":"tool","tool_call_id":"call_1","content":"x"}],"tools":[` + toolJSON("lookup", `{"type":"object"}`) + `]}`
		r, data := post(t, url, b)
		return r.StatusCode, string(data)
	}
	call := `"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{}"}}]`
	entry := func(sig string) string {
		return `[{"type":"reasoning.text","text":"` + thought + `","signature":"` + sig + `","format":"anthropic-claude-v1","index":0}]`
	}
	if code, data := back(`{"role":"assistant","reasoning_content":"` + thought + `",` + call + `,"reasoning_details":` + entry(SignThinking(thought)) + `}`); code != http.StatusOK {
		t.Errorf("signed replay refused: %d %s", code, data)
	}
	if code, data := back(`{"role":"assistant","reasoning_content":"` + thought + `",` + call + `,"reasoning_details":` + entry("forged") + `}`); code != http.StatusBadRequest ||
		!strings.Contains(data, "signature") {
		t.Errorf("forged signature: %d %s", code, data)
	}
	if code, data := back(`{"role":"assistant","reasoning_content":"` + thought + `",` + call + `}`); code != http.StatusBadRequest ||
		!strings.Contains(data, "reasoning_details") {
		t.Errorf("missing reasoning_details: %d %s", code, data)
	}
}

// TestResponsesEncryptedReasoning: asked for with include, the done item
// carries the encrypted reasoning (the added item only a placeholder); a
// reasoning item comes back only with an encrypted content the mock
// issued, followed by its item; its content is recorded on the assistant
// message it precedes.
func TestResponsesEncryptedReasoning(t *testing.T) {
	t.Parallel()
	const thought = "Check the file."
	s, hs := startServer(t, Options{Script: &Script{Steps: []Step{{Reasoning: thought, ToolCalls: []ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{}`}}}},
		Then: ThenRepeat}})
	url := hs.URL + "/v1/responses"
	tools := `"tools":[{"type":"function","name":"lookup","parameters":{"type":"object"}}]`
	_, body := post(t, url, `{"model":"gpt-5","stream":true,"include":["reasoning.encrypted_content"],"input":"go",`+tools+`}`)
	var added, done string
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type string `json:"type"`
			Item struct {
				Type             string `json:"type"`
				EncryptedContent string `json:"encrypted_content"`
			} `json:"item"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil || ev.Item.Type != "reasoning" {
			continue
		}
		switch ev.Type {
		case "response.output_item.added":
			added = ev.Item.EncryptedContent
		case "response.output_item.done":
			done = ev.Item.EncryptedContent
		}
	}
	if done != EncryptReasoning(thought) || added == "" || added == done {
		t.Fatalf("added %q done %q", added, done)
	}
	if text, ok := decryptReasoning(added); !ok || text != "" {
		t.Errorf("the placeholder decrypts to %q %v", text, ok)
	}

	fc := `{"type":"function_call","call_id":"call_1","name":"lookup","arguments":"{}"}`
	out := `{"type":"function_call_output","call_id":"call_1","output":"x"}`
	replay := func(items ...string) (int, string) {
		r, data := post(t, url, `{"model":"gpt-5","input":[{"role":"user","content":"go"},`+strings.Join(items, ",")+`],`+tools+`}`)
		return r.StatusCode, string(data)
	}
	item := func(ec string) string {
		return `{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"` + ec + `"}`
	}
	if code, data := replay(item(done), fc, out); code != http.StatusOK {
		t.Fatalf("valid replay refused: %d %s", code, data)
	}
	reqs := s.Requests()
	if m := reqs[len(reqs)-1].Messages[1]; m.Role != "assistant" || m.Reasoning != thought || m.Signature != done || len(m.ToolCalls) != 1 {
		t.Errorf("recorded %+v", m)
	}
	for _, c := range []struct{ items []string }{
		{[]string{`{"type":"reasoning","id":"rs_1","summary":[]}`, fc, out}},
		{[]string{item("mockllm-encrypted:Zm9yZ2Vk.bad"), fc, out}},
		{[]string{fc, out, item(done)}},
	} {
		if code, data := replay(c.items...); code != http.StatusBadRequest {
			t.Errorf("%v: %d %s", c.items, code, data)
		}
	}
}
