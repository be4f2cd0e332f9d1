package provider

import (
	"bytes"
	"encoding/json"
	"fmt"

	"charm.land/fantasy"
	"charm.land/fantasy/providers/openai"
	"charm.land/fantasy/providers/openaicompat"
	openaisdk "github.com/openai/openai-go/v3"
)

// OpenRouter-style reasoning_details on Chat Completions (type
// openai-compatible). A gateway that fronts Anthropic sends the thinking
// text in delta.reasoning and, beside it, delta.reasoning_details: entries
// {type: reasoning.text|reasoning.encrypted|reasoning.summary, text,
// signature, data, summary, id, format, index} streamed in fragments, the
// signature last. fantasy's openaicompat provider keeps only the text and
// sends back reasoning_content, so the signature is lost and the upstream
// model cannot verify its own thinking on the next step. chatd's hooks wrap
// fantasy's: they merge the fragments, keep the merged entries as the
// reasoning part's provider metadata (ReasoningDetails, stored with the
// step), and put them back as reasoning_details on the assistant message
// of the next request, as received.

// TypeReasoningDetails is the fantasy provider-data type id of
// ReasoningDetails; reasoningDetailsKey is its key in a part's provider
// metadata and options.
const (
	TypeReasoningDetails = "chatd.openai-compat.reasoning_details"
	reasoningDetailsKey  = openaicompat.Name
)

// ReasoningDetails are the merged reasoning_details entries of one
// assistant step, each a JSON object as the server sent it (fragments
// concatenated).
type ReasoningDetails struct {
	Details []json.RawMessage `json:"details"`
}

func init() {
	fantasy.RegisterProviderType(TypeReasoningDetails, func(data []byte) (fantasy.ProviderOptionsData, error) {
		var v ReasoningDetails
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, err
		}
		return &v, nil
	})
}

// Options implements fantasy.ProviderOptionsData.
func (*ReasoningDetails) Options() {}

// MarshalJSON wraps the details in fantasy's typed envelope.
func (d ReasoningDetails) MarshalJSON() ([]byte, error) {
	type plain ReasoningDetails
	return fantasy.MarshalProviderType(TypeReasoningDetails, plain(d))
}

// UnmarshalJSON reads the inner data of the envelope.
func (d *ReasoningDetails) UnmarshalJSON(data []byte) error {
	type plain ReasoningDetails
	var p plain
	if err := fantasy.UnmarshalProviderType(data, &p); err != nil {
		return err
	}
	*d = ReasoningDetails(p)
	return nil
}

// concatFields are streamed in fragments; every other field of an entry is
// kept from the first fragment that has it.
var concatFields = []string{"text", "summary", "data", "signature"}

// detailsAcc merges streamed reasoning_details fragments: an entry is
// identified by its index and type, in the order entries first appear.
type detailsAcc struct {
	entries []map[string]json.RawMessage
}

func detailKey(e map[string]json.RawMessage) string {
	return string(e["index"]) + "\x00" + string(e["type"])
}

// add merges the fragments of one delta or message; it reports whether an
// entry got a signature or encrypted data (the point at which the stored
// metadata must be refreshed).
func (a *detailsAcc) add(frags []map[string]json.RawMessage) (sealed bool) {
	for _, f := range frags {
		var e map[string]json.RawMessage
		for _, x := range a.entries {
			if detailKey(x) == detailKey(f) {
				e = x
				break
			}
		}
		if e == nil {
			e = map[string]json.RawMessage{}
			a.entries = append(a.entries, e)
		}
		for k, v := range f {
			if isConcat(k) {
				var add string
				if json.Unmarshal(v, &add) != nil {
					continue
				}
				if add != "" && (k == "signature" || k == "data") {
					sealed = true
				}
				var have string
				_ = json.Unmarshal(e[k], &have)
				e[k], _ = json.Marshal(have + add)
				continue
			}
			if old, ok := e[k]; !ok || string(old) == "null" || string(old) == `""` {
				e[k] = v
			}
		}
	}
	return sealed
}

func isConcat(k string) bool {
	for _, c := range concatFields {
		if c == k {
			return true
		}
	}
	return false
}

// metadata is the accumulated entries as provider metadata (nil when none).
func (a *detailsAcc) metadata() fantasy.ProviderMetadata {
	if len(a.entries) == 0 {
		return nil
	}
	d := &ReasoningDetails{}
	for _, e := range a.entries {
		b, err := json.Marshal(e)
		if err != nil {
			continue
		}
		d.Details = append(d.Details, b)
	}
	return fantasy.ProviderMetadata{reasoningDetailsKey: d}
}

// parseDetails reads reasoning_details from a delta or message; entries
// that are not objects are dropped.
func parseDetails(raw string) []map[string]json.RawMessage {
	if raw == "" || !bytes.Contains([]byte(raw), []byte(`"reasoning_details"`)) {
		return nil
	}
	var m struct {
		Details []json.RawMessage `json:"reasoning_details"`
	}
	if json.Unmarshal([]byte(raw), &m) != nil {
		return nil
	}
	var out []map[string]json.RawMessage
	for _, d := range m.Details {
		var e map[string]json.RawMessage
		if json.Unmarshal(d, &e) == nil && e != nil {
			out = append(out, e)
		}
	}
	return out
}

// compatStreamCtx is the hooks' per-stream state, kept in fantasy's
// stream-extra context map.
const compatStreamCtx = "chatd_reasoning_details"

type compatStream struct {
	acc  detailsAcc
	open bool // a reasoning part is open, as chatd's step sees it
}

