package provider_test

// Wire qualification: the same structured scenarios through the real
// fantasy encoders of each provider type, against mockllm speaking that
// type's wire format (Chat Completions, Responses, Anthropic Messages,
// Gemini),
// with a whole chatd (testenv) on a real PostgreSQL database.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"charm.land/fantasy"
	"github.com/google/uuid"
	"github.com/xeipuuv/gojsonschema"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/provider"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// schema has an optional property and a fractional bound: not in OpenAI's
// strict subset, and it must reach every provider unchanged.
const schema = `{"type":"object","properties":{"command":{"type":"string","minLength":1},"timeout":{"type":"number","multipleOf":0.5},"tags":{"type":"array","items":{"type":"string"}}},"required":["command"],"additionalProperties":false}`

const fileContent = "The test command is: make test"

// wireType is one provider type under test.
type wireType struct {
	typ    string
	format string // mockllm wire format
	model  config.Model
}

var wireTypes = []wireType{
	{config.TypeOpenAI, mockllm.FormatResponses, config.Model{Model: "gpt-5", MaxOutputTokens: 4000, ReasoningEffort: "low", ReasoningSummary: "auto"}},
	{config.TypeOpenAIChat, mockllm.FormatOpenAI, config.Model{Model: "gpt-4o", MaxOutputTokens: 4000}},
	{config.TypeAnthropic, mockllm.FormatAnthropic, config.Model{Model: "claude-sonnet-4", MaxOutputTokens: 8000, ThinkingBudgetTokens: 2048}},
	{config.TypeOpenAICompatible, mockllm.FormatOpenAI, config.Model{Model: "qwen3", ReasoningEffort: "medium"}},
	{config.TypeGoogle, mockllm.FormatGemini, config.Model{Model: "gemini-3-pro-preview", MaxOutputTokens: 4000, ThinkingLevel: "high", IncludeThoughts: &yes}},
}

var yes = true

func value(command string) json.RawMessage {
	v, _ := json.Marshal(map[string]any{"command": command, "timeout": 2.5})
	return v
}

// scripts are the scenarios; each chat selects one with "[script:NAME]".
func scripts() map[string]*mockllm.Script {
	fin := func(v json.RawMessage) mockllm.Step { return mockllm.Step{Value: v} }
	return map[string]*mockllm.Script{
		"valid":   {Steps: []mockllm.Step{{Reasoning: "The schema wants a command."}}},
		"invalid": {Steps: []mockllm.Step{{Invalid: true}, fin(value("make test"))}},
		"tool": {Steps: []mockllm.Step{
			{Reasoning: "I should read the notes first.", ToolCalls: []mockllm.ToolCall{{Name: "read_file", Arguments: `{"path":"notes.txt"}`}}},
			{Reasoning: "Now I can answer.", Value: value(fileContent)},
		}},
		"details": {Steps: []mockllm.Step{
			{Reasoning: "The notes first, then the answer.", ReasoningDetails: true, ToolCalls: []mockllm.ToolCall{{Name: "read_file", Arguments: `{"path":"notes.txt"}`}}},
			{Reasoning: "Now I can answer.", ReasoningDetails: true, Value: value(fileContent)},
		}},
		"refusal":        {Steps: []mockllm.Step{{Refusal: "I can't help with that."}}},
		"content-filter": {Steps: []mockllm.Step{{TextOnly: true, Text: "Here is", FinishReason: "content_filter"}}},
		"length": {Steps: []mockllm.Step{
			{Value: value("from a cut answer"), FinishReason: "length"}, fin(value("whole")),
		}},
		"truncated": {Steps: []mockllm.Step{
			{Value: value("from a cut stream"), Truncate: true}, fin(value("whole")),
		}},
		"malformed": {Steps: []mockllm.Step{
			{ToolCalls: []mockllm.ToolCall{{Name: runner.FinalizerName, Arguments: `{"output":{"command":"x"`}}}, fin(value("whole")),
		}},
		"retry": {Steps: []mockllm.Step{
			{Error: &mockllm.ErrorSpec{Status: 429, RetryAfter: 1}}, {Error: &mockllm.ErrorSpec{Status: 503}}, fin(value("whole")),
		}},
		"exhausted": {Steps: []mockllm.Step{{Error: &mockllm.ErrorSpec{Status: 500, Message: "upstream exploded: {\"schema\":" + schema + "}"}}}, Then: mockllm.ThenRepeat},
		"denied":    {Steps: []mockllm.Step{{Error: &mockllm.ErrorSpec{Status: 401, Message: "invalid x-api-key " + apiKey}}}},
		"compact":   {Steps: []mockllm.Step{{Text: "First answer."}, {Text: "They said hello. [script:compact]"}, {Text: "Second answer."}}},
		"refs":      {Steps: []mockllm.Step{{}}}, // unscripted: a value generated from the schema on the wire
	}
}

