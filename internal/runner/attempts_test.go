package runner_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

// attemptSchema is refused by the attempts' values below at known paths.
const attemptSchema = `{"type":"object","properties":{"command":{"type":"string","minLength":1},"count":{"type":"integer","maximum":10}},` +
	`"required":["command"],"additionalProperties":false}`

type wantErr struct{ path, keyword string }

// checkAttempt compares an attempt with the errors it must list (in any
// order), and every attempt's number with its position.
func checkAttempt(t *testing.T, i int, a client.Attempt, reason client.AttemptReason, want ...wantErr) {
	t.Helper()
	if a.Attempt != i+1 || a.Reason != reason || a.ErrorsTotal != len(want) || a.Truncated || len(a.Errors) != len(want) {
		t.Fatalf("attempt %d: %+v, want reason %s and %d errors", i+1, a, reason, len(want))
	}
	got := map[wantErr]bool{}
	for _, e := range a.Errors {
		if e.Message == "" {
			t.Fatalf("attempt %d: error without a message: %+v", i+1, e)
		}
		got[wantErr{e.InstancePath, e.Keyword}] = true
	}
	for _, w := range want {
		if !got[w] {
			t.Fatalf("attempt %d: no error %+v in %+v", i+1, w, a.Errors)
		}
	}
}

