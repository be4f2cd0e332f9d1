package runner

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"charm.land/fantasy"
	"charm.land/fantasy/providers/anthropic"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/provider"
)

// scriptedLM streams fixed parts.
type scriptedLM struct {
	fantasy.LanguageModel
	parts []fantasy.StreamPart
}

func (m scriptedLM) Stream(context.Context, fantasy.Call) (fantasy.StreamResponse, error) {
	return func(yield func(fantasy.StreamPart) bool) {
		for _, p := range m.parts {
			if !yield(p) {
				return
			}
		}
	}, nil
}

func TestStreamStepKeepsPartsApart(t *testing.T) {
	t.Parallel()
	sig := fantasy.ProviderMetadata{anthropic.Name: &anthropic.ReasoningOptionMetadata{Signature: "sig-full"}}
	partial := fantasy.ProviderMetadata{anthropic.Name: &anthropic.ReasoningOptionMetadata{Signature: "sig-"}}
	lm := scriptedLM{parts: []fantasy.StreamPart{
		// openaicompat: reasoning ends only after the first text delta, both with id "0".
		{Type: fantasy.StreamPartTypeReasoningStart, ID: "0"},
		{Type: fantasy.StreamPartTypeReasoningDelta, ID: "0", Delta: "think"},
		{Type: fantasy.StreamPartTypeTextStart, ID: "0"},
		{Type: fantasy.StreamPartTypeTextDelta, ID: "0", Delta: "Hel"},
		{Type: fantasy.StreamPartTypeReasoningEnd, ID: "0"},
		{Type: fantasy.StreamPartTypeTextDelta, ID: "0", Delta: "lo"},
		{Type: fantasy.StreamPartTypeTextEnd, ID: "0"},
		// Anthropic: a signature delta, then the full signature on the end.
		{Type: fantasy.StreamPartTypeReasoningStart, ID: "2"},
		{Type: fantasy.StreamPartTypeReasoningDelta, ID: "2", Delta: "more"},
		{Type: fantasy.StreamPartTypeReasoningDelta, ID: "2", ProviderMetadata: partial},
		{Type: fantasy.StreamPartTypeReasoningEnd, ID: "2", ProviderMetadata: sig},
		// An empty text block says nothing.
		{Type: fantasy.StreamPartTypeTextStart, ID: "3"},
		{Type: fantasy.StreamPartTypeTextEnd, ID: "3"},
		{Type: fantasy.StreamPartTypeToolCall, ID: "c1", ToolCallName: "f", ToolCallInput: `{"a":1}`},
		{Type: fantasy.StreamPartTypeWarnings, Warnings: []fantasy.CallWarning{{Type: fantasy.CallWarningTypeOther, Message: "w"}}},
		{Type: fantasy.StreamPartTypeFinish, FinishReason: fantasy.FinishReasonToolCalls},
	}}
	res := streamStep(context.Background(), lm, fantasy.Call{}, func(Delta) {})
	if res.Err != nil || len(res.Warnings) != 1 {
		t.Fatalf("err %v warnings %v", res.Err, res.Warnings)
	}
	want := []jsonb.PartType{jsonb.PartReasoning, jsonb.PartText, jsonb.PartReasoning, jsonb.PartToolCall}
	if len(res.Parts) != len(want) {
		t.Fatalf("parts %+v", res.Parts)
	}
	for i, p := range res.Parts {
		if p.Type != want[i] {
			t.Fatalf("part %d is %s: %+v", i, p.Type, res.Parts)
		}
	}
	if res.Parts[0].Text != "think" || res.Parts[1].Text != "Hello" || res.Parts[2].Text != "more" {
		t.Errorf("texts %+v", res.Parts)
	}
	// The stored metadata turns back into the ReasoningPart options
	// fantasy's Anthropic encoder reads the signature from.
	mp := messagePart(client.RoleAssistant, res.Parts[2])
	rp, ok := mp.(fantasy.ReasoningPart)
	if md := anthropic.GetReasoningMetadata(rp.ProviderOptions); !ok || md == nil || md.Signature != "sig-full" {
		t.Errorf("replayed reasoning %+v from %s", mp, res.Parts[2].ProviderMetadata)
	}
}

