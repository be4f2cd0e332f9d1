package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

// thirtyItems is a value of partialSchema with 30 items: mockllm sends
// its finalizer call in about 65 fragments.
func thirtyItems() json.RawMessage {
	var items []string
	for i := range 30 {
		items = append(items, fmt.Sprintf(`{"name":"item %d of the list","tags":["tag %d","second"]}`, i+1, i))
	}
	return json.RawMessage(`{"title":"Thirty items, streamed slowly","items":[` + strings.Join(items, ",") + `],"count":30,"ok":true}`)
}

// previewSeen is what one stream showed of a structured request.
type previewSeen struct {
	partials []client.StructuredOutputPartial
	args     string // the finalizer call's arguments, concatenated
	caughtUp bool   // a coalesced catch-up came first
	resets   int
	receipt  *client.StructuredOutput
}

// checkPreview reads evs (up to the receipt of req) and checks what a
// stream must show of a one-step structured turn however late it joined:
// the step's fragments from 1, in order, each once (the arguments are
// {"output":value}, as mockllm writes them); at least three
// partial values, each growing from the last, the last the receipt's; no
// preview_reset.
func checkPreview(t *testing.T, name string, evs []client.StreamEvent, req uuid.UUID, value json.RawMessage) previewSeen {
	t.Helper()
	var p previewSeen
	next := int64(1)
	for _, e := range evs {
		switch {
		case e.Part != nil:
			from := e.Part.Seq
			if e.Part.FromSeq > 0 {
				from = e.Part.FromSeq
			}
			if from != next || e.Part.Seq < from {
				t.Fatalf("%s: message_part %d..%d after %d", name, from, e.Part.Seq, next-1)
			}
			p.caughtUp = p.caughtUp || e.Part.FromSeq > 0 && next == from && from <= 2
			next = e.Part.Seq + 1
			if e.Part.Part.ToolName == runner.FinalizerName {
				p.args += e.Part.Part.ArgsDelta
			}
		case e.Partial != nil && e.Partial.RequestID == req:
			p.partials = append(p.partials, *e.Partial)
		case e.PreviewReset != nil && next > 1:
			p.resets++
		case e.Message != nil && e.Message.StructuredOutput != nil && e.Message.StructuredOutput.RequestID == req:
			p.receipt = e.Message.StructuredOutput
		}
	}
	if p.receipt == nil || p.receipt.Status != client.OutputSucceeded {
		t.Fatalf("%s: receipt %+v", name, p.receipt)
	}
	if p.resets > 0 {
		t.Fatalf("%s: %d preview_reset in a step it followed", name, p.resets)
	}
	if want := `{"output":` + string(value) + `}`; p.args != want {
		t.Fatalf("%s: arguments\n%s\nwant\n%s", name, p.args, want)
	}
	if len(p.partials) < 3 {
		t.Fatalf("%s: %d partials", name, len(p.partials))
	}
	var prev any
	for i, x := range p.partials {
		v := decodeAny(t, x.Value)
		if prev != nil && !httpapi.Extends(prev, v) {
			t.Fatalf("%s: partial %d %s does not grow from %v", name, i, x.Value, prev)
		}
		prev = v
	}
	if !reflect.DeepEqual(prev, decodeAny(t, p.receipt.Value)) {
		t.Fatalf("%s: last partial %s, receipt %s", name, p.partials[len(p.partials)-1].Value, p.receipt.Value)
	}
	return p
}

// chunks returns mockllm options whose BeforeChunk reports each chunk of
// a response as the mock is about to write it.
func chunks(o mockllm.Options) (mockllm.Options, <-chan int) {
	ch := make(chan int, 1024)
	o.BeforeChunk = func(_ context.Context, _ *mockllm.Request, n int) error {
		select {
		case ch <- n:
		default:
		}
		return nil
	}
	return o, ch
}

// TestLateStreamsGetTheWholePreview: streams opened 0.3 s, 1 s and 3 s
// into a finalizer call that writes 30 items over about 5 s — on the
// worker's replica and on another replica — each get the
// call's fragments from the first (a catch-up, then the live ones) and
// its partial values from the first. Joins are placed by the mock's chunk
// schedule (75 ms a chunk): chunk 4 is 0.3 s into the call.
func TestLateStreamsGetTheWholePreview(t *testing.T) {
	t.Parallel()
	api := testenv.New(t, testenv.Options{NoRunner: true})
	mo, chunk := chunks(mockllm.Options{Script: &mockllm.Script{Steps: []mockllm.Step{{Value: thirtyItems(), ChunkDelayMS: 75}}}})
	worker := testenv.Reopen(t, api, testenv.Options{NoRunner: true, Mock: mo})
	worker.StartRunner()
	ctx := t.Context()
	c := worker.Client("alice")
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("thirty items"), ResponseFormat: &client.ResponseFormat{
		Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(partialSchema)}}})
	if err != nil {
		t.Fatal(err)
	}
	req := *chat.Messages[0].StructuredOutputRequestID
	joins := []struct {
		name  string
		env   *testenv.Env
		chunk int
	}{{"0.3 s", worker, 4}, {"1 s", worker, 13}, {"3 s", worker, 40},
		{"0.3 s, other replica", api, 4}, {"1 s, other replica", api, 13}, {"3 s, other replica", api, 40}}
	streams := make([]*collector, len(joins))
	for joined := 0; joined < len(joins); {
		var n int
		select {
		case n = <-chunk:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		for i, j := range joins {
			if j.chunk == n {
				streams[i] = collect(t, j.env.Client("alice").Stream(ctx, chat.Chat.ID, 0))
				joined++
			}
		}
	}
	for i, j := range joins {
		p := checkPreview(t, j.name, streams[i].until(t, "the receipt", isReceipt(req)), req, thirtyItems())
		if !p.caughtUp {
			t.Fatalf("%s: no catch-up came first", j.name)
		}
		t.Logf("%s: %d partials", j.name, len(p.partials))
	}
}