// compatStreamExtra wraps openaicompat.StreamExtraFunc. fantasy's hook
// closes the reasoning part at the first text or tool-call delta and opens
// another one if a later chunk carries a reasoning field (OpenRouter ends
// with "reasoning": null); once reasoning_details were seen, the part is
// kept open instead (chatd needs no reasoning end), so the whole step's
// reasoning stays one part whose metadata holds every entry. The metadata
// is attached when an entry is sealed (signature or encrypted data) and on
// the chunk with the finish reason, not on every text fragment, so that a
// long reasoning is not re-encoded at each delta.
func compatStreamExtra(chunk openaisdk.ChatCompletionChunk, yield func(fantasy.StreamPart) bool, ctx map[string]any) (map[string]any, bool) {
	st, _ := ctx[compatStreamCtx].(*compatStream)
	if st == nil {
		st = &compatStream{}
		ctx[compatStreamCtx] = st
	}
	attach := false
	finished := false
	for i, c := range chunk.Choices {
		if c.FinishReason != "" {
			finished = true
		}
		if i == 0 {
			if frags := parseDetails(c.Delta.RawJSON()); len(frags) > 0 {
				attach = st.acc.add(frags) || attach
			}
		}
	}
	if finished && len(st.acc.entries) > 0 {
		attach = true
	}
	attached := false
	filter := func(p fantasy.StreamPart) bool {
		switch p.Type {
		case fantasy.StreamPartTypeReasoningStart:
			if st.open {
				return true // already open: one part for the step
			}
			st.open = true
		case fantasy.StreamPartTypeReasoningDelta:
			st.open = true
		case fantasy.StreamPartTypeReasoningEnd:
			if len(st.acc.entries) > 0 {
				return true // the signature may still come
			}
			st.open = false
		default:
			return yield(p)
		}
		if attach && !attached && p.Type != fantasy.StreamPartTypeReasoningStart {
			p.ProviderMetadata, attached = st.acc.metadata(), true
		}
		return yield(p)
	}
	ctx, ok := openaicompat.StreamExtraFunc(chunk, filter, ctx)
	if !ok || !attach || attached {
		return ctx, ok
	}
	if !st.open {
		st.open = true
		if !yield(fantasy.StreamPart{Type: fantasy.StreamPartTypeReasoningStart, ID: "0"}) {
			return ctx, false
		}
	}
	return ctx, yield(fantasy.StreamPart{Type: fantasy.StreamPartTypeReasoningDelta, ID: "0", ProviderMetadata: st.acc.metadata()})
}

// compatExtraContent wraps openaicompat.ExtraContentFunc for the
// non-streaming call: the reasoning content gets the message's
// reasoning_details as metadata.
func compatExtraContent(choice openaisdk.ChatCompletionChoice) []fantasy.Content {
	content := openaicompat.ExtraContentFunc(choice)
	var acc detailsAcc
	acc.add(parseDetails(choice.Message.RawJSON()))
	md := acc.metadata()
	if md == nil {
		return content
	}
	for i, c := range content {
		if r, ok := c.(fantasy.ReasoningContent); ok {
			r.ProviderMetadata = md
			content[i] = r
			return content
		}
	}
	return append(content, fantasy.ReasoningContent{ProviderMetadata: md})
}

// compatToPrompt wraps openaicompat.ToPromptFunc: every assistant message
// whose reasoning parts carry ReasoningDetails gets them back as
// reasoning_details, beside fantasy's reasoning_content.
func compatToPrompt(prompt fantasy.Prompt, provider, model string) ([]openaisdk.ChatCompletionMessageParamUnion, []fantasy.CallWarning) {
	msgs, warnings := openaicompat.ToPromptFunc(prompt, provider, model)
	// fantasy emits one assistant message per prompt assistant message
	// that has a text or tool-call part (a lone text part included) and
	// drops the others; pair them in order.
	var details [][]json.RawMessage
	for _, m := range prompt {
		if m.Role != fantasy.MessageRoleAssistant {
			continue
		}
		visible := false
		var ds []json.RawMessage
		for _, p := range m.Content {
			switch p.GetType() {
			case fantasy.ContentTypeText, fantasy.ContentTypeToolCall:
				visible = true
			case fantasy.ContentTypeReasoning:
				if d, ok := p.Options()[reasoningDetailsKey].(*ReasoningDetails); ok {
					ds = append(ds, d.Details...)
				}
			}
		}
		if visible {
			details = append(details, ds)
		}
	}
	var out []*openaisdk.ChatCompletionAssistantMessageParam
	for i := range msgs {
		if msgs[i].OfAssistant != nil {
			out = append(out, msgs[i].OfAssistant)
		}
	}
	if len(out) != len(details) {
		return msgs, append(warnings, fantasy.CallWarning{Type: fantasy.CallWarningTypeOther,
			Message: fmt.Sprintf("chatd: reasoning_details not replayed: %d assistant messages for %d in the prompt", len(out), len(details))})
	}
	for i, a := range out {
		if len(details[i]) == 0 {
			continue
		}
		extra := map[string]any{}
		for k, v := range a.ExtraFields() {
			extra[k] = v
		}
		extra["reasoning_details"] = details[i]
		a.SetExtraFields(extra)
	}
	return msgs, warnings
}

// compatOptions are the language-model hooks chatd installs on every
// openai-compatible provider.
func compatOptions() openaicompat.Option {
	return openaicompat.WithLanguageModelOptions(
		openai.WithLanguageModelStreamExtraFunc(compatStreamExtra),
		openai.WithLanguageModelExtraContentFunc(compatExtraContent),
		openai.WithLanguageModelToPromptFunc(compatToPrompt),
	)
}
