package runner

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"charm.land/fantasy"
	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
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
	// Tokens is Usage as recorded: the figures the provider reported
	// (provider.StepUsage), set once the step is complete.
	Tokens client.Usage
	// Refused says the model refused (seen on the wire; see provider.Observe).
	Refused  bool
	Warnings []fantasy.CallWarning
	Err      error
	// Capped says the step was cut off at the output caps below; it ended
	// with finish reason length and what was complete by then.
	Capped bool
	// Model is the model the provider says answered (from the wire).
	Model string
}

// Caps on what one provider step may stream. A call's arguments beyond
// their cap are rejected without being stored; a step beyond the others is
// cut off, as if the model had reached its output limit: the stream is
// closed and the step keeps what was complete (text up to the cap, tool
// calls already finished) with finish reason length.
const (
	maxToolInputBytes = 256<<10 + 1024 // the arguments of one tool call
	maxStepTextBytes  = 1 << 20        // text and reasoning of one step
	maxStepBytes      = 4 << 20        // all of a step: text, reasoning, tool calls
)

// stepBudget counts a step's streamed bytes against the caps.
type stepBudget struct{ text, total int }

// take returns the part of s that fits (cut on a character boundary) and
// whether all of it did.
func (b *stepBudget) take(s string, text bool) (string, bool) {
	room := maxStepBytes - b.total
	if text {
		room = min(room, maxStepTextBytes-b.text)
	}
	if len(s) <= room {
		b.total += len(s)
		if text {
			b.text += len(s)
		}
		return s, true
	}
	room = max(room, 0)
	for room > 0 && !utf8.RuneStart(s[room]) {
		room--
	}
	b.total, b.text = maxStepBytes, maxStepTextBytes
	return s[:room], false
}

// callInput is a tool call whose arguments are streaming.
type callInput struct {
	name      string
	b         strings.Builder
	oversized bool
}

// streamStep makes one streaming provider call and accumulates its parts.
// On error or cancellation the parts produced so far are returned too.
func streamStep(ctx context.Context, lm fantasy.LanguageModel, call fantasy.Call, emit func(Delta)) stepResult {
	stream, err := lm.Stream(ctx, call)
	if err != nil {
		return stepResult{Err: err}
	}
	r := newStepReader(emit)
	for part := range stream {
		r.read(part)
		if r.res.Capped {
			// Stop reading (fantasy closes the response) and end the step
			// as a length finish with what is complete.
			r.res.FinishReason, r.res.Err = fantasy.FinishReasonLength, nil
			break
		}
	}
	return r.finish(ctx)
}

// stepReader accumulates the parts of one provider step as they stream.
//
// Text and reasoning parts are kept in the order they started and are
// matched to their deltas by stream id, per kind: providers interleave them
// (openaicompat closes reasoning only after the first text delta, with the
// same id "0"), and a reasoning end must not cut a text part in two. A
// reasoning part keeps the latest provider metadata its parts carried: the
// Anthropic signature (complete on reasoning_end) or the Responses
// reasoning item (id, summaries, encrypted content), which prompt.go hands
// back to fantasy as the ReasoningPart's ProviderOptions.
//
// Tool calls are matched to their streamed arguments by id in the order
// they started, so two calls a model gave the same id keep their own
// arguments; uniqueCallIDs then renames the later ones.
type stepReader struct {
	res        stepResult
	emit       func(Delta)
	budget     stepBudget
	texts      map[string]int           // open text parts by stream id
	reasonings map[string]int           // open reasoning parts by stream id
	bodies     map[int]*strings.Builder // text of text and reasoning parts, by part index
	inputs     map[string][]*callInput  // calls started and not finished, by id, oldest first
}

func newStepReader(emit func(Delta)) *stepReader {
	return &stepReader{emit: emit, texts: map[string]int{}, reasonings: map[string]int{},
		bodies: map[int]*strings.Builder{}, inputs: map[string][]*callInput{}}
}

