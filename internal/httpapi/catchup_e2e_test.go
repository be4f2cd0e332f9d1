package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// switchProxy serves a chat's stream from first until it has passed cut
// message_part events after the last message event, then drops the
// connection (a network cut); the reconnection waits until the mock wrote
// gap more chunks (the stream was away while fragments went out), then
// goes to second.
func switchProxy(t *testing.T, first, second string, cut, gap int, chunk <-chan int) (*httptest.Server, *atomic.Value) {
	var conns atomic.Int32
	var resumed atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target, n := first, int32(0)
		if strings.Contains(r.URL.Path, "/stream") {
			n = conns.Add(1)
		}
		if n == 2 {
			resumed.Store(r.Header.Get("Last-Event-ID"))
			for range gap {
				select {
				case <-chunk:
				case <-r.Context().Done():
					return
				}
			}
			target = second
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
			switch {
			case strings.HasPrefix(line, "event: message_part"):
				parts++
			case strings.HasPrefix(line, "event: message\n"):
				parts = 0
			}
			if line == "\n" {
				w.(http.Flusher).Flush()
				if n == 1 && parts == cut {
					for len(chunk) > 0 { // only what goes out while the stream is away counts
						<-chunk
					}
					panic(http.ErrAbortHandler)
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &resumed
}

// checkResumed checks what a resumed stream delivered up to the receipt of
// req: no event id twice, each generation's fragments from 1, in order,
// each once, a preview_reset only where a new generation starts, and the
// finalizer's arguments whole.
func checkResumed(t *testing.T, evs []client.StreamEvent, req uuid.UUID, value json.RawMessage) {
	t.Helper()
	seen := map[string]bool{}
	type gen struct {
		h int64
		a int32
	}
	var cur gen
	var next int64 = 1
	var args string
	for _, e := range evs {
		if e.EventID != "" && seen[e.EventID] {
			t.Fatalf("event id %q came twice: %s", e.EventID, kinds(evs))
		}
		seen[e.EventID] = e.EventID != ""
		switch {
		case e.PreviewReset != nil:
			g := gen{e.PreviewReset.HistoryVersion, e.PreviewReset.GenerationAttempt}
			if g == cur && next > 1 {
				t.Fatalf("preview_reset after fragment %d of generation %v", next-1, g)
			}
			cur, next = g, 1
		case e.Part != nil:
			g := gen{e.Part.HistoryVersion, e.Part.GenerationAttempt}
			if g != cur {
				cur, next = g, 1
			}
			from := e.Part.Seq
			if e.Part.FromSeq > 0 {
				from = e.Part.FromSeq
			}
			if from != next {
				t.Fatalf("generation %v: message_part %d..%d after %d (event id %s): %s", g, from, e.Part.Seq, next-1, e.EventID, kinds(evs))
			}
			next = e.Part.Seq + 1
			if e.Part.Part.ToolName == runner.FinalizerName {
				args += e.Part.Part.ArgsDelta
			}
		}
	}
	if want := `{"output":` + string(value) + `}`; args != want {
		t.Fatalf("arguments\n%s\nwant\n%s", args, want)
	}
	if !isReceipt(req)(evs[len(evs)-1]) {
		t.Fatalf("no receipt: %s", kinds(evs))
	}
}

// TestResumedOnTheOtherReplicaAfterAGap: a stream cut in the middle of
// the finalizer call reconnects with Last-Event-ID on the other replica
// (the worker's, or the one without the worker) after some fragments went
// out: it never gets an event id it already had, and gets every fragment
// after its cursor once, with no preview_reset. The finalizer call is the
// turn's second step (after a read_file call) or its only one.
func TestResumedOnTheOtherReplicaAfterAGap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		fromAPI   bool // the stream starts on the replica without the worker
		tool      bool // a read_file step comes first
		cut, gaps int
		chunked   bool // the mock sends the call in 8 chunks 250 ms apart
	}{{"chunked, from the worker's replica", false, true, 26, 1, true}, {"chunked, to the worker's replica", true, true, 26, 1, true},
		{"from the worker's replica", false, false, 26, 3, false}, {"to the worker's replica", true, false, 26, 3, false},
		{"from the worker's replica, after a tool step", false, true, 26, 3, false}, {"to the worker's replica, after a tool step", true, true, 26, 3, false},
		{"from the worker's replica, long gap", false, true, 20, 12, false}, {"to the worker's replica, long gap", true, true, 20, 12, false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("thirty items\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			steps := []mockllm.Step{{Value: thirtyItems(), ChunkDelayMS: 30}}
			var mo mockllm.Options
			if c.chunked {
				steps[0].ChunkDelayMS = 250
				mo.StreamChunks = 8
			}
			if c.tool {
				steps = append([]mockllm.Step{{Text: "Looking.", ToolCalls: []mockllm.ToolCall{{Name: "read_file", Arguments: `{"path":"notes.txt"}`}}}}, steps...)
			}
			api := testenv.New(t, testenv.Options{NoRunner: true, Workspace: dir})
			mo.Script = &mockllm.Script{Steps: steps}
			mo, chunk := chunks(mo)
			worker := testenv.Reopen(t, api, testenv.Options{NoRunner: true, Workspace: dir, Mock: mo})
			first, second := worker.API.URL, api.API.URL
			if c.fromAPI {
				first, second = second, first
			}
			proxy, resumed := switchProxy(t, first, second, c.cut, c.gaps, chunk)
			ctx := t.Context()
			cl := client.New(proxy.URL, api.Token("alice"), nil)
			chat, err := cl.CreateChat(ctx, client.CreateChatRequest{Content: text("thirty items"), ResponseFormat: &client.ResponseFormat{
				Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(partialSchema)}}})
			if err != nil {
				t.Fatal(err)
			}
			req := *chat.Messages[0].StructuredOutputRequestID
			s := collect(t, cl.Stream(ctx, chat.Chat.ID, 0))
			s.until(t, "the initial status", func(e client.StreamEvent) bool { return e.Type == client.EventStatus })
			worker.StartRunner()
			evs := s.until(t, "the receipt", isReceipt(req))
			checkResumed(t, evs, req, thirtyItems())
			t.Logf("resumed with Last-Event-ID %q: %s", resumed.Load(), kinds(evs))
		})
	}
}
