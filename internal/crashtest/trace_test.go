package crashtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mockllm"
)

// otlpReceiver is an OTLP/HTTP trace receiver built on the official proto
// packages: it decodes each ExportTraceServiceRequest the servers'
// exporters POST to /v1/traces and keeps the spans, each with its
// resource's service.instance.id (the process that recorded it).
type otlpReceiver struct {
	mu    sync.Mutex
	spans []recvSpan
}

type recvSpan struct {
	*tracepb.Span
	Instance string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
		http.Error(w, "want a protobuf POST to /v1/traces", http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		inst := attr(rs.GetResource().GetAttributes(), "service.instance.id")
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				o.spans = append(o.spans, recvSpan{Span: sp, Instance: inst})
			}
		}
	}
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

// trace returns the spans received with trace id id.
func (o *otlpReceiver) trace(id string) []recvSpan {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []recvSpan
	for _, s := range o.spans {
		if hex.EncodeToString(s.TraceId) == id {
			out = append(out, s)
		}
	}
	return out
}

func attr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			switch v := kv.Value.Value.(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue
			case *commonpb.AnyValue_IntValue:
				return fmt.Sprint(v.IntValue)
			case *commonpb.AnyValue_ArrayValue:
				var parts []string
				for _, x := range v.ArrayValue.Values {
					parts = append(parts, x.GetStringValue())
				}
				return strings.Join(parts, ",")
			}
		}
	}
	return ""
}

// withHeader adds a header to every request of a client.
type withHeader struct {
	name, value string
}