// read takes one part of the stream.
func (r *stepReader) read(part fantasy.StreamPart) {
	switch part.Type {
	case fantasy.StreamPartTypeWarnings:
		r.res.Warnings = append(r.res.Warnings, part.Warnings...)
	case fantasy.StreamPartTypeTextStart:
		r.open(jsonb.PartText, r.texts, part.ID)
	case fantasy.StreamPartTypeTextDelta:
		r.textDelta(jsonb.PartText, r.texts, part)
	case fantasy.StreamPartTypeTextEnd:
		delete(r.texts, part.ID)
	case fantasy.StreamPartTypeReasoningStart:
		r.keep(r.open(jsonb.PartReasoning, r.reasonings, part.ID), part.ProviderMetadata)
	case fantasy.StreamPartTypeReasoningDelta:
		r.textDelta(jsonb.PartReasoning, r.reasonings, part)
	case fantasy.StreamPartTypeReasoningEnd:
		if i, ok := r.reasonings[part.ID]; ok {
			r.keep(i, part.ProviderMetadata)
			delete(r.reasonings, part.ID)
		}
	case fantasy.StreamPartTypeToolInputStart:
		_, fits := r.budget.take(part.ID+part.ToolCallName, false)
		r.started(part.ID, part.ToolCallName)
		r.emit(Delta{Kind: "tool-input", ToolCallID: part.ID, ToolName: part.ToolCallName})
		r.res.Capped = !fits
	case fantasy.StreamPartTypeToolInputDelta:
		r.toolInputDelta(part)
	case fantasy.StreamPartTypeToolCall:
		r.toolCall(part)
	case fantasy.StreamPartTypeToolResult:
		r.toolResult(part)
	case fantasy.StreamPartTypeSource:
		r.add(jsonb.Part{Type: jsonb.PartSource, SourceID: part.ID, URL: part.URL, Title: part.Title}, part.ID+part.URL+part.Title)
	case fantasy.StreamPartTypeFinish:
		r.res.FinishReason = part.FinishReason
		r.res.Usage = part.Usage
	case fantasy.StreamPartTypeError:
		r.res.Err = part.Error
		if r.res.Err == nil {
			r.res.Err = errors.New("provider stream failed")
		}
	}
}

// open starts a text or reasoning part with stream id id.
func (r *stepReader) open(typ jsonb.PartType, m map[string]int, id string) int {
	r.res.Parts = append(r.res.Parts, jsonb.Part{Type: typ})
	m[id] = len(r.res.Parts) - 1
	return len(r.res.Parts) - 1
}

// keep records a reasoning part's latest provider metadata.
func (r *stepReader) keep(i int, md fantasy.ProviderMetadata) {
	if b := metadata(md); b != nil {
		r.res.Parts[i].ProviderMetadata = b
	}
}

// textDelta appends a delta of text or reasoning to its part (opened when
// the provider sent no start) and previews it, within the step's caps.
func (r *stepReader) textDelta(typ jsonb.PartType, open map[string]int, part fantasy.StreamPart) {
	i, ok := open[part.ID]
	if !ok {
		i = r.open(typ, open, part.ID)
	}
	d, fits := r.budget.take(part.Delta, true)
	b := r.bodies[i]
	if b == nil {
		b = &strings.Builder{}
		r.bodies[i] = b
	}
	b.WriteString(d)
	if typ == jsonb.PartReasoning {
		r.keep(i, part.ProviderMetadata)
	}
	if d != "" {
		r.emit(Delta{Kind: string(typ), Text: d})
	}
	r.res.Capped = !fits
}

// started notes a tool call whose arguments will stream.
func (r *stepReader) started(id, name string) *callInput {
	c := &callInput{name: name}
	r.inputs[id] = append(r.inputs[id], c)
	return c
}

// toolInputDelta appends a fragment of a call's arguments, up to the
// call's cap, and previews it.
func (r *stepReader) toolInputDelta(part fantasy.StreamPart) {
	// OpenAI puts the fragment in Delta, Anthropic in ToolCallInput.
	frag := part.Delta
	if frag == "" {
		frag = part.ToolCallInput
	}
	if _, fits := r.budget.take(frag, false); !fits {
		r.res.Capped = true
		return
	}
	var c *callInput
	if q := r.inputs[part.ID]; len(q) > 0 {
		c = q[len(q)-1] // the latest call started with this id
	} else {
		c = r.started(part.ID, "")
	}
	if c.oversized || c.b.Len()+len(frag) > maxToolInputBytes {
		c.oversized = true
		return
	}
	c.b.WriteString(frag)
	r.emit(Delta{Kind: "tool-input", ToolCallID: part.ID, ToolName: c.name, Text: frag})
}

