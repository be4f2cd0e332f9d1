package httpapi_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

const partialSchema = `{"type":"object","required":["title","items","count","ok"],"additionalProperties":false,"properties":{
 "title":{"type":"string"},"count":{"type":"integer"},"ok":{"type":"boolean"},
 "items":{"type":"array","minItems":1,"items":{"type":"object","required":["name","tags"],"additionalProperties":false,
  "properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}}}}}}`

// The repair's value: nested, with escapes, escaped and raw multi-byte
// characters and a surrogate pair, long enough for mockllm to send it in
// about 25 fragments.
const partialValue = `{"title":"\u00dcn\u00efc\u00f6d\u00e9 \"quoted\" \\ back\nslash — 日本語 \ud83d\ude00 😀, then a longer tail of plain words to stream",` +
	`"items":[{"name":"a\tb/\/c","tags":["first tag","second tag","third tag"]},{"name":"emoji 👍🏽","tags":[]},` +
	`{"name":"last item of the list","tags":["x","y","z"]}],"count":42,"ok":true}`

// TestStructuredOutputPartialsEndToEnd: the model first writes a value
// the schema rejects, then its repair, each finalizer call streamed slowly
// in many fragments. The stream shows partials of the first call, a
// preview_reset, then at least two partials of the repair, each extending
// the last, the last one equal to the receipt's value, before the receipt.
func TestStructuredOutputPartialsEndToEnd(t *testing.T) {
	t.Parallel()
	opened := make(chan struct{})
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{
		// The model answers once the stream is open, so that it sees every call from its start.
		BeforeRespond: func(ctx context.Context, _ *mockllm.Request) error {
			select {
			case <-opened:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		Script: &mockllm.Script{Steps: []mockllm.Step{
			{Value: json.RawMessage(`{"title":"a first draft, which forgets its items and says count in words","count":"three","ok":false}`), ChunkDelayMS: 25},
			{Value: json.RawMessage(partialValue), ChunkDelayMS: 25},
		}}}})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("report"), ResponseFormat: &client.ResponseFormat{Type: "json_schema",
		JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(partialSchema)}}})
	if err != nil {
		t.Fatal(err)
	}
	req := *chat.Messages[0].StructuredOutputRequestID
	s := collect(t, c.Stream(ctx, chat.Chat.ID, 0))
	evs := s.until(t, "the first event", func(client.StreamEvent) bool { return true })
	close(opened)
	evs = append(evs, s.until(t, "the receipt", isReceipt(req))...)
	receipt := evs[len(evs)-1].Message.StructuredOutput
	if receipt.Status != client.OutputSucceeded {
		t.Fatalf("receipt %+v", receipt)
	}

	reset := -1
	var first, repair []client.StructuredOutputPartial
	for i, e := range evs {
		switch e.Type {
		case client.EventPreviewReset:
			if len(first) > 0 {
				reset = i
				repair = nil
			}
		case client.EventStructuredOutputPartial:
			if e.Partial.RequestID != req {
				t.Fatalf("partial of request %s, want %s", e.Partial.RequestID, req)
			}
			if reset < 0 {
				first = append(first, *e.Partial)
			} else {
				repair = append(repair, *e.Partial)
			}
		}
	}
	if len(first) == 0 || reset < 0 || len(repair) < 2 {
		t.Fatalf("%d partials of the first call, reset at %d, %d partials of the repair: %s", len(first), reset, len(repair), kinds(evs))
	}
	t.Logf("%d partials of the first call, %d of the repair", len(first), len(repair))
	pr := evs[reset].PreviewReset
	var prev any
	for i, p := range repair {
		if p.HistoryVersion != pr.HistoryVersion || p.GenerationAttempt != pr.GenerationAttempt {
			t.Fatalf("partial %d of generation %d/%d after a reset to %d/%d", i, p.HistoryVersion, p.GenerationAttempt, pr.HistoryVersion, pr.GenerationAttempt)
		}
		v := decodeAny(t, p.Value)
		if prev != nil && (!httpapi.Extends(prev, v) || reflect.DeepEqual(prev, v)) {
			t.Fatalf("partial %d %s does not grow from %v", i, p.Value, prev)
		}
		prev = v
	}
	if want := decodeAny(t, receipt.Value); !reflect.DeepEqual(prev, want) {
		t.Fatalf("last partial %s, receipt %s", repair[len(repair)-1].Value, receipt.Value)
	}
	if p := first[len(first)-1]; reflect.DeepEqual(decodeAny(t, p.Value), decodeAny(t, receipt.Value)) {
		t.Fatalf("the first call's partial %s is the receipt's value", p.Value)
	}
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %s: %v", b, err)
	}
	return v
}
