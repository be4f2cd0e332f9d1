package provider_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

// geminiContents are the model contents of a Gemini request body: each
// function call's name and thought signature (decoded).
type geminiCall struct {
	name string
	sig  []byte
}

func geminiModelCalls(t *testing.T, body []byte) [][]geminiCall {
	t.Helper()
	var req struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				FunctionCall *struct {
					Name string `json:"name"`
				} `json:"functionCall"`
				ThoughtSignature string `json:"thoughtSignature"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var out [][]geminiCall
	for _, c := range req.Contents {
		if c.Role != "model" {
			continue
		}
		var calls []geminiCall
		for _, p := range c.Parts {
			if p.FunctionCall == nil {
				continue
			}
			sig, err := base64.StdEncoding.DecodeString(p.ThoughtSignature)
			if err != nil {
				t.Fatalf("signature %q: %v", p.ThoughtSignature, err)
			}
			calls = append(calls, geminiCall{p.FunctionCall.Name, sig})
		}
		out = append(out, calls)
	}
	return out
}

// TestGeminiSignaturesAcrossRestart checks Gemini's signatures through the
// HTTP API on PostgreSQL with mockllm speaking Gemini (which, like the
// API, refuses a function call of the current turn without its thought
// signature, and a signature it did not issue): a structured turn with
// thinking calls a client tool; chatd stops; the step read back from the
// database holds the binary signature the answer carried, byte for byte;
// a new chatd takes the tool result, the model answers with an invalid
// finalizer value, and the repair request carries both steps'
// signatures, exactly; the request succeeds.
func TestGeminiSignaturesAcrossRestart(t *testing.T) {
	t.Parallel()
	const value = `{"command":"make test","timeout":2.5}`
	scripts := map[string]*mockllm.Script{"sig": {Steps: []mockllm.Step{
		{Reasoning: "The user asked for the weather first.", ToolCalls: []mockllm.ToolCall{{Name: "weather", Arguments: `{"location":"Florence"}`}}},
		{Reasoning: "Now the report.", Invalid: true},
		{Reasoning: "Fixing the report.", Value: json.RawMessage(value)},
	}}}
	opts := testenv.Options{Provider: config.TypeGoogle, APIKey: apiKey,
		Model: config.Model{Model: "gemini-3-pro-preview", ThinkingLevel: "high", IncludeThoughts: &yes},
		Mock:  mockllm.Options{Formats: []string{mockllm.FormatGemini}, Scripts: scripts}}
	before := testenv.New(t, opts)
	res, err := before.Client("alice").CreateChat(t.Context(), client.CreateChatRequest{
		Content: []client.MessagePart{client.TextPart("Report the project's test command. [script:sig]")},
		DynamicTools: []client.DynamicTool{{Name: "weather", Description: "Get the weather for a location",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`)}},
		ResponseFormat: &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(schema)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	chat, request := res.Chat.ID, *res.Messages[0].StructuredOutputRequestID
	waitStatus(t, before.Client("alice"), chat, client.StatusRequiresAction)
	first := before.Mock.Requests()[0].IssuedSignatures()
	if len(first) != 1 || utf8.Valid(first[0]) || !bytes.Contains(first[0], []byte{0}) {
		t.Fatalf("the first answer's signature %q is not the binary kind", first)
	}
	before.Stop()

	// Read back from the database, with the server stopped.
	if got := storedSignature(t, before, chat); !bytes.Equal(got, first[0]) {
		t.Fatalf("stored signature %q, received %q", got, first[0])
	}

	// The same mock (it knows the signatures it issued), a new chatd.
	after := testenv.Reopen(t, before, testenv.Options{Provider: config.TypeGoogle, APIKey: apiKey, ProviderURL: mockURL(before),
		Model: opts.Model})
	c := after.Client("alice")
	pending := pendingCall(t, c, chat)
	if _, err := c.SubmitToolResults(t.Context(), chat, client.ToolResultsRequest{Results: []client.ToolResult{
		{ToolCallID: pending, Output: json.RawMessage(`"sunny"`)}}}); err != nil {
		t.Fatal(err)
	}
	out, err := c.WaitStructuredOutput(t.Context(), request)
	if err != nil || out.Status != client.OutputSucceeded || !jsonEqual(out.Value, []byte(value)) {
		t.Fatalf("result %+v %v", out, err)
	}
	var rejections, steps int
	if err := after.Pool.QueryRow(t.Context(), `SELECT rejections, steps FROM structured_requests WHERE request_id = $1`, request).
		Scan(&rejections, &steps); err != nil {
		t.Fatal(err)
	}
	reqs := before.Mock.Requests()
	if rejections != 1 || steps != 3 || len(reqs) != 3 {
		t.Fatalf("rejections %d steps %d requests %d", rejections, steps, len(reqs))
	}
	second := reqs[1].IssuedSignatures()
	if len(second) != 1 {
		t.Fatalf("second answer signatures %q", second)
	}
	// The repair request: the weather call and the rejected finalizer
	// call, each with the signature its answer carried.
	calls := geminiModelCalls(t, reqs[2].Body)
	if len(calls) != 2 || len(calls[0]) != 1 || len(calls[1]) != 1 || calls[0][0].name != "weather" ||
		!bytes.Equal(calls[0][0].sig, first[0]) || calls[1][0].name != "coder_structured_output" || !bytes.Equal(calls[1][0].sig, second[0]) {
		t.Fatalf("repair request's model contents %+v", calls)
	}
	if calls := geminiModelCalls(t, reqs[1].Body); len(calls) != 1 || !bytes.Equal(calls[0][0].sig, first[0]) {
		t.Fatalf("second request's model contents %+v", calls)
	}
}

