package runner

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"charm.land/fantasy"
	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/provider"
)

// Delta is a preview fragment (see notify.Delta).
type Delta = notify.Delta

// Preview receives deltas of steps in flight (for live streams);
// *notify.Relay is the implementation.
type Preview interface {
	Delta(chatID uuid.UUID, d Delta)
	// Flush says a step ended: publish what is queued.
	Flush()
}

type nopPreview struct{}

func (nopPreview) Delta(uuid.UUID, Delta) {}
func (nopPreview) Flush()                 {}

// stepResult is what one provider call produced.
type stepResult struct {
	Parts        []jsonb.Part
	FinishReason fantasy.FinishReason
	Usage        fantasy.Usage
	// Refused says the model refused (seen on the wire; see provider.Observe).
	Refused  bool
	Warnings []fantasy.CallWarning
	Err      error
}

// maxToolInputBytes caps the argument bytes of one tool call while they
// stream; a call beyond it is rejected without storing its arguments.
const maxToolInputBytes = 256<<10 + 1024

// streamStep makes one streaming provider call and accumulates its parts.
// On error or cancellation the parts produced so far are returned too.
//
// Text and reasoning parts are kept in the order they started and are
// matched to their deltas by stream id, per kind: providers interleave them
// (openaicompat closes reasoning only after the first text delta, with the
// same id "0"), and a reasoning end must not cut a text part in two. A
// reasoning part keeps the latest provider metadata its parts carried: the
// Anthropic signature (complete on reasoning_end) or the Responses
// reasoning item (id, summaries, encrypted content), which prompt.go hands
// back to fantasy as the ReasoningPart's ProviderOptions.
func streamStep(ctx context.Context, lm fantasy.LanguageModel, call fantasy.Call, emit func(Delta)) stepResult {
	var res stepResult
	stream, err := lm.Stream(ctx, call)
	if err != nil {
		res.Err = err
		return res
	}
	texts := map[string]int{}      // open text parts by stream id
	reasonings := map[string]int{} // open reasoning parts by stream id
	open := func(typ jsonb.PartType, m map[string]int, id string) int {
		res.Parts = append(res.Parts, jsonb.Part{Type: typ})
		m[id] = len(res.Parts) - 1
		return len(res.Parts) - 1
	}
	keep := func(i int, md fantasy.ProviderMetadata) {
		if b := metadata(md); b != nil {
			res.Parts[i].ProviderMetadata = b
		}
	}
	inputs := map[string]*strings.Builder{}
	oversized := map[string]bool{}
	names := map[string]string{}
	for part := range stream {
		switch part.Type {
		case fantasy.StreamPartTypeWarnings:
			res.Warnings = append(res.Warnings, part.Warnings...)
		case fantasy.StreamPartTypeTextStart:
			open(jsonb.PartText, texts, part.ID)
		case fantasy.StreamPartTypeTextDelta:
			i, ok := texts[part.ID]
			if !ok {
				i = open(jsonb.PartText, texts, part.ID)
			}
			res.Parts[i].Text += part.Delta
			emit(Delta{Kind: "text", Text: part.Delta})
		case fantasy.StreamPartTypeTextEnd:
			delete(texts, part.ID)
		case fantasy.StreamPartTypeReasoningStart:
			keep(open(jsonb.PartReasoning, reasonings, part.ID), part.ProviderMetadata)
		case fantasy.StreamPartTypeReasoningDelta:
			i, ok := reasonings[part.ID]
			if !ok {
				i = open(jsonb.PartReasoning, reasonings, part.ID)
			}
			res.Parts[i].Text += part.Delta
			keep(i, part.ProviderMetadata)
			if part.Delta != "" {
				emit(Delta{Kind: "reasoning", Text: part.Delta})
			}
		case fantasy.StreamPartTypeReasoningEnd:
			if i, ok := reasonings[part.ID]; ok {
				keep(i, part.ProviderMetadata)
				delete(reasonings, part.ID)
			}
		case fantasy.StreamPartTypeToolInputStart:
			names[part.ID] = part.ToolCallName
			inputs[part.ID] = &strings.Builder{}
			emit(Delta{Kind: "tool-input", ToolCallID: part.ID, ToolName: part.ToolCallName})
		case fantasy.StreamPartTypeToolInputDelta:
			// OpenAI puts the fragment in Delta, Anthropic in ToolCallInput.
			frag := part.Delta
			if frag == "" {
				frag = part.ToolCallInput
			}
			b := inputs[part.ID]
			if b == nil {
				b = &strings.Builder{}
				inputs[part.ID] = b
			}
			if b.Len()+len(frag) > maxToolInputBytes {
				oversized[part.ID] = true
				continue
			}
			b.WriteString(frag)
			emit(Delta{Kind: "tool-input", ToolCallID: part.ID, ToolName: names[part.ID], Text: frag})
		case fantasy.StreamPartTypeToolCall:
			p := jsonb.Part{Type: jsonb.PartToolCall, ToolCallID: part.ID, ToolName: part.ToolCallName,
				ProviderExecuted: part.ProviderExecuted, ProviderMetadata: metadata(part.ProviderMetadata)}
			input := part.ToolCallInput
			if b := inputs[part.ID]; b != nil && b.Len() > 0 && b.String() != input {
				// What the provider streamed counts: anthropic-sdk-go replaces
				// streamed arguments that are not JSON (a cut-off call) with
				// {}, which would look like a well-formed empty call.
				input = b.String()
			}
			switch {
			case oversized[part.ID] || len(input) > maxToolInputBytes:
				p.Args, p.ArgsRejected = json.RawMessage(`{}`), "the arguments exceeded the size limit"
			case !json.Valid([]byte(input)):
				p.Args, p.ArgsRejected = json.RawMessage(`{}`), "the arguments are not valid JSON"
			default:
				p.Args = json.RawMessage(input)
			}
			res.Parts = append(res.Parts, p)
		case fantasy.StreamPartTypeSource:
			res.Parts = append(res.Parts, jsonb.Part{Type: jsonb.PartSource, SourceID: part.ID, URL: part.URL, Title: part.Title})
		case fantasy.StreamPartTypeFinish:
			res.FinishReason = part.FinishReason
			res.Usage = part.Usage
		case fantasy.StreamPartTypeError:
			res.Err = part.Error
			if res.Err == nil {
				res.Err = errors.New("provider stream failed")
			}
		}
	}
	res.Parts = slices.DeleteFunc(res.Parts, func(p jsonb.Part) bool {
		// Empty text says nothing; empty reasoning without metadata cannot
		// be replayed (with metadata it is a redacted or encrypted block).
		return (p.Type == jsonb.PartText || p.Type == jsonb.PartReasoning) && p.Text == "" && len(p.ProviderMetadata) == 0
	})
	if res.Err == nil && ctx.Err() != nil {
		res.Err = ctx.Err()
	}
	if res.Err == nil && res.FinishReason == "" {
		res.Err = fantasy.NewIncompleteStreamError()
	}
	return res
}