// toolCall adds a finished call with the arguments it streamed, or the
// placeholder of arguments too large or not JSON.
func (r *stepReader) toolCall(part fantasy.StreamPart) {
	p := jsonb.Part{Type: jsonb.PartToolCall, ToolCallID: part.ID, ToolName: part.ToolCallName,
		ProviderExecuted: part.ProviderExecuted, ProviderMetadata: metadata(part.ProviderMetadata)}
	input := part.ToolCallInput
	var c *callInput
	if q := r.inputs[part.ID]; len(q) > 0 {
		c, r.inputs[part.ID] = q[0], q[1:] // calls finish in the order they started
	}
	if c != nil && c.b.Len() > 0 && c.b.String() != input {
		// What the provider streamed counts: anthropic-sdk-go replaces
		// streamed arguments that are not JSON (a cut-off call) with
		// {}, which would look like a well-formed empty call.
		input = c.b.String()
	}
	switch {
	case c != nil && c.oversized || len(input) > maxToolInputBytes:
		rejectArgs(&p, jsonb.ArgsTooLarge, argsOversized)
	case part.ProviderExecuted && input == "":
		// The provider ran it and sent no input (Responses'
		// web_search_call): nothing to screen, nothing to run.
		p.Args = json.RawMessage(`{}`)
	case !json.Valid([]byte(input)):
		rejectArgs(&p, jsonb.ArgsInvalidJSON, argsNotJSON)
	default:
		p.Args = json.RawMessage(input)
	}
	r.add(p, part.ID+part.ToolCallName+string(p.ProviderMetadata))
}

// toolResult keeps the result of a provider-executed tool (web search)
// with the step, its provider data for the replay, which the provider
// requires next to the call (Anthropic refuses a server_tool_use without
// its web_search_tool_result).
func (r *stepReader) toolResult(part fantasy.StreamPart) {
	if !part.ProviderExecuted {
		return
	}
	p := jsonb.Part{Type: jsonb.PartToolResult, ToolCallID: part.ID, ToolName: part.ToolCallName, ProviderExecuted: true,
		ProviderMetadata: metadata(part.ProviderMetadata)}
	r.add(p, part.ID+part.ToolCallName+string(p.ProviderMetadata))
}

// add appends a part whose size is that of counted, unless it is beyond
// the step's caps.
func (r *stepReader) add(p jsonb.Part, counted string) {
	if _, fits := r.budget.take(counted, false); !fits {
		r.res.Capped = true
		return
	}
	r.res.Parts = append(r.res.Parts, p)
}

// finish completes the parts and says how the step ended: a stream that
// stopped without a finish is incomplete.
func (r *stepReader) finish(ctx context.Context) stepResult {
	res := r.res
	for i, b := range r.bodies {
		res.Parts[i].Text = b.String()
	}
	res.Parts = slices.DeleteFunc(res.Parts, func(p jsonb.Part) bool {
		// Empty text says nothing; empty reasoning without metadata cannot
		// be replayed (with metadata it is a redacted or encrypted block).
		return (p.Type == jsonb.PartText || p.Type == jsonb.PartReasoning) && p.Text == "" && len(p.ProviderMetadata) == 0
	})
	uniqueCallIDs(res.Parts)
	if res.Capped {
		return res
	}
	if res.Err == nil && ctx.Err() != nil {
		res.Err = ctx.Err()
	}
	if res.Err == nil && res.FinishReason == "" {
		res.Err = fantasy.NewIncompleteStreamError()
	}
	return res
}

// maxCallIDBytes bounds a stored tool-call id; a longer one is replaced.
const maxCallIDBytes = 128

// uniqueCallIDs gives every tool call of a step its own id, deterministically:
// the first call keeps an id, a later call with the same id (or an empty or
// over-long one) gets "<id>_<n>" or "call_<n>", n counting from 2 (or from
// the call's position) until the id is free. Results, client submissions and
// the provider replay all pair calls by id, so duplicates would pair a result
// with the wrong call, run a tool with another call's arguments, or leave a
// call that can never be answered.
func uniqueCallIDs(parts []jsonb.Part) {
	seen := map[string]bool{}
	for i, p := range parts {
		if p.Type != jsonb.PartToolCall {
			continue
		}
		id := p.ToolCallID
		if id != "" && len(id) <= maxCallIDBytes && !seen[id] {
			seen[id] = true
			continue
		}
		base := id
		if base == "" || len(base) > maxCallIDBytes-8 {
			base = "call"
		}
		for n := 2; ; n++ {
			if c := base + "_" + strconv.Itoa(n); !seen[c] {
				parts[i].ToolCallID = c
				seen[c] = true
				break
			}
		}
	}
}

// correct applies what the wire showed (provider.Observe) to a step that
// fantasy reported as finished: a stream cut before its terminal signal is
// an incomplete-stream error (retried like fantasy's own), a length or
// content-filter finish hidden behind tool-calls is restored, and a refusal
// is marked, its text kept as the step's text when fantasy dropped it.
func (res *stepResult) correct(v provider.Verdict) {
	if !v.Seen || res.Err != nil || res.Capped {
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