// TestCreatedThenFollowedGetsEveryPartial: the documented flow — create
// the chat, then follow it with client.Partials — yields the partial
// values from the first, then the receipt, however long the stream took
// to connect (--chunk-delay 150ms).
func TestCreatedThenFollowedGetsEveryPartial(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{ChunkDelay: 150 * time.Millisecond,
		Script: &mockllm.Script{Steps: []mockllm.Step{{Value: thirtyItems()}}}}})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("thirty items"), ResponseFormat: &client.ResponseFormat{
		Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(partialSchema)}}})
	if err != nil {
		t.Fatal(err)
	}
	req := *chat.Messages[0].StructuredOutputRequestID
	type report struct {
		Items []struct{ Name string } `json:"items"`
	}
	var got []client.Partial[report]
	for p, err := range client.Partials[report](c.Stream(ctx, chat.Chat.ID, 0), req) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	last := got[len(got)-1]
	if last.Receipt == nil || last.Receipt.Status != client.OutputSucceeded || len(last.Value.Items) != 30 {
		t.Fatalf("last %+v", last)
	}
	partials := got[:len(got)-1]
	if len(partials) < 3 || !reflect.DeepEqual(decodeAny(t, partials[len(partials)-1].Event.Value), decodeAny(t, last.Receipt.Value)) {
		t.Fatalf("%d partials before the receipt", len(partials))
	}
	if n := len(partials[0].Value.Items); n > 1 {
		t.Logf("the first partial already has %d items: the stream caught up", n)
	}
}

// dropProxy forwards to target and, on the first connection to a chat's
// stream only, drops the connection (an abrupt end) after `after`
// message_part events, as a network failure would.
func dropProxy(t *testing.T, target string, after int) (*httptest.Server, *atomic.Int32, *atomic.Value) {
	var conns atomic.Int32
	var resumed atomic.Value // the Last-Event-ID of the second connection
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := conns.Add(1)
		if n == 2 {
			resumed.Store(r.Header.Get("Last-Event-ID"))
		}
		up, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), r.Body)
		if err != nil {
			t.Error(err)
			return
		}
		up.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(up)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		rd := bufio.NewReader(resp.Body)
		parts := 0
		for {
			line, err := rd.ReadString('\n')
			if _, werr := io.WriteString(w, line); werr != nil || err != nil {
				return
			}
			if strings.HasPrefix(line, "event: message_part") {
				parts++
			}
			if line == "\n" {
				w.(http.Flusher).Flush()
				if n == 1 && parts == after && strings.Contains(r.URL.Path, "/stream") {
					panic(http.ErrAbortHandler)
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &conns, &resumed
}

// TestResumedStreamGetsEveryFragmentOnce: a stream on another replica
// than the worker's loses its connection in the middle of the finalizer
// call; the Go client reconnects with Last-Event-ID, and the stream goes
// on after the last fragment it delivered: every fragment once, the
// arguments whole, the partials growing to the receipt's value.
func TestResumedStreamGetsEveryFragmentOnce(t *testing.T) {
	t.Parallel()
	api := testenv.New(t, testenv.Options{NoRunner: true})
	worker := testenv.Reopen(t, api, testenv.Options{NoRunner: true, Mock: mockllm.Options{
		Script: &mockllm.Script{Steps: []mockllm.Step{{Value: thirtyItems(), ChunkDelayMS: 40}}}}})
	proxy, conns, resumed := dropProxy(t, api.API.URL, 20)
	ctx := t.Context()
	c := client.New(proxy.URL, api.Token("alice"), nil)
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("thirty items"), ResponseFormat: &client.ResponseFormat{
		Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(partialSchema)}}})
	if err != nil {
		t.Fatal(err)
	}
	req := *chat.Messages[0].StructuredOutputRequestID
	conns.Store(0) // the create went through the proxy too
	s := collect(t, c.Stream(ctx, chat.Chat.ID, 0))
	s.until(t, "the initial status", func(e client.StreamEvent) bool { return e.Type == client.EventStatus })
	worker.StartRunner()
	evs := s.until(t, "the receipt", isReceipt(req))
	var twentieth string
	for parts, i := 0, 0; parts < 20; i++ {
		if evs[i].Part != nil {
			parts, twentieth = parts+1, evs[i].EventID
		}
	}
	if conns.Load() != 2 || resumed.Load() != twentieth || !strings.Contains(twentieth, ":") {
		t.Fatalf("%d connections; resumed with Last-Event-ID %q, the 20th fragment's id %q", conns.Load(), resumed.Load(), twentieth)
	}
	p := checkPreview(t, "resumed", evs, req, thirtyItems())
	t.Logf("%d partials; resumed with Last-Event-ID %q", len(p.partials), twentieth)
}