// The arguments are the bytes streamed, not a client library's repair.
func TestStreamStepKeepsStreamedArguments(t *testing.T) {
	t.Parallel()
	lm := scriptedLM{parts: []fantasy.StreamPart{
		{Type: fantasy.StreamPartTypeToolInputStart, ID: "t1", ToolCallName: FinalizerName},
		{Type: fantasy.StreamPartTypeToolInputDelta, ID: "t1", ToolCallInput: `{"output":{"command":`},
		{Type: fantasy.StreamPartTypeToolCall, ID: "t1", ToolCallName: FinalizerName, ToolCallInput: `{}`},
		{Type: fantasy.StreamPartTypeToolInputStart, ID: "t2", ToolCallName: "list_files"},
		{Type: fantasy.StreamPartTypeToolCall, ID: "t2", ToolCallName: "list_files", ToolCallInput: `{}`},
		{Type: fantasy.StreamPartTypeFinish, FinishReason: fantasy.FinishReasonToolCalls},
	}}
	res := streamStep(context.Background(), lm, fantasy.Call{}, func(Delta) {})
	if len(res.Parts) != 2 || res.Parts[0].ArgsRejected == "" || res.Parts[0].ArgsRejectedCode != jsonb.ArgsInvalidJSON || string(res.Parts[0].Args) != `{}` ||
		res.Parts[1].ArgsRejected != "" || string(res.Parts[1].Args) != `{}` {
		t.Fatalf("parts %+v", res.Parts)
	}
}

