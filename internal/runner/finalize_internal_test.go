package runner

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/validate"
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
		rejectedCode                 jsonb.ArgsCode
		wantValue, wantValidation    bool
		code                         string // of the attempt's first error
	}{
		{name: "valid", finish: "tool-calls", args: `{"output":{"n":1}}`, wantValue: true},
		{name: "valid after stop", finish: "stop", args: `{"output":{"n":1}}`, wantValue: true},
		{name: "length", finish: "length", args: `{"output":{"n":1}}`, code: rejectIneligible},
		{name: "content filter", finish: "content-filter", args: `{"output":{"n":1}}`, code: rejectIneligible},
		{name: "interrupted", finish: "interrupted", args: `{"output":{"n":1}}`, code: rejectIneligible},
		{name: "error", finish: "error", args: `{"output":{"n":1}}`, code: rejectIneligible},
		{name: "oversized code", finish: "tool-calls", args: `{}`, rejected: argsOversized, rejectedCode: jsonb.ArgsTooLarge, code: "too_large"},
		{name: "unstorable code", finish: "tool-calls", args: `{}`, rejected: "anything", rejectedCode: jsonb.ArgsUnstorable, code: "unstorable"},
		// Markers stored before their code: classified from their words.
		{name: "rejected marker", finish: "tool-calls", args: `{}`, rejected: "too large", code: "invalid_json"},
		{name: "oversized marker", finish: "tool-calls", args: `{}`, rejected: argsOversized, code: "too_large"},
		{name: "not JSON marker", finish: "tool-calls", args: `{}`, rejected: argsNotJSON, code: "invalid_json"},
		{name: "scan marker", finish: "tool-calls", args: `{}`, rejected: argsUnacceptable + ` (/output/a: duplicate object key "a")`, code: "unstorable"},
		{name: "deep marker", finish: "tool-calls", args: `{}`, rejected: argsUnacceptable + ` (/output/a: nested deeper than 33 levels)`, code: "too_large"},
		{name: "no wrapper", finish: "tool-calls", args: `{"n":1}`, code: "arguments_shape"},
		{name: "extra key", finish: "tool-calls", args: `{"output":{"n":1},"x":1}`, code: "arguments_shape"},
		{name: "not an object", finish: "tool-calls", args: `[1]`, code: "arguments_shape"},
		{name: "duplicate key", finish: "tool-calls", args: `{"output":{"n":1},"output":{"n":2}}`, code: "unstorable"},
		{name: "huge exponent", finish: "tool-calls", args: `{"output":{"n":1e400}}`, code: "unstorable"},
		{name: "invalid value", finish: "tool-calls", args: `{"output":{"n":"one"}}`, wantValidation: true, code: "type"},
		{name: "null output", finish: "tool-calls", args: `{"output":null}`, wantValidation: true, code: "type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := call(tc.args)
			c.ArgsRejected, c.ArgsRejectedCode = tc.rejected, tc.rejectedCode
			res, value, kind, why := finalize(step(tc.finish), c, req)
			if tc.wantValue != (len(why.errors) == 0) {
				t.Fatalf("attempt errors %+v", why)
			}
			if !tc.wantValue && why.errors[0].Keyword != tc.code {
				t.Fatalf("attempt errors %+v, want code %s", why.errors, tc.code)
			}
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

// Screened arguments carry the code the finalizer reports, the same as
// the finalizer's own scan would give.
func TestScreenArgsCodes(t *testing.T) {
	t.Parallel()
	req := &store.Request{RequestID: uuid.New(), Name: "r", Schema: json.RawMessage(`{}`)}
	finished := "tool-calls"
	step := &parsed{row: store.Message{FinishReason: &finished}}
	for args, code := range map[string]string{
		`{"output":{"a":1,"a":2}}`: validate.CodeUnstorable,
		`{"output":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`: validate.CodeTooLarge,
	} {
		parts := []jsonb.Part{{Type: jsonb.PartToolCall, ToolCallID: "c", ToolName: FinalizerName, Args: json.RawMessage(args)}}
		_, want, _ := outputOf(parts[0].Args)
		screenArgs(parts, true)
		if string(parts[0].Args) != `{}` || parts[0].ArgsRejected == "" || string(parts[0].ArgsRejectedCode) != code || want != code {
			t.Fatalf("%s: screened to %+v, the scan says %s; want %s", args, parts[0], want, code)
		}
		if _, _, _, why := finalize(step, parts[0], req); why.errors[0].Keyword != code {
			t.Fatalf("%s: attempt errors %+v, want %s", args, why.errors, code)
		}
	}
}

// A step stored before calls carried their code still reads back and is
// answered with the code its reason implies.
func TestArgsRejectedWithoutCode(t *testing.T) {
	t.Parallel()
	row := `[{"type":"tool-call","tool_call_id":"c","tool_name":"` + FinalizerName + `","args":{},"args_rejected":"` + argsOversized + `"}]`
	parts, err := jsonb.ParseContent([]byte(row))
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 || parts[0].ArgsRejected != argsOversized || parts[0].ArgsRejectedCode != "" {
		t.Fatalf("parsed %+v", parts)
	}
	if code := argsCode(parts[0]); code != validate.CodeTooLarge {
		t.Fatalf("code %s, want %s", code, validate.CodeTooLarge)
	}
}

// The codes jsonb stores are the validator's, which attempts report.
func TestArgsCodesAreValidatorCodes(t *testing.T) {
	t.Parallel()
	for got, want := range map[jsonb.ArgsCode]string{
		jsonb.ArgsInvalidJSON: validate.CodeInvalidJSON, jsonb.ArgsTooLarge: validate.CodeTooLarge, jsonb.ArgsUnstorable: validate.CodeUnstorable,
	} {
		if string(got) != want {
			t.Errorf("jsonb %s, validate %s", got, want)
		}
	}
}

// The finalizer's feedback is sentences: what was wrong ends with a full
// stop before what to do next starts.
func TestFinalizeFeedbackSentences(t *testing.T) {
	t.Parallel()
	req := &store.Request{RequestID: uuid.New(), Name: "r",
		Schema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}
	finished := "tool-calls"
	step := &parsed{row: store.Message{FinishReason: &finished}}
	for _, args := range []string{`{"output":{"n":"one"}}`, `{"output":{}}`, `{"n":1}`, `[1]`} {
		res, _, _, _ := finalize(step, jsonb.Part{Type: jsonb.PartToolCall, ToolCallID: "c", ToolName: FinalizerName, Args: json.RawMessage(args)}, req)
		var text string
		if err := json.Unmarshal(res.Result, &text); err != nil {
			t.Fatal(err)
		}
		for _, next := range []string{" Fix ", " Call "} {
			before, _, ok := strings.Cut(text, next)
			if ok && !strings.HasSuffix(before, ".") && !strings.HasSuffix(before, "…") {
				t.Errorf("%s: two sentences run together: %q", args, text)
			}
		}
		if strings.Contains(text, "..") {
			t.Errorf("%s: a doubled full stop: %q", args, text)
		}
	}
}
