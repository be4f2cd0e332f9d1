package client_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

type reportItem struct {
	Name string   `json:"name"`
	Tags []string `json:"tags"`
}

type report struct {
	Title string       `json:"title"`
	Items []reportItem `json:"items"`
	Count *int         `json:"count"`
}

const reportSchema = `{"type":"object","required":["title","items","count"],"additionalProperties":false,"properties":{
 "title":{"type":"string"},"count":{"type":"integer"},
 "items":{"type":"array","minItems":1,"items":{"type":"object","required":["name","tags"],"additionalProperties":false,
  "properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}}}}}}`

// TestPartials reads a structured request's partial values with the typed
// iterator: the model's first value lacks items and is rejected, its
// repair is streamed slowly; the iterator yields typed partials of both,
// marks the first of the repair as restarted, and ends with the receipt,
// whose value the last partial already showed.
func TestPartials(t *testing.T) {
	t.Parallel()
	opened := make(chan struct{})
	final := `{"title":"The Lord of the Rings, with a title long enough to stream in pieces","items":[{"name":"first \"one\"","tags":["a","b"]},` +
		`{"name":"second, with ünïcödé","tags":[]},{"name":"third","tags":["c"]}],"count":3}`
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{
		BeforeRespond: func(ctx context.Context, _ *mockllm.Request) error {
			select {
			case <-opened:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		Script: &mockllm.Script{Steps: []mockllm.Step{
			{Value: json.RawMessage(`{"title":"a first draft that forgets its items","count":1}`), ChunkDelayMS: 25},
			{Value: json.RawMessage(final), ChunkDelayMS: 25},
		}}}})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("report"),
		ResponseFormat: &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(reportSchema)}}})
	if err != nil {
		t.Fatal(err)
	}
	req := *chat.Messages[0].StructuredOutputRequestID
	s := c.Stream(ctx, chat.Chat.ID, 0)
	defer s.Close()
	if _, err := s.Next(); err != nil { // the stream is open: the model may answer
		t.Fatal(err)
	}
	close(opened)

	var got []client.Partial[report]
	for p, err := range client.Partials[report](s, req) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	last := got[len(got)-1]
	if last.Receipt == nil || last.Receipt.Status != client.OutputSucceeded {
		t.Fatalf("the iteration ended with %+v", last)
	}
	var want report
	if err := json.Unmarshal([]byte(final), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(last.Value, want) {
		t.Fatalf("receipt value %+v, want %+v", last.Value, want)
	}
	restart := -1
	for i, p := range got[:len(got)-1] {
		if p.Receipt != nil || p.Event.RequestID != req {
			t.Fatalf("partial %d: %+v", i, p)
		}
		if p.Restarted {
			restart = i
		}
	}
	if restart <= 0 {
		t.Fatalf("no restarted partial after the first call's (%d partials)", len(got)-1)
	}
	repair := got[restart : len(got)-1]
	if len(repair) < 2 {
		t.Fatalf("%d partials of the repair", len(repair))
	}
	for i := 1; i < len(repair); i++ {
		if !strings.HasPrefix(repair[i].Value.Title, repair[i-1].Value.Title) || len(repair[i].Value.Items) < len(repair[i-1].Value.Items) ||
			repair[i].Event.Seq <= repair[i-1].Event.Seq {
			t.Fatalf("partial %+v after %+v", repair[i], repair[i-1])
		}
	}
	if !reflect.DeepEqual(repair[len(repair)-1].Value, want) {
		t.Fatalf("last partial %+v, receipt %+v", repair[len(repair)-1].Value, want)
	}
	t.Logf("%d partials of the first call, %d of the repair", restart, len(repair))
}
