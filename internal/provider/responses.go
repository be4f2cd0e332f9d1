package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"charm.land/fantasy"
	"charm.land/fantasy/providers/openai"
)

// Reasoning carried across steps on the OpenAI Responses API. fantasy
// always sends store:false, so the server keeps nothing between requests:
// a reasoning model's reasoning survives a tool step only if the request
// asks for include ["reasoning.encrypted_content"] (callOptions) and the
// next request sends the reasoning item back in its input, with that
// encrypted content, right before the items it led to. fantasy v0.41.2
// does neither half of the replay: its encoder skips reasoning parts, and
// its stream keeps the encrypted content of response.output_item.added (a
// placeholder issued before the model reasoned) rather than the one of
// response.output_item.done. responsesModel does both in chatd's layer:
//
//   - Stream patches each reasoning part's metadata with the encrypted
//     content of its output_item.done event, read on the wire by the
//     transport while fantasy reads the same stream;
//   - Stream and Generate put the prompt's reasoning items into the
//     request: the transport splices them into the JSON input fantasy
//     encoded, each before the first item that followed it in its
//     assistant message (a function_call, matched by call_id, or an
//     assistant message). Reasoning with nothing after it in its message
//     is not sent (the API refuses a reasoning item without its following
//     item).
type responsesModel struct {
	fantasy.LanguageModel
	// reasoning: the model is asked for its encrypted reasoning (see
	// encryptedReasoning); reasoning items are sent only to such a model
	// (a chat may have changed models).
	reasoning bool
}

type replayKey struct{}

// replay is one call's reasoning items to send and the reasoning items
// the response streamed.
type replay struct {
	inserts []insertion
	need    int // assistant items the input must have

	mu   sync.Mutex
	done map[string]string // reasoning item id → encrypted content of output_item.done
}

// insertion is reasoning items to put before the assistant item with
// ordinal before (counting the assistant message, function_call and
// item_reference items of the input in order).
type insertion struct {
	before int
	callID string // the function_call's call_id, "" for a message
	items  []json.RawMessage
}

// reasoningItem is the Responses input item for a stored reasoning part.
type reasoningItem struct {
	Type             string        `json:"type"`
	ID               string        `json:"id"`
	Summary          []summaryText `json:"summary"`
	EncryptedContent string        `json:"encrypted_content"`
}

type summaryText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func newReplay(prompt fantasy.Prompt) *replay {
	rp := &replay{done: map[string]string{}}
	for _, m := range prompt {
		if m.Role != fantasy.MessageRoleAssistant {
			continue
		}
		var pending []json.RawMessage
		emit := func(callID string) {
			if len(pending) > 0 {
				rp.inserts = append(rp.inserts, insertion{before: rp.need, callID: callID, items: pending})
				pending = nil
			}
			rp.need++
		}
		for _, p := range m.Content {
			switch p.GetType() {
			case fantasy.ContentTypeReasoning:
				md := openai.GetReasoningMetadata(p.Options())
				if md == nil || md.ItemID == "" || md.EncryptedContent == nil || *md.EncryptedContent == "" {
					continue
				}
				it := reasoningItem{Type: "reasoning", ID: md.ItemID, Summary: []summaryText{}, EncryptedContent: *md.EncryptedContent}
				for _, s := range md.Summary {
					if s != "" {
						it.Summary = append(it.Summary, summaryText{Type: "summary_text", Text: s})
					}
				}
				if b, err := json.Marshal(it); err == nil {
					pending = append(pending, b)
				}
			case fantasy.ContentTypeText:
				emit("")
			case fantasy.ContentTypeToolCall:
				tc, ok := fantasy.AsContentType[fantasy.ToolCallPart](p)
				if !ok || tc.ProviderExecuted {
					continue // with store:false fantasy sends no item for it
				}
				emit(tc.ToolCallID)
			}
		}
	}
	return rp
}

// event reads one server-sent event of the response.
func (rp *replay) event(data []byte) {
	if !bytes.Contains(data, []byte(`"response.output_item.done"`)) {
		return
	}
	var ev struct {
		Type string `json:"type"`
		Item struct {
			Type             string `json:"type"`
			ID               string `json:"id"`
			EncryptedContent string `json:"encrypted_content"`
		} `json:"item"`
	}
	if json.Unmarshal(data, &ev) != nil || ev.Type != "response.output_item.done" || ev.Item.Type != "reasoning" ||
		ev.Item.EncryptedContent == "" {
		return
	}
	rp.mu.Lock()
	rp.done[ev.Item.ID] = ev.Item.EncryptedContent
	rp.mu.Unlock()
}

func (rp *replay) encrypted(id string) (string, bool) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	ec, ok := rp.done[id]
	return ec, ok
}

