package runner_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

// Item 4 of issue 14, end to end: numbers jsonb expands. A schema with
// "maximum": 1e100 was admitted and every run then failed not_produced (the
// stored schema holds a 101-digit literal); the finalizer value [123e65]
// passed the first screen and failed the re-screen after storage. Now both
// are judged in jsonb's plain notation where they come in: the schema is a
// 400 naming the field, the value is an ordinary rejection the model
// repairs, and a number at the limit is published as jsonb renders it.
func TestNumbersJSONBExpands(t *testing.T) {
	t.Parallel()
	script := &mockllm.Script{Steps: []mockllm.Step{
		{Value: json.RawMessage(`[123e65]`)},
		{Value: json.RawMessage(`[1e63, 1.50e2]`)},
	}}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")

	_, err := c.CreateChat(t.Context(), client.CreateChatRequest{
		Content:        []client.MessagePart{client.TextPart("Count.")},
		ResponseFormat: structured(`{"type":"object","properties":{"n":{"type":"number","maximum":1e100}}}`),
	})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || len(ae.Body.Validations) != 1 ||
		ae.Body.Validations[0].Field != "response_format.json_schema.schema" ||
		!strings.Contains(ae.Body.Validations[0].Detail, "/properties/n/maximum") ||
		!strings.Contains(ae.Body.Validations[0].Detail, "plain decimal notation") {
		t.Fatalf("schema with 1e100: %v", err)
	}
	if n := providerCalls(env); n != 0 {
		t.Fatalf("%d provider calls for a refused schema", n)
	}

	chat, req := create(t, c, `{"type":"array","items":{"type":"number"}}`)
	res := wait(t, c, req)
	if res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v %+v", res, res.Error)
	}
	want := "[1" + strings.Repeat("0", 63) + ",150]"
	if string(res.Value) != want {
		t.Fatalf("published %s, want %s", res.Value, want)
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")
	reqs := env.Mock.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d provider calls, want 2", len(reqs))
	}
	// The model was told why [123e65] was not taken, at its pointer.
	var repair string
	for _, m := range reqs[1].Messages {
		if m.Role == "tool" {
			repair += m.Content
		}
	}
	if !strings.Contains(repair, "/0") || !strings.Contains(repair, "123e65 is 68 characters in plain decimal notation") {
		t.Fatalf("the model was told %q", repair)
	}
	var rejections int
	if err := env.Pool.QueryRow(t.Context(), `SELECT rejections FROM structured_requests WHERE request_id = $1`, req).Scan(&rejections); err != nil || rejections != 1 {
		t.Fatalf("rejections %d %v, want 1", rejections, err)
	}
}