// receiptOf returns the chat's receipt of req, from the history.
func receiptOf(t *testing.T, c *client.Client, chat, req uuid.UUID) client.ChatMessage {
	t.Helper()
	h, err := c.ListMessages(t.Context(), chat, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range h.Messages {
		if m.StructuredOutput != nil && m.StructuredOutput.RequestID == req {
			return m
		}
	}
	t.Fatalf("no receipt of %s in %+v", req, h.Messages)
	return client.ChatMessage{}
}

// streamedReceipt reads the chat's stream from the start until the receipt
// of req arrives as a message event.
func streamedReceipt(t *testing.T, c *client.Client, chat, req uuid.UUID) client.ChatMessage {
	t.Helper()
	s := c.Stream(t.Context(), chat, 0)
	defer s.Close()
	for {
		ev, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "message" && ev.Message.StructuredOutput != nil && ev.Message.StructuredOutput.RequestID == req {
			return *ev.Message
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAttemptsExhausted: three rejected attempts of different kinds, through
// the HTTP API. The failed receipt lists them as error.attempts, the same in
// the history and on the stream; the long poll lists them once, as its own
// attempts. error.message is a sentence for users, not the model's feedback
// (no instruction, no finalizer name); after a restart all of it reads the
// same.
func TestAttemptsExhausted(t *testing.T) {
	t.Parallel()
	script := &mockllm.Script{Steps: []mockllm.Step{
		{Value: json.RawMessage(`{"command":"","count":11}`)},
		{ToolCalls: []mockllm.ToolCall{{Name: runner.FinalizerName, Arguments: `{"output": {"command": `}}},
		{Value: json.RawMessage(`{"count":"x","extra":1}`)},
	}}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	chat, req := create(t, c, attemptSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputFailed || res.Error == nil || res.Error.Code != client.CodeValidationExhausted {
		t.Fatalf("result %+v", res)
	}
	const want = `3 attempts were rejected; the last: property "command" is required (and 2 more errors).`
	if res.Error.Message != want || strings.Contains(res.Error.Message, runner.FinalizerName) || strings.Contains(res.Error.Message, "Fix") {
		t.Fatalf("error.message %q, want %q", res.Error.Message, want)
	}
	if res.Error.Attempts != nil {
		t.Fatalf("the lookup lists the attempts twice: error.attempts %+v", res.Error.Attempts)
	}
	att := res.Attempts
	if len(att) != 3 {
		t.Fatalf("attempts %+v, want 3", att)
	}
	checkAttempt(t, 0, att[0], client.AttemptInvalidValue, wantErr{"/command", "minLength"}, wantErr{"/count", "maximum"})
	checkAttempt(t, 1, att[1], client.AttemptInvalidArguments, wantErr{"", "invalid_json"})
	checkAttempt(t, 2, att[2], client.AttemptInvalidValue,
		wantErr{"", "required"}, wantErr{"/count", "type"}, wantErr{"/extra", "additionalProperties"})
	settled(t, env, chat, req, client.OutputFailed, client.CodeValidationExhausted)

	receipt := receiptOf(t, c, chat, req)
	streamed := streamedReceipt(t, c, chat, req)
	lookupError := *res.Error
	lookupError.Attempts = att
	if !reflect.DeepEqual(receipt.StructuredOutput.Error, &lookupError) || !reflect.DeepEqual(streamed, receipt) {
		t.Fatalf("receipt %s\nstreamed %s\nlookup error %s", mustJSON(t, receipt), mustJSON(t, streamed), mustJSON(t, res.Error))
	}
	var stored int
	if err := env.Pool.QueryRow(t.Context(), `SELECT jsonb_array_length(attempts) FROM structured_requests WHERE request_id = $1`, req).Scan(&stored); err != nil || stored != 3 {
		t.Fatalf("ledger attempts %d (%v)", stored, err)
	}

	// A restart reads the same from the database.
	before := mustJSON(t, []any{res, receipt})
	again := testenv.Reopen(t, env, testenv.Options{Mock: mockllm.Options{Script: script}})
	c2 := again.Client("alice")
	res2, err := c2.GetStructuredOutput(t.Context(), req, 0)
	if err != nil {
		t.Fatal(err)
	}
	if after := mustJSON(t, []any{res2, receiptOf(t, c2, chat, req)}); after != before {
		t.Fatalf("after a restart:\n%s\nbefore:\n%s", after, before)
	}
	if s := streamedReceipt(t, c2, chat, req); !reflect.DeepEqual(s, receipt) {
		t.Fatalf("streamed after a restart: %s", mustJSON(t, s))
	}
}

// TestAttemptsRepaired: a value refused once, then repaired. The receipt
// carries the value and no error; the lookup lists the repair it needed.
func TestAttemptsRepaired(t *testing.T) {
	t.Parallel()
	script := &mockllm.Script{Steps: []mockllm.Step{
		{Value: json.RawMessage(`{"command":"go test","count":12}`)},
		{Value: json.RawMessage(`{"command":"go test","count":2}`)},
	}}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	chat, req := create(t, c, attemptSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputSucceeded || res.Error != nil || !jsonEqual(t, res.Value, json.RawMessage(`{"command":"go test","count":2}`)) {
		t.Fatalf("result %+v", res)
	}
	if len(res.Attempts) != 1 {
		t.Fatalf("attempts %+v, want the one repaired", res.Attempts)
	}
	checkAttempt(t, 0, res.Attempts[0], client.AttemptInvalidValue, wantErr{"/count", "maximum"})
	if m := receiptOf(t, c, chat, req); m.StructuredOutput.Error != nil {
		t.Fatalf("succeeded receipt with an error: %s", mustJSON(t, m))
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")

	// A request that succeeded at once lists no attempts.
	chat2, req2 := create(t, c, attemptSchema)
	if res := wait(t, c, req2); res.Status != client.OutputSucceeded || res.Attempts != nil {
		t.Fatalf("result %+v", res)
	}
	settled(t, env, chat2, req2, client.OutputSucceeded, "")
}

// TestAttemptsNotProduced: attempts that never called the finalizer are
// listed too, with their reason as the code.
func TestAttemptsNotProduced(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Mode: mockllm.ModeText}})
	c := env.Client("alice")
	_, req := create(t, c, attemptSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputFailed || res.Error.Code != client.CodeNotProduced || len(res.Attempts) != 3 {
		t.Fatalf("result %s", mustJSON(t, res))
	}
	for i, a := range res.Attempts {
		checkAttempt(t, i, a, client.AttemptTextOnly, wantErr{"", "text_only"})
	}
}

// TestAttemptsModeInvalid: mockllm's --mode invalid; every error names a
// keyword the schema uses.
func TestAttemptsModeInvalid(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Mode: mockllm.ModeInvalid}})
	c := env.Client("alice")
	_, req := create(t, c, attemptSchema)
	res := wait(t, c, req)
	if res.Status != client.OutputFailed || res.Error.Code != client.CodeValidationExhausted || len(res.Attempts) != 3 {
		t.Fatalf("result %s", mustJSON(t, res))
	}
	for i, a := range res.Attempts {
		if a.Attempt != i+1 || a.Reason != client.AttemptInvalidValue || len(a.Errors) == 0 || a.ErrorsTotal < len(a.Errors) {
			t.Fatalf("attempt %s", mustJSON(t, a))
		}
		for _, e := range a.Errors {
			if !strings.Contains(attemptSchema, `"`+e.Keyword+`"`) {
				t.Fatalf("attempt %d: keyword %q is not in the schema: %s", i+1, e.Keyword, mustJSON(t, a))
			}
		}
	}
}

// TestAttemptsCapped: a value with hundreds of errors is recorded with the
// first client.AttemptMaxErrors and the total, marked truncated; a path
// longer than 1,024 bytes is cut and marked.
func TestAttemptsCapped(t *testing.T) {
	t.Parallel()
	deep := `{"type":"integer"}`
	for range 5 {
		deep = `{"type":"object","additionalProperties":` + deep + `}`
	}
	schema := `{"type":"object","properties":{"deep":` + deep + `},"additionalProperties":{"type":"integer"}}`
	var many strings.Builder
	many.WriteString(`{`)
	for i := range 300 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `"p%d":"x"`, i)
	}
	many.WriteString(`}`)
	key := strings.Repeat("k", 250)
	long := `"x"`
	for range 5 {
		long = `{"` + key + `":` + long + `}`
	}
	script := &mockllm.Script{Steps: []mockllm.Step{
		{Value: json.RawMessage(many.String())},
		{Value: json.RawMessage(`{"deep":` + long + `}`)},
		{Value: json.RawMessage(many.String())},
	}}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	chat, req := create(t, c, schema)
	res := wait(t, c, req)
	if res.Status != client.OutputFailed || len(res.Attempts) != 3 {
		t.Fatalf("result %s", mustJSON(t, res))
	}
	for _, i := range []int{0, 2} {
		a := res.Attempts[i]
		if a.ErrorsTotal != 300 || !a.Truncated || len(a.Errors) != client.AttemptMaxErrors {
			t.Fatalf("attempt %d: %d errors of %d, truncated %v", i+1, len(a.Errors), a.ErrorsTotal, a.Truncated)
		}
		for _, e := range a.Errors {
			if e.Keyword != "type" || !strings.HasPrefix(e.InstancePath, "/p") {
				t.Fatalf("attempt %d: error %+v", i+1, e)
			}
		}
	}
	a := res.Attempts[1]
	if a.ErrorsTotal != 1 || a.Truncated || len(a.Errors) != 1 {
		t.Fatalf("attempt 2: %s", mustJSON(t, a))
	}
	full := "/deep" + strings.Repeat("/"+key, 5)
	if p := a.Errors[0].InstancePath; len(p) > 1024 || len(p) < 1000 || !strings.HasSuffix(p, "…") || !strings.HasPrefix(full, strings.TrimSuffix(p, "…")) {
		t.Fatalf("path %d bytes %q, want %q cut at 1,024 bytes", len(p), p, full)
	}
	if a.Errors[0].Keyword != "type" {
		t.Fatalf("attempt 2: %+v", a.Errors[0])
	}
	settled(t, env, chat, req, client.OutputFailed, client.CodeValidationExhausted)
}