func (h withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

// TestTraceAcrossReplicas follows one request through every seam: two server
// processes on one database export traces (OTLP/HTTP) to a receiver. A
// client in its own trace creates a structured chat on A (API only,
// sending traceparent); B's worker runs the turn: a read_file call, an
// invalid value and its repair, the valid value; a webhook delivers the
// receipt. The test checks one trace from the client's span to the
// webhook's POST, the span tree and the GenAI attributes, and that no
// content is in any span unless the operator opted in.
func TestTraceAcrossReplicas(t *testing.T) {
	t.Parallel()
	for _, capture := range []bool{false, true} {
		t.Run(fmt.Sprintf("capture=%v", capture), func(t *testing.T) {
			t.Parallel()
			traceAcrossReplicas(t, capture)
		})
	}
}

func traceAcrossReplicas(t *testing.T, capture bool) {
	db := dbtest.NewURL(t)
	const value = `{"title":"make test","count":1,"tags":["ci"]}`
	mock := mockllm.New(mockllm.Options{
		StepFor: readRepairAnswer(value),
	})
	mockSrv := httptest.NewServer(mock)
	t.Cleanup(mockSrv.Close)
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)
	hooks := make(chan http.Header, 4)
	hookSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hooks <- r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hookSrv.Close)

	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_TRACES_SAMPLER=always_on",
		fmt.Sprintf("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=%v", capture)}
	ws := workspace(t)
	cfgA, cfgB := writeConfig(t, mockSrv.URL, ws, "a"), writeConfig(t, mockSrv.URL, ws, "b")
	withWebhook(t, cfgA, hookSrv.URL)
	withWebhook(t, cfgB, hookSrv.URL)
	a := startServer(t, serverOpts{Name: "a", DB: db, Config: cfgA, Workers: 0, Env: env})
	token := newToken(t, db, "alice")
	startServer(t, serverOpts{Name: "b", DB: db, Config: cfgB, Workers: 1, Env: env})

	// The client's own span: the parent of A's server span.
	c, traceID, clientSpan := tracedClient(t, a.URL, token)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	created, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("[c1 m1] Report."), ResponseFormat: structured()})
	if err != nil {
		t.Fatal(err)
	}
	req := *created.Messages[0].StructuredOutputRequestID
	res, err := c.WaitStructuredOutput(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != client.OutputSucceeded || len(res.Attempts) != 1 {
		t.Fatalf("result %+v, want succeeded after one repair", res)
	}
	if res.TraceID != traceID {
		t.Fatalf("lookup trace_id %q, want the client's %s", res.TraceID, traceID)
	}
	select {
	case h := <-hooks:
		if tp := h.Get("traceparent"); !strings.HasPrefix(tp, "00-"+traceID+"-") {
			t.Fatalf("webhook POST traceparent %q, want trace %s", tp, traceID)
		}
	case <-ctx.Done():
		t.Fatal("no webhook delivery")
	}

	var spans []recvSpan
	byName := map[string][]recvSpan{}
	poll(t, 30*time.Second, "the trace's spans", func() bool {
		spans = recv.trace(traceID)
		byName = map[string][]recvSpan{}
		for _, s := range spans {
			byName[s.Name] = append(byName[s.Name], s)
		}
		return len(byName["POST /api/v1/chats"]) == 1 && len(byName["invoke_agent chatd"]) == 1 && len(byName["chat mock-1"]) == 3 &&
			len(byName["execute_tool read_file"]) == 1 && len(byName["execute_tool coder_structured_output"]) == 2 &&
			len(byName["chatd.receipt.commit"]) == 1 && len(byName["POST webhook crash"]) >= 1
	})
	one := func(name string) recvSpan { return byName[name][0] }
	id := func(s recvSpan) string { return hex.EncodeToString(s.SpanId) }
	parentOf := func(s recvSpan) string { return hex.EncodeToString(s.ParentSpanId) }

	server, turn := one("POST /api/v1/chats"), one("invoke_agent chatd")
	if parentOf(server) != clientSpan || server.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("server span: parent %s kind %v, want the client's span %s, server", parentOf(server), server.Kind, clientSpan)
	}
	if parentOf(turn) != id(server) {
		t.Errorf("turn's parent %s, want the admission's server span %s", parentOf(turn), id(server))
	}
	if server.Instance == turn.Instance || server.Instance == "" {
		t.Errorf("admission and turn both recorded by instance %q: the turn should run on replica b", turn.Instance)
	}
	if got := attr(turn.Attributes, "gen_ai.operation.name"); got != "invoke_agent" {
		t.Errorf("turn gen_ai.operation.name %q", got)
	}
	for _, s := range byName["chat mock-1"] {
		if parentOf(s) != id(turn) || s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("chat span's parent %s kind %v, want the turn %s, client", parentOf(s), s.Kind, id(turn))
		}
		for k, want := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "mock",
			"gen_ai.request.model": "mock-1", "gen_ai.response.model": "mock-1"} {
			if got := attr(s.Attributes, k); got != want {
				t.Errorf("chat span %s = %q, want %q", k, got, want)
			}
		}
		for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons"} {
			if attr(s.Attributes, k) == "" {
				t.Errorf("chat span has no %s", k)
			}
		}
	}
	tool := one("execute_tool read_file")
	if parentOf(tool) != id(turn) || attr(tool.Attributes, "gen_ai.tool.name") != "read_file" ||
		attr(tool.Attributes, "gen_ai.operation.name") != "execute_tool" || attr(tool.Attributes, "gen_ai.tool.call.id") == "" {
		t.Errorf("tool span: parent %s, attributes %v", parentOf(tool), tool.Attributes)
	}
	var outcomes []string
	for _, s := range byName["execute_tool coder_structured_output"] {
		for _, ev := range s.Events {
			outcomes = append(outcomes, ev.Name)
		}
	}
	slices.Sort(outcomes)
	if want := []string{"chatd.validation.accepted", "chatd.validation.rejected"}; !slices.Equal(outcomes, want) {
		t.Errorf("finalizer events %v, want %v", outcomes, want)
	}
	if commit := one("chatd.receipt.commit"); parentOf(commit) != id(turn) {
		t.Errorf("receipt commit's parent %s, want the turn", parentOf(commit))
	}
	if hook := one("POST webhook crash"); hook.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("webhook span kind %v", hook.Kind)
	}

	// Content: the value, the tool's arguments and its result appear in
	// no span unless the operator opted in, and then they do.
	content := map[string]bool{}
	for _, s := range spans {
		for _, kv := range s.Attributes {
			v := fmt.Sprint(kv.Value)
			if strings.Contains(v, "make test") || strings.Contains(v, "notes.txt") {
				content[kv.Key] = true
			}
		}
		for _, ev := range s.Events {
			for _, kv := range ev.Attributes {
				if v := fmt.Sprint(kv.Value); strings.Contains(v, "make test") || strings.Contains(v, "notes.txt") {
					t.Errorf("event %s of %s carries content: %s", ev.Name, s.Name, kv.Key)
				}
			}
		}
	}
	if !capture && len(content) > 0 {
		t.Errorf("content in spans without the opt-in: %v", content)
	}
	if capture {
		for _, k := range []string{"gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.output.messages"} {
			if !content[k] {
				t.Errorf("opted in, but no %s carries the content (have %v)", k, content)
			}
		}
	}
	if t.Failed() {
		for _, s := range spans {
			t.Logf("span %s %s parent %s instance %s", s.Name, id(s), parentOf(s), s.Instance)
		}
	}
}