// mockURL is the base URL of an Env's in-process mock.
func mockURL(e *testenv.Env) string { return e.MockURL[:len(e.MockURL)-len("/v1")] }

// pendingCall is the id of the chat's one pending client tool call.
func pendingCall(t *testing.T, c *client.Client, chat uuid.UUID) string {
	t.Helper()
	ch, err := c.GetChat(t.Context(), chat)
	if err != nil || len(ch.PendingToolCalls) != 1 {
		t.Fatalf("chat %+v %v", ch, err)
	}
	return ch.PendingToolCalls[0].ToolCallID
}

// TestGeminiSchemaRefusedAtAdmission: a schema whose recursion runs
// through required properties only, which Gemini cannot unroll, is refused
// when the request is made (HTTP 400 naming response_format, nothing
// stored), never by the provider during the turn; the same schema with
// the recursive property optional runs.
func TestGeminiSchemaRefusedAtAdmission(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Provider: config.TypeGoogle, Model: config.Model{Model: "gemini-3-pro-preview"},
		Mock: mockllm.Options{Formats: []string{mockllm.FormatGemini}}})
	c := env.Client("alice")
	ctx := t.Context()
	format := func(required string) *client.ResponseFormat {
		return &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "tree", Schema: json.RawMessage(
			`{"type":"object","properties":{"name":{"type":"string"},"child":{"$ref":"#"}},"required":` + required + `}`)}}
	}
	content := []client.MessagePart{client.TextPart("a tree")}
	_, err := c.CreateChat(ctx, client.CreateChatRequest{Content: content, ResponseFormat: format(`["name","child"]`)})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || len(apiErr.Body.Validations) != 1 ||
		apiErr.Body.Validations[0].Field != "response_format" ||
		!strings.HasPrefix(apiErr.Body.Validations[0].Detail, "configuration_error: ") ||
		!strings.Contains(apiErr.Body.Validations[0].Detail, "#/$defs/output → #/$defs/output") {
		t.Fatalf("create: %v", err)
	}
	var chats int
	_ = env.Pool.QueryRow(ctx, `SELECT count(*) FROM chats`).Scan(&chats)
	if chats != 0 || len(env.Mock.Requests()) != 0 {
		t.Fatalf("%d chats, %d provider calls after a refused request", chats, len(env.Mock.Requests()))
	}
	created, err := c.CreateChat(ctx, client.CreateChatRequest{Content: content, ResponseFormat: format(`["name"]`)})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.WaitStructuredOutput(ctx, *created.Messages[0].StructuredOutputRequestID); err != nil || res.Status != client.OutputSucceeded {
		t.Fatalf("optional recursion: %+v %v", res, err)
	}
	_, err = c.SendMessage(ctx, created.Chat.ID, client.SendMessageRequest{Content: content, ResponseFormat: format(`["child"]`)})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Body.Validations[0].Detail, "required properties only") {
		t.Fatalf("send: %v", err)
	}
}