func TestCorrect(t *testing.T) {
	t.Parallel()
	call := jsonb.Part{Type: jsonb.PartToolCall, ToolCallID: "c", ToolName: FinalizerName, Args: json.RawMessage(`{"output":1}`)}
	base := func() stepResult {
		return stepResult{Parts: []jsonb.Part{call}, FinishReason: fantasy.FinishReasonToolCalls}
	}
	r := base()
	r.correct(provider.Verdict{Seen: true, FinishReason: fantasy.FinishReasonLength})
	if r.FinishReason != fantasy.FinishReasonLength || r.Err != nil {
		t.Errorf("length: %+v", r)
	}
	r = base()
	r.correct(provider.Verdict{Seen: true, Incomplete: true})
	if r.Err == nil {
		t.Errorf("incomplete: %+v", r)
	}
	r = stepResult{FinishReason: fantasy.FinishReasonStop}
	r.correct(provider.Verdict{Seen: true, Refused: true, Refusal: "No."})
	if !r.Refused || len(r.Parts) != 1 || r.Parts[0].Text != "No." || finishReason(r) != "refusal" {
		t.Errorf("refusal: %+v", r)
	}
	r = base()
	r.correct(provider.Verdict{})
	if r.FinishReason != fantasy.FinishReasonToolCalls || r.Err != nil || r.Refused {
		t.Errorf("unobserved: %+v", r)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		h    map[string]string
		want time.Duration
	}{
		{map[string]string{"Retry-After": "2"}, 2 * time.Second},
		{map[string]string{"retry-after": "0.5"}, 500 * time.Millisecond},
		{map[string]string{"Retry-After-Ms": "1500", "Retry-After": "1"}, 1500 * time.Millisecond},
		{map[string]string{"Retry-After": now.Add(3 * time.Second).Format(http.TimeFormat)}, 3 * time.Second},
		{map[string]string{"Retry-After": now.Add(-time.Second).Format(http.TimeFormat)}, 0},
		{map[string]string{"Retry-After": "86400"}, 5 * time.Minute},
		{map[string]string{"Retry-After": "soon"}, 0},
		{nil, 0},
	} {
		if got := retryAfter(tc.h, now); got != tc.want {
			t.Errorf("retryAfter(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
}

func TestProviderFailureNamesNoDetail(t *testing.T) {
	t.Parallel()
	for _, status := range []int{0, 400, 401, 403, 404, 413, 429, 500, 529} {
		msg := providerFailure(status)
		if msg == "" || len(msg) > 100 {
			t.Errorf("%d: %q", status, msg)
		}
	}
}

// countingLM streams text deltas forever and counts what it yielded.
type countingLM struct {
	fantasy.LanguageModel
	delta   string
	yielded *int
}

func (m countingLM) Stream(context.Context, fantasy.Call) (fantasy.StreamResponse, error) {
	return func(yield func(fantasy.StreamPart) bool) {
		for {
			*m.yielded += len(m.delta)
			if !yield(fantasy.StreamPart{Type: fantasy.StreamPartTypeTextDelta, ID: "0", Delta: m.delta}) {
				return
			}
		}
	}, nil
}

func TestStreamStepCutsOffAtTheCaps(t *testing.T) {
	t.Parallel()
	n := 0
	res := streamStep(t.Context(), countingLM{delta: "ab€", yielded: &n}, fantasy.Call{}, func(Delta) {})
	if res.Err != nil || !res.Capped || res.FinishReason != fantasy.FinishReasonLength || len(res.Parts) != 1 {
		t.Fatalf("err %v capped %v finish %q parts %d", res.Err, res.Capped, res.FinishReason, len(res.Parts))
	}
	text := res.Parts[0].Text
	if len(text) > maxStepTextBytes || len(text) < maxStepTextBytes-4 || !utf8.ValidString(text) {
		t.Fatalf("kept %d bytes (valid UTF-8: %v)", len(text), utf8.ValidString(text))
	}
	if n > maxStepTextBytes+5 {
		t.Fatalf("read %d bytes from the provider after the cap", n)
	}
	// A wire observation that saw no terminal event (the stream was cut by
	// us) does not turn the cut into a retried incomplete stream.
	res.correct(provider.Verdict{Seen: true, Incomplete: true})
	if res.Err != nil {
		t.Fatalf("a capped step became %v", res.Err)
	}
}

func TestStreamStepSeparatesDuplicateCallIDs(t *testing.T) {
	t.Parallel()
	// Chat Completions through fantasy: two calls (indices 0 and 1) with one
	// id; their ToolCall parts come at the end, in index order.
	lm := scriptedLM{parts: []fantasy.StreamPart{
		{Type: fantasy.StreamPartTypeToolInputStart, ID: "x", ToolCallName: "f"},
		{Type: fantasy.StreamPartTypeToolInputDelta, ID: "x", Delta: `{"a":1}`},
		{Type: fantasy.StreamPartTypeToolInputEnd, ID: "x"},
		{Type: fantasy.StreamPartTypeToolInputStart, ID: "x", ToolCallName: "g"},
		{Type: fantasy.StreamPartTypeToolInputDelta, ID: "x", Delta: `{"b":2}`},
		{Type: fantasy.StreamPartTypeToolInputEnd, ID: "x"},
		{Type: fantasy.StreamPartTypeToolInputStart, ID: "", ToolCallName: "h"},
		{Type: fantasy.StreamPartTypeToolInputEnd, ID: ""},
		{Type: fantasy.StreamPartTypeToolCall, ID: "x", ToolCallName: "f", ToolCallInput: `{"a":1}`},
		{Type: fantasy.StreamPartTypeToolCall, ID: "x", ToolCallName: "g", ToolCallInput: `{"b":2}`},
		{Type: fantasy.StreamPartTypeToolCall, ID: "x_2", ToolCallName: "k", ToolCallInput: `{}`},
		{Type: fantasy.StreamPartTypeToolCall, ID: "", ToolCallName: "h", ToolCallInput: `{}`},
		{Type: fantasy.StreamPartTypeFinish, FinishReason: fantasy.FinishReasonToolCalls},
	}}
	res := streamStep(t.Context(), lm, fantasy.Call{}, func(Delta) {})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var got []string
	for _, p := range res.Parts {
		got = append(got, p.ToolCallID+" "+p.ToolName+" "+string(p.Args))
	}
	want := []string{`x f {"a":1}`, `x_2 g {"b":2}`, `x_2_2 k {}`, `call_2 h {}`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("calls %q, want %q", got, want)
	}
}