// tracedClient is a client whose every request carries a traceparent of a
// new trace: the trace id and the client's span id.
func tracedClient(t *testing.T, url, token string) (c *client.Client, traceID, clientSpan string) {
	traceID, clientSpan = randHex(t, 16), randHex(t, 8)
	c = client.New(url, token, &http.Client{Timeout: 60 * time.Second,
		Transport: withHeader{"traceparent", "00-" + traceID + "-" + clientSpan + "-01"}})
	return c, traceID, clientSpan
}

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestTraceContinuesAfterKill: the worker running a traced request's turn
// is SIGKILLed during its provider call; another process takes the turn
// over after the lease and finishes it. The trace of the request (its
// client's) ends where the killed process stopped — none of its unended
// spans is exported — and the turn that finishes is in the same trace, a
// child of the admission's span, recorded by the process that took over.
func TestTraceContinuesAfterKill(t *testing.T) {
	t.Parallel()
	db := dbtest.NewURL(t)
	held := make(chan struct{}, 1)
	mock := mockllm.New(mockllm.Options{
		BeforeRespond: func(ctx context.Context, r *mockllm.Request) error {
			if r.Header.Get(procHeader) != "b" {
				return nil
			}
			select {
			case held <- struct{}{}:
			default:
			}
			<-ctx.Done() // never answered: b is killed
			return ctx.Err()
		},
		StepFor: func(*mockllm.Request) (mockllm.Step, bool) {
			return mockllm.Step{Value: json.RawMessage(`{"title":"t","count":1}`)}, true
		},
	})
	mockSrv := httptest.NewServer(mock)
	t.Cleanup(mockSrv.Close)
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_BSP_SCHEDULE_DELAY=50"}

	a := startServer(t, serverOpts{Name: "a", DB: db, Config: writeConfig(t, mockSrv.URL, "", "a"), Workers: 0, Env: env})
	token := newToken(t, db, "alice")
	b := startServer(t, serverOpts{Name: "b", DB: db, Config: writeConfig(t, mockSrv.URL, "", "b"), Workers: 1, Env: env})

	c, traceID, _ := tracedClient(t, a.URL, token)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	created, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("[c1 m1] Report."), ResponseFormat: structured()})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("b never called the provider")
	}
	b.kill()
	startServer(t, serverOpts{Name: "c", DB: db, Config: writeConfig(t, mockSrv.URL, "", "c"), Workers: 1, Env: env})
	res, err := c.WaitStructuredOutput(ctx, *created.Messages[0].StructuredOutputRequestID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != client.OutputSucceeded || res.TraceID != traceID {
		t.Fatalf("result %+v, want succeeded in trace %s", res, traceID)
	}

	var server, turns, steps []recvSpan
	poll(t, 30*time.Second, "the turn's spans", func() bool {
		server, turns, steps = nil, nil, nil
		for _, s := range recv.trace(traceID) {
			switch s.Name {
			case "POST /api/v1/chats":
				server = append(server, s)
			case "invoke_agent chatd":
				turns = append(turns, s)
			case "chat mock-1":
				steps = append(steps, s)
			}
		}
		return len(server) == 1 && len(turns) >= 1 && len(steps) >= 1
	})
	for _, s := range append(turns, steps...) {
		if s.Instance == server[0].Instance {
			t.Errorf("%s recorded by the admitting process", s.Name)
		}
	}
	if len(turns) != 1 || hex.EncodeToString(turns[0].ParentSpanId) != hex.EncodeToString(server[0].SpanId) {
		t.Fatalf("%d turn spans (parent %x), want one, the child of the admission's span %x", len(turns), turns[0].ParentSpanId, server[0].SpanId)
	}
	if len(steps) != 1 || hex.EncodeToString(steps[0].ParentSpanId) != hex.EncodeToString(turns[0].SpanId) {
		t.Fatalf("%d step spans, want the surviving process's one, in its turn", len(steps))
	}
}