// apiKey is recognisable: it must reach the provider and no log line.
var apiKey = "sk-chatd-test-" + strings.ReplaceAll(uuid.NewString(), "-", "")

// wireEnv is one chatd configured with one provider type.
type wireEnv struct {
	wt    wireType
	env   *testenv.Env
	c     *client.Client
	mu    sync.Mutex
	times map[string][]time.Time // request arrival per script
}

func newWireEnv(t *testing.T, wt wireType) *wireEnv {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(fileContent), 0o644); err != nil {
		t.Fatal(err)
	}
	w := &wireEnv{wt: wt, times: map[string][]time.Time{}}
	w.env = testenv.New(t, testenv.Options{
		Provider: wt.typ, Model: wt.model, APIKey: apiKey, Workspace: dir,
		Runner: runner.Options{MaxAttempts: 3},
		Mock: mockllm.Options{Formats: []string{wt.format}, Scripts: scripts(), BeforeRespond: func(_ context.Context, r *mockllm.Request) error {
			w.mu.Lock()
			w.times[r.Script] = append(w.times[r.Script], time.Now())
			w.mu.Unlock()
			return nil
		}},
	})
	w.c = w.env.Client("alice")
	return w
}

// requests are the provider requests of one scenario.
func (w *wireEnv) requests(script string) []mockllm.Request {
	var out []mockllm.Request
	for _, r := range w.env.Mock.Requests() {
		if r.Script == script {
			out = append(out, r)
		}
	}
	return out
}

