package runner_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/xeipuuv/gojsonschema"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

func TestMain(m *testing.M) {
	os.Setenv(mcpSecretEnv, mcpSecret) // in chatd's environment, named by no MCP server
	os.Exit(dbtest.Run(m, stopMCP))
}

const reportSchema = `{"type":"object","properties":{"command":{"type":"string","minLength":1},"tags":{"type":"array","items":{"type":"string"}}},"required":["command"],"additionalProperties":false}`

func structured(schema string) *client.ResponseFormat {
	return &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(schema)}}
}

// create starts a structured chat and returns the chat and request ids.
func create(t *testing.T, c *client.Client, schema string) (uuid.UUID, uuid.UUID) {
	t.Helper()
	res, err := c.CreateChat(t.Context(), client.CreateChatRequest{
		Content: []client.MessagePart{client.TextPart("Report the test command.")}, ResponseFormat: structured(schema),
	})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Messages[0].StructuredOutputRequestID
	if id == nil {
		t.Fatal("no structured_output_request_id on the input message")
	}
	return res.Chat.ID, *id
}

func wait(t *testing.T, c *client.Client, req uuid.UUID) client.StructuredOutputResult {
	t.Helper()
	res, err := c.WaitStructuredOutput(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// settled checks that the ledger, the messages and the chat agree once a
// request is terminal.
func settled(t *testing.T, env *testenv.Env, chat, req uuid.UUID, status client.RequestStatus, code client.ErrorCode) {
	t.Helper()
	ctx := t.Context()
	var ledgerStatus client.RequestStatus
	var ledgerCode *client.ErrorCode
	var receiptID *int64
	var candidate []byte
	err := env.Pool.QueryRow(ctx, `SELECT status, error_code, receipt_message_id, candidate FROM structured_requests WHERE request_id = $1`, req).
		Scan(&ledgerStatus, &ledgerCode, &receiptID, &candidate)
	if err != nil {
		t.Fatal(err)
	}
	if ledgerStatus != status || (code != "" && (ledgerCode == nil || *ledgerCode != code)) {
		t.Fatalf("ledger status %s code %v, want %s %s", ledgerStatus, ledgerCode, status, code)
	}
	if candidate != nil {
		t.Errorf("finished request still has candidate %s", candidate)
	}
	var receipts int
	var receiptRow int64
	if err := env.Pool.QueryRow(ctx, `SELECT count(*), coalesce(max(id), 0) FROM chat_messages WHERE structured_request_id = $1 AND kind = 'receipt'`, req).
		Scan(&receipts, &receiptRow); err != nil {
		t.Fatal(err)
	}
	if receipts != 1 || receiptID == nil || *receiptID != receiptRow {
		t.Fatalf("%d receipts (row %d), ledger points at %v", receipts, receiptRow, receiptID)
	}
	var chatStatus string
	var owned bool
	if err := env.Pool.QueryRow(ctx, `SELECT status, worker_id IS NOT NULL FROM chats WHERE id = $1`, chat).Scan(&chatStatus, &owned); err != nil {
		t.Fatal(err)
	}
	if chatStatus == "running" || owned {
		t.Fatalf("chat %s owned=%v after the request ended", chatStatus, owned)
	}
}

func providerCalls(env *testenv.Env) int { return len(env.Mock.Requests()) }

func TestValidFirstTime(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputSucceeded {
		t.Fatalf("status %s error %+v", res.Status, res.Error)
	}
	v, err := gojsonschema.Validate(gojsonschema.NewStringLoader(reportSchema), gojsonschema.NewBytesLoader(res.Value))
	if err != nil || !v.Valid() {
		t.Fatalf("value %s does not validate: %v %v", res.Value, err, v)
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")

	// The finalizer was offered with the caller's schema untouched, inside
	// the wrapper, and the prompt carried no receipt.
	reqs := env.Mock.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d provider calls, want 1", len(reqs))
	}
	tool := reqs[0].Tool(runner.FinalizerName)
	if tool == nil {
		t.Fatal("finalizer not offered")
	}
	var params struct {
		Type                 string                     `json:"type"`
		Properties           map[string]json.RawMessage `json:"properties"`
		Required             []string                   `json:"required"`
		AdditionalProperties *bool                      `json:"additionalProperties"`
	}
	if err := json.Unmarshal(tool.Parameters, &params); err != nil {
		t.Fatal(err)
	}
	if params.AdditionalProperties == nil || *params.AdditionalProperties || len(params.Required) != 1 || params.Required[0] != "output" {
		t.Fatalf("wrapper %s", tool.Parameters)
	}
	if !jsonEqual(t, params.Properties["output"], json.RawMessage(reportSchema)) {
		t.Fatalf("caller schema changed: %s", params.Properties["output"])
	}

	// REST history shows the same outcome on the receipt.
	h, err := c.ListMessages(t.Context(), chat, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := h.Messages[len(h.Messages)-1]
	if last.StructuredOutput == nil || last.StructuredOutput.Status != client.OutputSucceeded || !jsonEqual(t, last.StructuredOutput.Value, res.Value) {
		t.Fatalf("receipt %+v", last)
	}
	if last.Role != client.RoleAssistant || len(last.Content) != 1 || last.Content[0].Type != "text" {
		t.Fatalf("receipt content %+v", last.Content)
	}
}

func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func TestAlwaysInvalidFailsAfterThreeSteps(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Mode: mockllm.ModeInvalid}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputFailed || res.Error == nil || res.Error.Code != client.CodeValidationExhausted {
		t.Fatalf("result %+v", res)
	}
	if n := providerCalls(env); n != 3 {
		t.Fatalf("%d provider steps, want exactly 3", n)
	}
	settled(t, env, chat, req, client.OutputFailed, client.CodeValidationExhausted)
	var rejections, validation, steps int
	if err := env.Pool.QueryRow(t.Context(), `SELECT rejections, validation_rejections, steps FROM structured_requests WHERE request_id = $1`, req).
		Scan(&rejections, &validation, &steps); err != nil {
		t.Fatal(err)
	}
	if rejections != 3 || validation != 3 || steps != 3 {
		t.Fatalf("rejections %d validation %d steps %d", rejections, validation, steps)
	}
	// The repair prompts carried the validation feedback.
	reqs := env.Mock.Requests()
	lastMsg := reqs[2].Messages[len(reqs[2].Messages)-1]
	if lastMsg.Role != "tool" || !strings.Contains(lastMsg.Content, "The value was rejected") {
		t.Fatalf("third prompt ends with %+v", lastMsg)
	}
}

func TestTextOnlyFailsNotProduced(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Mode: mockllm.ModeText}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputFailed || res.Error.Code != client.CodeNotProduced {
		t.Fatalf("result %+v", res)
	}
	if n := providerCalls(env); n != 3 {
		t.Fatalf("%d provider steps, want 3", n)
	}
	settled(t, env, chat, req, client.OutputFailed, client.CodeNotProduced)
}

func TestInvalidThenValidSucceeds(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: &mockllm.Script{Steps: []mockllm.Step{{Invalid: true}}}}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v", res)
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")
	var rejections int
	_ = env.Pool.QueryRow(t.Context(), `SELECT rejections FROM structured_requests WHERE request_id = $1`, req).Scan(&rejections)
	if rejections != 1 {
		t.Fatalf("rejections %d, want 1", rejections)
	}
}

