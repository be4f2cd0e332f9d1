package runner

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/store"
)

// A finalizer call can only yield a candidate from a step that ended
// normally, with well-formed arguments and a value the schema accepts.
func TestFinalizeEligibility(t *testing.T) {
	t.Parallel()
	req := &store.Request{RequestID: uuid.New(), Name: "r",
		Schema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}
	call := func(args string) jsonb.Part {
		return jsonb.Part{Type: jsonb.PartToolCall, ToolCallID: "c1", ToolName: FinalizerName, Args: json.RawMessage(args)}
	}
	step := func(finish string) *parsed { return &parsed{row: store.Message{FinishReason: &finish}} }
	for _, tc := range []struct {
		name, finish, args, rejected string
		wantValue, wantValidation    bool
	}{
		{name: "valid", finish: "tool-calls", args: `{"output":{"n":1}}`, wantValue: true},
		{name: "valid after stop", finish: "stop", args: `{"output":{"n":1}}`, wantValue: true},
		{name: "length", finish: "length", args: `{"output":{"n":1}}`},
		{name: "content filter", finish: "content-filter", args: `{"output":{"n":1}}`},
		{name: "interrupted", finish: "interrupted", args: `{"output":{"n":1}}`},
		{name: "error", finish: "error", args: `{"output":{"n":1}}`},
		{name: "rejected marker", finish: "tool-calls", args: `{}`, rejected: "too large"},
		{name: "no wrapper", finish: "tool-calls", args: `{"n":1}`},
		{name: "extra key", finish: "tool-calls", args: `{"output":{"n":1},"x":1}`},
		{name: "duplicate key", finish: "tool-calls", args: `{"output":{"n":1},"output":{"n":2}}`},
		{name: "huge exponent", finish: "tool-calls", args: `{"output":{"n":1e400}}`},
		{name: "invalid value", finish: "tool-calls", args: `{"output":{"n":"one"}}`, wantValidation: true},
		{name: "null output", finish: "tool-calls", args: `{"output":null}`, wantValidation: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := call(tc.args)
			c.ArgsRejected = tc.rejected
			res, value, kind := finalize(step(tc.finish), c, req)
			validation := kind == rejectValue
			if (value == nil) != (kind != "") {
				t.Fatalf("value %s with rejection kind %q", value, kind)
			}
			if (value != nil) != tc.wantValue || validation != tc.wantValidation {
				t.Fatalf("value %s validation %v; result %s", value, validation, res.Result)
			}
			if tc.wantValue == res.IsError {
				t.Fatalf("is_error %v for %s", res.IsError, res.Result)
			}
			if !tc.wantValue && !strings.Contains(string(res.Result), FinalizerName) && !tc.wantValidation {
				t.Fatalf("feedback does not say what to do: %s", res.Result)
			}
		})
	}
}