// structured starts a structured chat playing script and waits for its
// outcome.
func (w *wireEnv) structured(t *testing.T, script string) (uuid.UUID, uuid.UUID, client.StructuredOutputResult) {
	t.Helper()
	res, err := w.c.CreateChat(t.Context(), client.CreateChatRequest{
		Content: []client.MessagePart{client.TextPart("Report the project's test command. [script:" + script + "]")},
		ResponseFormat: &client.ResponseFormat{Type: "json_schema",
			JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(schema)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := *res.Messages[0].StructuredOutputRequestID
	out, err := w.c.WaitStructuredOutput(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res.Chat.ID, req, out
}

func (w *wireEnv) ledger(t *testing.T, req uuid.UUID) (rejections, steps int) {
	t.Helper()
	if err := w.env.Pool.QueryRow(t.Context(), `SELECT rejections, steps FROM structured_requests WHERE request_id = $1`, req).
		Scan(&rejections, &steps); err != nil {
		t.Fatal(err)
	}
	return
}

func (w *wireEnv) history(t *testing.T, chat uuid.UUID) []client.ChatMessage {
	t.Helper()
	h, err := w.c.ListMessages(t.Context(), chat, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return h.Messages
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func succeeded(t *testing.T, res client.StructuredOutputResult, want json.RawMessage) {
	t.Helper()
	if res.Status != client.OutputSucceeded {
		t.Fatalf("status %s error %+v", res.Status, res.Error)
	}
	if want != nil && !jsonEqual(res.Value, want) {
		t.Fatalf("value %s, want %s", res.Value, want)
	}
	v, err := gojsonschema.Validate(gojsonschema.NewStringLoader(schema), gojsonschema.NewBytesLoader(res.Value))
	if err != nil || !v.Valid() {
		t.Fatalf("value %s does not validate: %v %v", res.Value, err, v)
	}
}

func failed(t *testing.T, res client.StructuredOutputResult, code client.ErrorCode) {
	t.Helper()
	if res.Status != client.OutputFailed || res.Error == nil || res.Error.Code != code {
		t.Fatalf("result %+v, want failed %s", res, code)
	}
}

// wantTools checks the tools on the wire: the finalizer with the caller's
// schema inside its wrapper, and the workspace tools, exactly as each
// encoder sends them. Anthropic's encoder keeps only properties and
// required of a root schema (the wrapper's additionalProperties:false
// does not reach Anthropic; chatd validates the value itself); the OpenAI
// encoders send every tool with strict:false; Gemini gets every schema as
// parametersJsonSchema (fantasy's parameters would be its OpenAPI subset).
func (w *wireEnv) wantTools(t *testing.T, r mockllm.Request) {
	t.Helper()
	anthropic := w.wt.typ == config.TypeAnthropic
	root := func(props, required string) string {
		s := `{"type":"object","properties":` + props
		if required != "" {
			s += `,"required":` + required
		} else if anthropic {
			s += `,"required":[]`
		}
		if !anthropic {
			s += `,"additionalProperties":false`
		}
		return s + "}"
	}
	want := map[string]string{
		runner.FinalizerName: root(`{"output":`+schema+`}`, `["output"]`),
		"read_file":          root(`{"path":{"type":"string","description":"file path relative to the workspace root"},"offset":{"type":"integer","minimum":0,"description":"byte offset to start from"}}`, `["path"]`),
		"list_files":         root(`{"path":{"type":"string","description":"directory relative to the workspace root"}}`, ""),
	}
	if len(r.Tools) != len(want) {
		t.Fatalf("%d tools on the wire: %+v", len(r.Tools), r.Tools)
	}
	for _, tool := range r.Tools {
		if !jsonEqual(tool.Parameters, []byte(want[tool.Name])) {
			t.Errorf("tool %s sent as %s, want %s", tool.Name, tool.Parameters, want[tool.Name])
		}
		noStrict := anthropic || w.wt.typ == config.TypeGoogle
		switch {
		case noStrict && tool.Strict != nil:
			t.Errorf("%s tool %s has a strict flag", w.wt.typ, tool.Name)
		case !noStrict && (tool.Strict == nil || *tool.Strict):
			t.Errorf("tool %s strict %v, want false", tool.Name, tool.Strict)
		}
	}
	if w.wt.typ == config.TypeGoogle && (strings.Contains(string(r.Body), `"parameters"`) || !strings.Contains(string(r.Body), `"parametersJsonSchema"`)) {
		t.Errorf("gemini declarations %s", r.Body)
	}
	// Tool choice stays automatic.
	choice := strings.Trim(string(r.ToolChoice), `"`)
	if choice != "auto" && !jsonEqual(r.ToolChoice, []byte(`{"type":"auto","disable_parallel_tool_use":false}`)) &&
		!jsonEqual(r.ToolChoice, []byte(`{"functionCallingConfig":{"mode":"AUTO"}}`)) {
		t.Errorf("tool_choice %s", r.ToolChoice)
	}
}

// finalizerRanLocally checks that chatd answered the finalizer call itself.
func finalizerRanLocally(t *testing.T, msgs []client.ChatMessage) {
	t.Helper()
	calls, results := map[string]bool{}, map[string]bool{}
	for _, m := range msgs {
		for _, p := range m.Content {
			switch {
			case p.Type == "tool-call" && p.ToolName == runner.FinalizerName:
				if p.ProviderExecuted {
					t.Fatalf("finalizer call marked provider-executed: %+v", p)
				}
				calls[p.ToolCallID] = true
			case p.Type == "tool-result" && p.ToolName == runner.FinalizerName && m.Role == client.RoleTool:
				results[p.ToolCallID] = true
			}
		}
	}
	if len(calls) == 0 {
		t.Fatal("no finalizer call in the history")
	}
	for id := range calls {
		if !results[id] {
			t.Errorf("finalizer call %s has no local tool result", id)
		}
	}
}

func TestWire(t *testing.T) {
	t.Parallel()
	for _, wt := range wireTypes {
		t.Run(wt.typ, func(t *testing.T) {
			t.Parallel()
			w := newWireEnv(t, wt)
			t.Run("valid first time", w.validFirstTime)
			t.Run("invalid then valid", w.invalidThenValid)
			t.Run("tool then finalize", w.toolThenFinalize)
			if wt.typ == config.TypeOpenAICompatible {
				t.Run("reasoning details across a tool step", w.reasoningDetails)
			}
			t.Run("refusal", func(t *testing.T) { w.refused(t, "refusal") })
			t.Run("content filter", func(t *testing.T) { w.refused(t, "content-filter") })
			t.Run("length", w.length)
			t.Run("truncated stream", w.truncated)
			t.Run("malformed arguments", w.malformed)
			t.Run("retryable error then success", w.retryThenSuccess)
			t.Run("provider error after the retry budget", w.exhausted)
			t.Run("terminal error and key hygiene", w.denied)
			t.Run("compaction uses the non-streaming call", w.compaction)
		})
	}
}

func (w *wireEnv) validFirstTime(t *testing.T) {
	t.Parallel()
	chat, _, res := w.structured(t, "valid")
	succeeded(t, res, nil)
	reqs := w.requests("valid")
	if len(reqs) != 1 || !reqs[0].Stream {
		t.Fatalf("%d requests (stream %v)", len(reqs), len(reqs) > 0 && reqs[0].Stream)
	}
	w.wantTools(t, reqs[0])
	msgs := w.history(t, chat)
	finalizerRanLocally(t, msgs)

	// An ordinary follow-up: the receipt is not replayed, the finalizer is
	// not offered any more.
	receipt := msgs[len(msgs)-1]
	if receipt.StructuredOutput == nil || len(receipt.Content) != 1 {
		t.Fatalf("last message is not the receipt: %+v", receipt)
	}
	if _, err := w.c.SendMessage(t.Context(), chat, client.SendMessageRequest{Content: []client.MessagePart{client.TextPart("thanks")}}); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, w.c, chat, 3) // finalizer step, receipt, answer
	if reqs = w.requests("valid"); len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	for _, m := range reqs[1].Messages {
		if m.Role == "assistant" && m.Content == receipt.Content[0].Text {
			t.Errorf("the receipt was replayed: %+v", m)
		}
	}
	if reqs[1].Tool(runner.FinalizerName) != nil {
		t.Error("the finalizer is offered to an ordinary message")
	}
}

func (w *wireEnv) invalidThenValid(t *testing.T) {
	t.Parallel()
	_, req, res := w.structured(t, "invalid")
	succeeded(t, res, value("make test"))
	if r, s := w.ledger(t, req); r != 1 || s != 2 {
		t.Fatalf("rejections %d steps %d", r, s)
	}
	reqs := w.requests("invalid")
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	// The second request carries the rejected call and its feedback, paired
	// by the provider's call id.
	m := reqs[1].Messages
	call, result := m[len(m)-2], m[len(m)-1]
	if len(call.ToolCalls) != 1 || call.ToolCalls[0].Name != runner.FinalizerName || result.Role != "tool" ||
		result.ToolCallID != call.ToolCalls[0].ID || !strings.Contains(result.Content, "The value was rejected") {
		t.Fatalf("replayed rejection: %+v / %+v", call, result)
	}
	if w.wt.typ == config.TypeAnthropic && !result.IsError {
		t.Error("the rejection was not sent as an error result")
	}
}

func (w *wireEnv) toolThenFinalize(t *testing.T) {
	t.Parallel()
	chat, req, res := w.structured(t, "tool")
	succeeded(t, res, value(fileContent))
	if r, s := w.ledger(t, req); r != 0 || s != 2 {
		t.Fatalf("rejections %d steps %d", r, s)
	}
	msgs := w.history(t, chat)
	finalizerRanLocally(t, msgs)
	var readID string
	for _, m := range msgs {
		for _, p := range m.Content {
			if p.Type == "tool-call" && p.ToolName == "read_file" {
				readID = p.ToolCallID
			}
		}
	}
	reqs := w.requests("tool")
	if len(reqs) != 2 || readID == "" {
		t.Fatalf("%d requests, read_file call %q", len(reqs), readID)
	}
	w.wantTools(t, reqs[1])
	// The second request replays the step: the call with the provider's id
	// and the arguments as sent, then its result.
	m := reqs[1].Messages
	call, result := m[len(m)-2], m[len(m)-1]
	if call.Role != "assistant" || len(call.ToolCalls) != 1 || call.ToolCalls[0].ID != readID ||
		!jsonEqual([]byte(call.ToolCalls[0].Arguments), []byte(`{"path":"notes.txt"}`)) {
		t.Fatalf("replayed call %+v", call)
	}
	if result.Role != "tool" || result.ToolCallID != readID || result.Content != fileContent || result.IsError {
		t.Fatalf("replayed result %+v", result)
	}
	switch w.wt.typ {
	case config.TypeAnthropic:
		// The thinking block comes back first with its signature (the mock
		// refuses a missing or forged one, like the API).
		if call.Reasoning != "I should read the notes first." || call.Signature != mockllm.SignThinking(call.Reasoning) {
			t.Errorf("thinking replay %q %q", call.Reasoning, call.Signature)
		}
		var body struct {
			Messages []struct {
				Content []struct {
					Type string `json:"type"`
				} `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(reqs[1].Body, &body)
		if blocks := body.Messages[len(body.Messages)-2].Content; len(blocks) < 2 || blocks[0].Type != "thinking" || blocks[1].Type != "tool_use" {
			t.Errorf("assistant blocks %+v", blocks)
		}
	case config.TypeOpenAICompatible:
		if call.Reasoning != "I should read the notes first." {
			t.Errorf("reasoning_content replay %q", call.Reasoning)
		}
	case config.TypeGoogle:
		// The thought signature the first answer put on the call (binary)
		// comes back on it byte for byte; the thought text is not sent
		// back (Gemini wants the signature only). The mock refuses a
		// missing or altered signature, like the API.
		issued := reqs[0].IssuedSignatures()
		if len(issued) == 0 || call.Signature != string(issued[0]) || !mockllm.VerifyThoughtSignature("read_file", []byte(call.Signature)) {
			t.Errorf("signature replay %q, issued %q", call.Signature, issued)
		}
		sig := storedSignature(t, w.env, chat)
		if string(sig) != string(issued[0]) {
			t.Errorf("stored signature %q, issued %q", sig, issued[0])
		}
	case config.TypeOpenAI:
		// Asked for with include (store is false), the reasoning item comes
		// back right before the call it led to, with the encrypted content
		// of its output_item.done (the mock refuses an item without one, a
		// forged one, or one without its following item; the added event's
		// placeholder decrypts to nothing).
		if !strings.Contains(string(reqs[0].Body), `"include":["reasoning.encrypted_content"]`) {
			t.Errorf("first request without include: %s", reqs[0].Body)
		}
		if call.Reasoning != "I should read the notes first." || call.Signature != mockllm.EncryptReasoning(call.Reasoning) {
			t.Errorf("reasoning item replay %q %q", call.Reasoning, call.Signature)
		}
		var body struct {
			Input []struct {
				Type   string `json:"type"`
				ID     string `json:"id"`
				CallID string `json:"call_id"`
			} `json:"input"`
		}
		_ = json.Unmarshal(reqs[1].Body, &body)
		n := len(body.Input)
		if n < 3 || body.Input[n-3].Type != "reasoning" || !strings.HasPrefix(body.Input[n-3].ID, "rs_") ||
			body.Input[n-2].Type != "function_call" || body.Input[n-2].CallID != readID {
			t.Errorf("input items %+v", body.Input)
		}
		var meta string
		if err := w.env.Pool.QueryRow(t.Context(), `SELECT p->>'provider_metadata' FROM chat_messages, jsonb_array_elements(content) p
			WHERE chat_id = $1 AND role = 'assistant' AND p->>'type' = 'reasoning' ORDER BY id LIMIT 1`, chat).Scan(&meta); err != nil {
			t.Fatal(err)
		}
		var stored struct {
			OpenAI struct {
				Type string `json:"type"`
				Data struct {
					ItemID           string `json:"item_id"`
					EncryptedContent string `json:"encrypted_content"`
				} `json:"data"`
			} `json:"openai"`
		}
		if json.Unmarshal([]byte(meta), &stored) != nil || stored.OpenAI.Type != "openai.responses.reasoning_metadata" ||
			stored.OpenAI.Data.ItemID != body.Input[n-3].ID || stored.OpenAI.Data.EncryptedContent != mockllm.EncryptReasoning("I should read the notes first.") {
			t.Errorf("stored reasoning metadata %s", meta)
		}
	}
}

// reasoningDetails: OpenRouter-style reasoning (delta.reasoning beside
// reasoning_details fragments, the signature last) is stored with the step
// and comes back on the assistant message as the merged entry, signature
// included (the mock refuses a missing or forged one).
func (w *wireEnv) reasoningDetails(t *testing.T) {
	t.Parallel()
	chat, _, res := w.structured(t, "details")
	succeeded(t, res, value(fileContent))
	reqs := w.requests("details")
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	m := reqs[1].Messages
	call := m[len(m)-2]
	const thought = "The notes first, then the answer."
	want := `[{"type":"reasoning.text","text":"` + thought + `","format":"anthropic-claude-v1","index":0,"signature":"` + mockllm.SignThinking(thought) + `"}]`
	got, _ := json.Marshal(call.ReasoningDetails)
	if call.Role != "assistant" || len(call.ToolCalls) != 1 || !jsonEqual(got, []byte(want)) {
		t.Fatalf("replayed assistant message %s", call.Raw)
	}
	if call.Reasoning != thought || call.Signature != mockllm.SignThinking(thought) {
		t.Errorf("reasoning %q signature %q", call.Reasoning, call.Signature)
	}
	var meta string
	if err := w.env.Pool.QueryRow(t.Context(), `SELECT p->>'provider_metadata' FROM chat_messages, jsonb_array_elements(content) p
		WHERE chat_id = $1 AND role = 'assistant' AND p->>'type' = 'reasoning' ORDER BY id LIMIT 1`, chat).Scan(&meta); err != nil {
		t.Fatal(err)
	}
	var stored map[string]struct {
		Type string `json:"type"`
		Data struct {
			Details []json.RawMessage `json:"details"`
		} `json:"data"`
	}
	if json.Unmarshal([]byte(meta), &stored) != nil || stored["openai-compat"].Type != "chatd.openai-compat.reasoning_details" ||
		len(stored["openai-compat"].Data.Details) != 1 || !jsonEqual(stored["openai-compat"].Data.Details[0], []byte(want[1:len(want)-1])) {
		t.Errorf("stored reasoning metadata %s", meta)
	}
}

func (w *wireEnv) refused(t *testing.T, script string) {
	t.Parallel()
	chat, _, res := w.structured(t, script)
	failed(t, res, client.CodeRefused)
	if n := len(w.requests(script)); n != 1 {
		t.Fatalf("%d requests after a refusal", n)
	}
	if script == "refusal" && w.wt.typ == config.TypeGoogle {
		// Gemini has no refusal: it blocks (finishReason SAFETY).
		if res.Error.Message != "the model provider's content filter stopped the answer" {
			t.Errorf("message %q", res.Error.Message)
		}
		return
	}
	if script == "refusal" {
		// The refusal text is kept (fantasy drops OpenAI refusal parts; chatd
		// reads them off the wire).
		msgs := w.history(t, chat)
		found := false
		for _, m := range msgs {
			for _, p := range m.Content {
				if m.Role == client.RoleAssistant && m.StructuredOutput == nil && strings.Contains(p.Text, "I can't help with that.") {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("refusal text not kept: %+v", msgs)
		}
		if !strings.Contains(res.Error.Message, "refused") {
			t.Errorf("message %q", res.Error.Message)
		}
	}
}

// length: a finalizer call from a step cut at max tokens never succeeds,
// even though its arguments parse (fantasy reports tool-calls for it on
// Chat Completions and Responses; chatd reads the real reason on the wire).
func (w *wireEnv) length(t *testing.T) {
	t.Parallel()
	chat, req, res := w.structured(t, "length")
	succeeded(t, res, value("whole"))
	if r, s := w.ledger(t, req); r != 1 || s != 2 {
		t.Fatalf("rejections %d steps %d", r, s)
	}
	var finish string
	if err := w.env.Pool.QueryRow(t.Context(), `SELECT finish_reason FROM chat_messages WHERE chat_id = $1 AND role = 'assistant' ORDER BY id LIMIT 1`, chat).
		Scan(&finish); err != nil {
		t.Fatal(err)
	}
	if finish != "length" {
		t.Errorf("stored finish reason %q, want length", finish)
	}
}

// truncated: a stream that ends before its terminal event is retried, and
// nothing of it is committed.
func (w *wireEnv) truncated(t *testing.T) {
	t.Parallel()
	chat, req, res := w.structured(t, "truncated")
	succeeded(t, res, value("whole"))
	if r, s := w.ledger(t, req); r != 0 || s != 1 {
		t.Fatalf("rejections %d steps %d", r, s)
	}
	if n := len(w.requests("truncated")); n != 2 {
		t.Fatalf("%d requests", n)
	}
	var n int
	if err := w.env.Pool.QueryRow(t.Context(), `SELECT count(*) FROM chat_messages WHERE chat_id = $1 AND content::text LIKE '%cut stream%'`, chat).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d rows hold the cut stream's arguments", n)
	}
}

func (w *wireEnv) malformed(t *testing.T) {
	t.Parallel()
	chat, req, res := w.structured(t, "malformed")
	succeeded(t, res, value("whole"))
	if r, s := w.ledger(t, req); r != 1 || s != 2 {
		t.Fatalf("rejections %d steps %d", r, s)
	}
	if w.wt.typ == config.TypeGoogle {
		// Gemini sends no call it could not form: the step ends with
		// MALFORMED_FUNCTION_CALL (fantasy: finish error), a step without
		// the finalizer, rejected as such.
		var finish string
		if err := w.env.Pool.QueryRow(t.Context(), `SELECT finish_reason FROM chat_messages WHERE chat_id = $1 AND role = 'assistant' ORDER BY id LIMIT 1`, chat).
			Scan(&finish); err != nil {
			t.Fatal(err)
		}
		if finish != string(fantasy.FinishReasonError) {
			t.Errorf("stored finish reason %q", finish)
		}
		return
	}
	var n int
	if err := w.env.Pool.QueryRow(t.Context(), `SELECT count(*) FROM chat_messages WHERE chat_id = $1 AND content::text LIKE '%args_rejected%'`, chat).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d rows with a rejected-arguments marker", n)
	}
}

func (w *wireEnv) retryThenSuccess(t *testing.T) {
	t.Parallel()
	_, req, res := w.structured(t, "retry")
	succeeded(t, res, value("whole"))
	if r, s := w.ledger(t, req); r != 0 || s != 1 {
		t.Fatalf("rejections %d steps %d: retries are not steps", r, s)
	}
	w.mu.Lock()
	times := slices.Clone(w.times["retry"])
	w.mu.Unlock()
	if len(times) != 3 {
		t.Fatalf("%d requests", len(times))
	}
	// The 429 asked for 1 s; the test's retry backoff is milliseconds.
	if gap := times[1].Sub(times[0]); gap < time.Second {
		t.Errorf("retried after %v despite Retry-After: 1", gap)
	}
}

func (w *wireEnv) exhausted(t *testing.T) {
	t.Parallel()
	chat, _, res := w.structured(t, "exhausted")
	failed(t, res, client.CodeProviderError)
	if n := len(w.requests("exhausted")); n != 3 {
		t.Fatalf("%d attempts, want the budget of 3", n)
	}
	if res.Error.Message != "the model provider failed (HTTP 500) after 3 attempts" {
		t.Errorf("message %q", res.Error.Message)
	}
	var lastError string
	if err := w.env.Pool.QueryRow(t.Context(), `SELECT coalesce(last_error::text, '') FROM chats WHERE id = $1`, chat).Scan(&lastError); err != nil {
		t.Fatal(err)
	}
	if lastError == "" || strings.Contains(lastError, "upstream") || strings.Contains(lastError, "minLength") {
		t.Errorf("last_error %s", lastError)
	}
}

// denied: a 401 is terminal at once, with chatd's own sentence; the key
// was sent to the provider and appears in no log line, although the
// provider's error message echoed it.
func (w *wireEnv) denied(t *testing.T) {
	t.Parallel()
	chat, _, res := w.structured(t, "denied")
	failed(t, res, client.CodeProviderError)
	reqs := w.requests("denied")
	if len(reqs) != 1 {
		t.Fatalf("%d attempts at a 401", len(reqs))
	}
	if res.Error.Message != "the model provider rejected the credentials (HTTP 401)" {
		t.Errorf("message %q", res.Error.Message)
	}
	sent := reqs[0].Header.Get("Authorization")
	switch w.wt.typ {
	case config.TypeAnthropic:
		sent = reqs[0].Header.Get("X-Api-Key")
	case config.TypeGoogle:
		sent = reqs[0].Header.Get("X-Goog-Api-Key")
	}
	if !strings.Contains(sent, apiKey) {
		t.Fatalf("the key was not sent: %q", sent)
	}
	logs := w.env.Logs()
	if strings.Contains(logs, apiKey) {
		t.Fatal("a log line contains the API key")
	}
	if !strings.Contains(logs, "invalid x-api-key [redacted]") {
		t.Errorf("the provider's message was not logged redacted")
	}
	var stored int
	if err := w.env.Pool.QueryRow(t.Context(), `SELECT count(*) FROM chat_messages WHERE chat_id = $1 AND content::text LIKE '%' || $2 || '%'`, chat, apiKey).
		Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Error("the key was stored in a message")
	}
}

// compaction: summarising uses fantasy's Generate, a non-streaming call in
// the provider's format, and the next streamed call starts from the
// summary.
func (w *wireEnv) compaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	created, err := w.c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("hello [script:compact]")}})
	if err != nil {
		t.Fatal(err)
	}
	chat := created.Chat.ID
	waitIdle(t, w.c, chat, 1)
	r, err := http.NewRequest("POST", w.env.API.URL+"/api/v1/chats/"+chat.String()+"/compact", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+w.env.Token("alice"))
	resp, err := w.env.API.Client().Do(r)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("compact: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := w.c.SendMessage(ctx, chat, client.SendMessageRequest{Content: []client.MessagePart{client.TextPart("again")}}); err != nil {
		t.Fatal(err)
	}
	h := waitIdle(t, w.c, chat, 2)
	reqs := w.requests("compact")
	if len(reqs) != 3 || !reqs[0].Stream || reqs[1].Stream || !reqs[2].Stream {
		t.Fatalf("requests (want stream, generate, stream): %d", len(reqs))
	}
	first := reqs[2].Messages
	i := slices.IndexFunc(first, func(m mockllm.Message) bool { return m.Role == "user" })
	if i < 0 || !strings.HasPrefix(first[i].Content, "Summary of the earlier conversation:") {
		t.Errorf("the prompt after compaction starts with %+v", first)
	}
	if last := h[len(h)-1]; last.Role != client.RoleAssistant || last.Content[len(last.Content)-1].Text != "Second answer." {
		t.Errorf("last message %+v", last)
	}
}

// waitIdle polls the chat until it is waiting with at least n assistant
// messages.
func waitIdle(t *testing.T, c *client.Client, chat uuid.UUID, n int) []client.ChatMessage {
	t.Helper()
	ctx := t.Context()
	for {
		ch, err := c.GetChat(ctx, chat)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Status == client.StatusError {
			t.Fatalf("chat failed")
		}
		if ch.Status == client.StatusWaiting {
			h, err := c.ListMessages(ctx, chat, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			count := 0
			for _, m := range h.Messages {
				if m.Role == client.RoleAssistant {
					count++
				}
			}
			if count >= n {
				return h.Messages
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("chat still %s", ch.Status)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestStrictToolsRefusedAtAdmission: strict tools on the Responses API
// would force strict decoding on the finalizer, and fantasy has no per-tool
// override: structured requests are refused with configuration_error,
// ordinary chats still work, and a request accepted before the
// configuration changed fails at run time with the same code.
func TestStrictToolsRefusedAtAdmission(t *testing.T) {
	t.Parallel()
	strict := true
	opts := testenv.Options{Provider: config.TypeOpenAI, Model: config.Model{Model: "gpt-5", StrictTools: &strict},
		ExtraModels: []config.Model{{ID: "mock/lenient", Model: "gpt-5"}},
		Mock:        mockllm.Options{Formats: []string{mockllm.FormatResponses}}}
	env := testenv.New(t, opts)
	c := env.Client("alice")
	ctx := t.Context()
	format := &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(schema)}}
	content := []client.MessagePart{client.TextPart("report")}

	_, err := c.CreateChat(ctx, client.CreateChatRequest{Content: content, ResponseFormat: format})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || len(apiErr.Body.Validations) != 1 ||
		apiErr.Body.Validations[0].Field != "response_format" || !strings.HasPrefix(apiErr.Body.Validations[0].Detail, "configuration_error: ") ||
		!strings.Contains(apiErr.Body.Validations[0].Detail, "strict_tools") {
		t.Fatalf("structured create on the strict model: %v", err)
	}
	var chats int
	_ = env.Pool.QueryRow(ctx, `SELECT count(*) FROM chats`).Scan(&chats)
	if chats != 0 {
		t.Fatalf("%d chats persisted by a refused request", chats)
	}

	// An ordinary chat on the same model works, with strict tools on the wire.
	plain, err := c.CreateChat(ctx, client.CreateChatRequest{Content: content})
	if err != nil {
		t.Fatal(err)
	}
	if h := waitIdle(t, c, plain.Chat.ID, 1); h[len(h)-1].Content[0].Text != "mockllm: report" {
		t.Fatalf("ordinary answer %+v", h[len(h)-1])
	}
	// ... and a structured message sent to it is refused the same way.
	_, err = c.SendMessage(ctx, plain.Chat.ID, client.SendMessageRequest{Content: content, ResponseFormat: format})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Body.Validations[0].Detail, "configuration_error") {
		t.Fatalf("structured send on the strict model: %v", err)
	}
	// Another model of the provider is fine.
	created, err := c.CreateChat(ctx, client.CreateChatRequest{Model: "mock/lenient", Content: content, ResponseFormat: format})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.WaitStructuredOutput(ctx, *created.Messages[0].StructuredOutputRequestID); err != nil || res.Status != client.OutputSucceeded {
		t.Fatalf("lenient model: %+v %v", res, err)
	}
	calls := len(env.Mock.Requests())

	// A request accepted while the model was lenient, run after the
	// configuration turned strict_tools on: configuration_error, and no
	// provider call.
	before := testenv.New(t, testenv.Options{Provider: config.TypeOpenAI, Model: config.Model{Model: "gpt-5"}, NoRunner: true,
		Mock: mockllm.Options{Formats: []string{mockllm.FormatResponses}}})
	queued, err := before.Client("bob").CreateChat(ctx, client.CreateChatRequest{Content: content, ResponseFormat: format})
	if err != nil {
		t.Fatal(err)
	}
	after := testenv.Reopen(t, before, testenv.Options{Provider: config.TypeOpenAI, Model: config.Model{Model: "gpt-5", StrictTools: &strict},
		Mock: mockllm.Options{Formats: []string{mockllm.FormatResponses}}})
	res, err := after.Client("bob").WaitStructuredOutput(ctx, *queued.Messages[0].StructuredOutputRequestID)
	if err != nil || res.Status != client.OutputFailed || res.Error.Code != client.CodeConfiguration {
		t.Fatalf("after the configuration changed: %+v %v", res, err)
	}
	if n := len(after.Mock.Requests()); n != 0 {
		t.Errorf("%d provider calls for a refused configuration", n)
	}
	if n := len(env.Mock.Requests()); n != calls {
		t.Errorf("unexpected provider calls")
	}
}

// storedSignature reads the thought signature stored with the chat's first
// assistant step, as the provider layer reads it back (fantasy's registry
// decodes the stored metadata).
func storedSignature(t *testing.T, env *testenv.Env, chat uuid.UUID) []byte {
	t.Helper()
	var content []byte
	if err := env.Pool.QueryRow(t.Context(), `SELECT content FROM chat_messages WHERE chat_id = $1 AND role = 'assistant' ORDER BY id LIMIT 1`, chat).
		Scan(&content); err != nil {
		t.Fatal(err)
	}
	parts, err := jsonb.ParseContent(content)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if p.Type != jsonb.PartReasoning || len(p.ProviderMetadata) == 0 {
			continue
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(p.ProviderMetadata, &raw); err != nil {
			t.Fatal(err)
		}
		opts, err := fantasy.UnmarshalProviderOptions(raw)
		if err != nil {
			t.Fatalf("stored metadata %s: %v", p.ProviderMetadata, err)
		}
		if sig := provider.GeminiSignature(opts); sig != nil {
			return sig
		}
	}
	t.Fatalf("no thought signature stored: %s", content)
	return nil
}