func TestTwoFinalizersThenOne(t *testing.T) {
	t.Parallel()
	two := mockllm.Step{ToolCalls: []mockllm.ToolCall{
		{Name: runner.FinalizerName, Value: json.RawMessage(`{"command":"a"}`)},
		{Name: runner.FinalizerName, Value: json.RawMessage(`{"command":"b"}`)},
	}}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: &mockllm.Script{Steps: []mockllm.Step{two, {Value: json.RawMessage(`{"command":"c"}`)}}}}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputSucceeded || !jsonEqual(t, res.Value, json.RawMessage(`{"command":"c"}`)) {
		t.Fatalf("result %+v %s", res, res.Value)
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")
	var rejections, validation int
	_ = env.Pool.QueryRow(t.Context(), `SELECT rejections, validation_rejections FROM structured_requests WHERE request_id = $1`, req).Scan(&rejections, &validation)
	if rejections != 1 || validation != 0 {
		t.Fatalf("rejections %d validation %d, want one batch rejection", rejections, validation)
	}
	if len(res.Attempts) != 1 || res.Attempts[0].Reason != client.AttemptInvalidBatch || res.Attempts[0].Errors[0].Keyword != "invalid_batch" {
		t.Fatalf("attempts %+v", res.Attempts)
	}
}

func TestOrdinaryChatFinishesOnText(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{})
	c := env.Client("alice")
	res, err := c.CreateChat(t.Context(), client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages[0].StructuredOutputRequestID != nil {
		t.Fatal("ordinary message has a request id")
	}
	h := waitIdle(t, c, res.Chat.ID)
	if len(h.Messages) != 2 || h.Messages[1].Role != client.RoleAssistant || h.Messages[1].StructuredOutput != nil {
		t.Fatalf("history %+v", h.Messages)
	}
	if reqs := env.Mock.Requests(); len(reqs) != 1 || len(reqs[0].Tools) != 0 {
		t.Fatalf("ordinary chat offered tools: %+v", reqs)
	}
}