// rewrite splices the reasoning items into the input array of a Responses
// request body; the rest of the body is kept byte for byte.
func (rp *replay) rewrite(body []byte) ([]byte, error) {
	if len(rp.inserts) == 0 {
		return body, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("the body is not a JSON object")
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, err
		}
		start := dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if key != "input" {
			continue
		}
		end := dec.InputOffset()
		open := bytes.IndexByte(body[start:end], '[')
		if open < 0 || raw[0] != '[' {
			return nil, errors.New("input is not an array")
		}
		out, err := rp.splice(raw)
		if err != nil {
			return nil, err
		}
		nb := make([]byte, 0, len(body)+len(out)-len(raw))
		nb = append(nb, body[:int(start)+open]...)
		nb = append(nb, out...)
		return append(nb, body[end:]...), nil
	}
	return nil, errors.New("no input in the body")
}

func (rp *replay) splice(raw json.RawMessage) ([]byte, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteByte('[')
	write := func(b []byte) {
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		out.Write(b)
	}
	ord, next := 0, 0
	for _, it := range items {
		var head struct {
			Type   string `json:"type"`
			Role   string `json:"role"`
			CallID string `json:"call_id"`
		}
		if err := json.Unmarshal(it, &head); err != nil {
			return nil, err
		}
		assistant := head.Type == "function_call" || head.Type == "item_reference" ||
			(head.Type == "" || head.Type == "message") && head.Role == "assistant"
		if assistant {
			if next < len(rp.inserts) && rp.inserts[next].before == ord {
				in := rp.inserts[next]
				if in.callID != "" && (head.Type != "function_call" || head.CallID != in.callID) {
					return nil, fmt.Errorf("assistant item %d is not the function_call %s", ord, in.callID)
				}
				for _, r := range in.items {
					write(r)
				}
				next++
			}
			ord++
		}
		write(it)
	}
	if ord != rp.need || next != len(rp.inserts) {
		return nil, fmt.Errorf("the input has %d assistant items, the prompt %d", ord, rp.need)
	}
	out.WriteByte(']')
	return out.Bytes(), nil
}

// Generate sends the prompt's reasoning items; the non-streamed response
// carries the final encrypted content, which fantasy reads.
func (m responsesModel) Generate(ctx context.Context, call fantasy.Call) (*fantasy.Response, error) {
	if !m.reasoning {
		return m.LanguageModel.Generate(ctx, call)
	}
	return m.LanguageModel.Generate(context.WithValue(ctx, replayKey{}, newReplay(call.Prompt)), call)
}

// Stream sends the prompt's reasoning items and gives each streamed
// reasoning part the encrypted content of its output_item.done event.
func (m responsesModel) Stream(ctx context.Context, call fantasy.Call) (fantasy.StreamResponse, error) {
	if !m.reasoning {
		return m.LanguageModel.Stream(ctx, call)
	}
	rp := newReplay(call.Prompt)
	s, err := m.LanguageModel.Stream(context.WithValue(ctx, replayKey{}, rp), call)
	if err != nil {
		return nil, err
	}
	return func(yield func(fantasy.StreamPart) bool) {
		for p := range s {
			if p.Type == fantasy.StreamPartTypeReasoningEnd {
				p.ProviderMetadata = rp.patch(p.ProviderMetadata)
			}
			if !yield(p) {
				return
			}
		}
	}, nil
}

// patch returns md with the reasoning item's final encrypted content (a
// copy; fantasy's own metadata is left alone).
func (rp *replay) patch(md fantasy.ProviderMetadata) fantasy.ProviderMetadata {
	r, ok := md[openai.Name].(*openai.ResponsesReasoningMetadata)
	if !ok || r == nil {
		return md
	}
	ec, ok := rp.encrypted(r.ItemID)
	if !ok {
		return md
	}
	c := *r
	c.EncryptedContent = &ec
	out := fantasy.ProviderMetadata{}
	for k, v := range md {
		out[k] = v
	}
	out[openai.Name] = &c
	return out
}

// encryptedReasoning says whether chatd asks a Responses model for its
// encrypted reasoning: when the configuration sets a reasoning option, or
// the name is one of OpenAI's reasoning families (o1, o3, o4, gpt-5 except
// the chat variants, codex). A model that does not reason would refuse
// the include with HTTP 400.
func encryptedReasoning(model, effort, summary string) bool {
	if effort != "" || summary != "" {
		return true
	}
	n := strings.ToLower(model)
	for _, p := range []string{"o1", "o3", "o4"} {
		if strings.HasPrefix(n, p) || strings.Contains(n, "-"+p) {
			return true
		}
	}
	return strings.Contains(n, "gpt-5") && !strings.Contains(n, "gpt-5-chat") || strings.Contains(n, "codex")
}