// correct applies what the wire showed (provider.Observe) to a step that
// fantasy reported as finished: a stream cut before its terminal signal is
// an incomplete-stream error (retried like fantasy's own), a length or
// content-filter finish hidden behind tool-calls is restored, and a refusal
// is marked, its text kept as the step's text when fantasy dropped it.
func (res *stepResult) correct(v provider.Verdict) {
	if !v.Seen || res.Err != nil {
		return
	}
	if v.Incomplete {
		res.Err = fantasy.NewIncompleteStreamError()
		return
	}
	if v.FinishReason != "" {
		res.FinishReason = v.FinishReason
	}
	if !v.Refused {
		return
	}
	res.Refused = true
	if v.Refusal == "" {
		return
	}
	for _, p := range res.Parts {
		if p.Type == jsonb.PartText && strings.Contains(p.Text, v.Refusal) {
			return
		}
	}
	res.Parts = append(res.Parts, jsonb.Text(v.Refusal))
}

// metadata serialises provider metadata for replay; nil when empty.
func metadata(md fantasy.ProviderMetadata) json.RawMessage {
	if len(md) == 0 {
		return nil
	}
	b, err := json.Marshal(md)
	if err != nil || string(b) == "{}" || string(b) == "null" {
		return nil
	}
	return b
}
