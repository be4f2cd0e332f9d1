package runner

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"charm.land/fantasy"
	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/notify"
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
	Err          error
}

// maxToolInputBytes caps the argument bytes of one tool call while they
// stream; a call beyond it is rejected without storing its arguments.
const maxToolInputBytes = 256<<10 + 1024

// streamStep makes one streaming provider call and accumulates its parts.
// On error or cancellation the parts produced so far are returned too.
func streamStep(ctx context.Context, lm fantasy.LanguageModel, call fantasy.Call, emit func(Delta)) stepResult {
	var res stepResult
	stream, err := lm.Stream(ctx, call)
	if err != nil {
		res.Err = err
		return res
	}
	var text, reasoning *jsonb.Part
	inputs := map[string]*strings.Builder{}
	oversized := map[string]bool{}
	names := map[string]string{}
	flush := func() {
		if text != nil {
			res.Parts = append(res.Parts, *text)
			text = nil
		}
		if reasoning != nil {
			res.Parts = append(res.Parts, *reasoning)
			reasoning = nil
		}
	}
	for part := range stream {
		switch part.Type {
		case fantasy.StreamPartTypeTextStart:
			flush()
			text = &jsonb.Part{Type: jsonb.PartText}
		case fantasy.StreamPartTypeTextDelta:
			if text == nil {
				flush()
				text = &jsonb.Part{Type: jsonb.PartText}
			}
			text.Text += part.Delta
			emit(Delta{Kind: "text", Text: part.Delta})
		case fantasy.StreamPartTypeTextEnd:
			flush()
		case fantasy.StreamPartTypeReasoningStart:
			flush()
			reasoning = &jsonb.Part{Type: jsonb.PartReasoning}
			if md := metadata(part.ProviderMetadata); md != nil {
				reasoning.ProviderMetadata = md
			}
		case fantasy.StreamPartTypeReasoningDelta:
			if reasoning == nil {
				flush()
				reasoning = &jsonb.Part{Type: jsonb.PartReasoning}
			}
			reasoning.Text += part.Delta
			if md := metadata(part.ProviderMetadata); md != nil {
				reasoning.ProviderMetadata = md
			}
			emit(Delta{Kind: "reasoning", Text: part.Delta})
		case fantasy.StreamPartTypeReasoningEnd:
			if reasoning != nil {
				if md := metadata(part.ProviderMetadata); md != nil {
					reasoning.ProviderMetadata = md
				}
			}
			flush()
		case fantasy.StreamPartTypeToolInputStart:
			flush()
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
			flush()
			p := jsonb.Part{Type: jsonb.PartToolCall, ToolCallID: part.ID, ToolName: part.ToolCallName,
				ProviderExecuted: part.ProviderExecuted, ProviderMetadata: metadata(part.ProviderMetadata)}
			input := part.ToolCallInput
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
			flush()
			res.Parts = append(res.Parts, jsonb.Part{Type: jsonb.PartSource, SourceID: part.ID, URL: part.URL, Title: part.Title})
		case fantasy.StreamPartTypeFinish:
			flush()
			res.FinishReason = part.FinishReason
			res.Usage = part.Usage
		case fantasy.StreamPartTypeError:
			flush()
			res.Err = part.Error
			if res.Err == nil {
				res.Err = errors.New("provider stream failed")
			}
		}
	}
	flush()
	if res.Err == nil && ctx.Err() != nil {
		res.Err = ctx.Err()
	}
	if res.Err == nil && res.FinishReason == "" {
		res.Err = fantasy.NewIncompleteStreamError()
	}
	return res
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