// waitIdle waits for the chat to stop running, woken by its own polling of
// committed state (GET), and returns the history.
func waitIdle(t *testing.T, c *client.Client, chat uuid.UUID) client.ListMessagesResponse {
	t.Helper()
	ctx := t.Context()
	for {
		ch, err := c.GetChat(ctx, chat)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Status == client.StatusWaiting || ch.Status == client.StatusError {
			h, err := c.ListMessages(ctx, chat, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		select {
		case <-ctx.Done():
			t.Fatalf("chat still %s", ch.Status)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestQueuedStructuredRequestRunsAfterTheTurn(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{BeforeRespond: func(ctx context.Context, r *mockllm.Request) error {
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "first") {
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}
		return nil
	}}})
	c := env.Client("alice")
	first, err := c.CreateChat(t.Context(), client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("first")}})
	if err != nil {
		t.Fatal(err)
	}
	sent, err := c.SendMessage(t.Context(), first.Chat.ID, client.SendMessageRequest{
		Content: []client.MessagePart{client.TextPart("second")}, ResponseFormat: structured(reportSchema)})
	if err != nil {
		t.Fatal(err)
	}
	if !sent.Queued || sent.QueuedMessage == nil || sent.QueuedMessage.StructuredOutputRequestID == nil {
		t.Fatalf("send while running: %+v", sent)
	}
	h, err := c.ListMessages(t.Context(), first.Chat.ID, 0, 0)
	if err != nil || len(h.QueuedMessages) != 1 || h.QueuedMessages[0].StructuredOutputRequestID == nil {
		t.Fatalf("queue %+v %v", h.QueuedMessages, err)
	}
	close(hold)
	req := *sent.QueuedMessage.StructuredOutputRequestID
	res := wait(t, c, req)
	if res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v", res)
	}
	settled(t, env, first.Chat.ID, req, client.OutputSucceeded, "")
}

func TestProviderErrorsExhaustAttempts(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{
		Mock:   mockllm.Options{Script: &mockllm.Script{Steps: []mockllm.Step{{Error: &mockllm.ErrorSpec{Status: 503}}}, Then: mockllm.ThenRepeat}},
		Runner: runner.Options{MaxAttempts: 3},
	})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputFailed || res.Error.Code != client.CodeProviderError {
		t.Fatalf("result %+v", res)
	}
	if strings.Contains(res.Error.Message, "mockllm") || strings.Contains(res.Error.Message, "{") {
		t.Fatalf("unsanitized message %q", res.Error.Message)
	}
	if n := providerCalls(env); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	settled(t, env, chat, req, client.OutputFailed, client.CodeProviderError)
	ch, _ := c.GetChat(t.Context(), chat)
	if ch.Status != client.StatusError || ch.LastError == nil || ch.LastError.Code != client.CodeProviderError {
		t.Fatalf("chat status %s last_error %+v, want error with provider_error", ch.Status, ch.LastError)
	}
}

func TestTransientErrorThenSuccess(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: &mockllm.Script{Steps: []mockllm.Step{
		{Error: &mockllm.ErrorSpec{Status: 429, RetryAfter: 0.01}}, {Error: &mockllm.ErrorSpec{Status: 503}},
	}}}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	if res := wait(t, c, req); res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v", res)
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")
	var steps int
	_ = env.Pool.QueryRow(t.Context(), `SELECT steps FROM structured_requests WHERE request_id = $1`, req).Scan(&steps)
	if steps != 1 || providerCalls(env) != 3 {
		t.Fatalf("steps %d calls %d: retries must not count as steps", steps, providerCalls(env))
	}
}

func TestTruncatedFinalizerArgumentsNeverSucceed(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: &mockllm.Script{Steps: []mockllm.Step{
		{ToolCalls: []mockllm.ToolCall{{Name: runner.FinalizerName, Arguments: `{"output":{"command":"x"`}}},
		{Value: json.RawMessage(`{"command":"x"}`)},
	}}}})
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v", res)
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")
	var rejections, steps int
	_ = env.Pool.QueryRow(t.Context(), `SELECT rejections, steps FROM structured_requests WHERE request_id = $1`, req).Scan(&rejections, &steps)
	if rejections != 1 || steps != 2 {
		t.Fatalf("rejections %d steps %d: truncated finalizer arguments must be rejected", rejections, steps)
	}
	// The unparseable arguments were never stored.
	var stored int
	_ = env.Pool.QueryRow(t.Context(), `SELECT count(*) FROM chat_messages WHERE chat_id = $1 AND content::text LIKE '%args_rejected%'`, chat).Scan(&stored)
	if stored != 1 {
		t.Fatalf("%d rows with a rejected-arguments marker, want 1", stored)
	}
}
