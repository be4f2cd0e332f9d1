package runner_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

// cassetteStream returns the body of the first recorded answer of one of
// fantasy's provider cassettes (go-vcr YAML: the body is a block scalar
// under response), read from the module chatd builds with.
func cassetteStream(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "charm.land/fantasy").Output()
	if err != nil {
		t.Fatalf("locating fantasy's module: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "providertests", "testdata", name, "stream.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "response:" {
			start = i
			break
		}
	}
	for i := start + 1; start >= 0 && i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "body: |+" {
			continue
		}
		indent := len(lines[i+1]) - len(strings.TrimLeft(lines[i+1], " "))
		var b strings.Builder
		for _, l := range lines[i+1:] {
			if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, strings.Repeat(" ", indent)) {
				break
			}
			b.WriteString(strings.TrimPrefix(l, strings.Repeat(" ", indent)) + "\n")
		}
		return b.String()
	}
	t.Fatalf("no response body in %s", name)
	return ""
}

// sse renders server-sent events.
func sse(events ...[2]string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("event: " + e[0] + "\ndata: " + e[1] + "\n\n")
	}
	return b.String()
}

// spliceBefore inserts extra before the first event named at in stream.
func spliceBefore(t *testing.T, stream, at, extra string) string {
	t.Helper()
	i := strings.Index(stream, "event: "+at+"\n")
	if i < 0 {
		t.Fatalf("no %s event in the recording", at)
	}
	return stream[:i] + extra + stream[i:]
}

// recordedFirst answers the first provider call with a recorded stream
// and passes the others to the mock, keeping their bodies.
type recordedFirst struct {
	stream string
	mu     sync.Mutex
	calls  int
	bodies [][]byte
}

func (r *recordedFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.calls++
	first := r.calls == 1
	r.mu.Unlock()
	if first {
		return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req,
			Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(r.stream))}, nil
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, body)
	r.mu.Unlock()
	req.Body = io.NopCloser(bytes.NewReader(body))
	return http.DefaultTransport.RoundTrip(req)
}

const finalizerArgs = `{"output":{"command":"make web"}}`

// A message that ran a provider-executed tool (web search,
// which cannot be undone) and also called the finalizer has its candidate
// refused; a separate finalization step follows, and the replay of the
// searching step carries the search's result (Anthropic refuses a
// server_tool_use without its web_search_tool_result). The first answer is
// fantasy's recorded web-search stream of each API with a finalizer call
// added; the mock answers the next step.
func TestProviderToolBesideTheFinalizer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		provider, cassette, searchID string
		stream                       func(t *testing.T, recorded string) string
		replayed                     []string // what the second request must carry
	}{
		{provider: config.TypeAnthropic, cassette: "TestAnthropicWebSearch", searchID: "srvtoolu_01KYmV1c6SjLeWGNcNG4p2yi",
			stream: func(t *testing.T, recorded string) string {
				next := strconv.Itoa(strings.Count(recorded, "event: content_block_start\n")) // blocks are numbered from 0
				s := spliceBefore(t, recorded, "message_delta", sse(
					[2]string{"content_block_start", `{"type":"content_block_start","index":` + next + `,"content_block":{"type":"tool_use","id":"toolu_fin","name":"coder_structured_output","input":{}}}`},
					[2]string{"content_block_delta", `{"type":"content_block_delta","index":` + next + `,"delta":{"type":"input_json_delta","partial_json":` + mustJSON(t, finalizerArgs) + `}}`},
					[2]string{"content_block_stop", `{"type":"content_block_stop","index":` + next + `}`}))
				return strings.Replace(s, `"stop_reason":"end_turn"`, `"stop_reason":"tool_use"`, 1)
			},
			replayed: []string{`{"id":"srvtoolu_01KYmV1c6SjLeWGNcNG4p2yi","input":{"query":"Tokyo population 2026 current"},"name":"web_search","type":"server_tool_use"}`,
				`"tool_use_id":"srvtoolu_01KYmV1c6SjLeWGNcNG4p2yi","type":"web_search_tool_result"`, `"encrypted_content":"EtwZCio`}},
		{provider: config.TypeOpenAI, cassette: "TestOpenAIWebSearch", searchID: "ws_0200025d411b0585016a3c13b4825c81a391999cec332e6f02",
			stream: func(t *testing.T, recorded string) string {
				item := `{"id":"fc_fin","type":"function_call","status":"%s","call_id":"call_fin","name":"coder_structured_output","arguments":%s}`
				added := strings.Replace(strings.Replace(item, "%s", "in_progress", 1), "%s", `""`, 1)
				done := strings.Replace(strings.Replace(item, "%s", "completed", 1), "%s", mustJSON(t, finalizerArgs), 1)
				return spliceBefore(t, recorded, "response.completed", sse(
					[2]string{"response.output_item.added", `{"type":"response.output_item.added","output_index":2,"sequence_number":90,"item":` + added + `}`},
					[2]string{"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","item_id":"fc_fin","output_index":2,"sequence_number":91,"delta":` + mustJSON(t, finalizerArgs) + `}`},
					[2]string{"response.output_item.done", `{"type":"response.output_item.done","output_index":2,"sequence_number":92,"item":` + done + `}`}))
			},
			// store is false: the search is not replayed (fantasy sends no
			// item for it), the finalizer's call and refusal are.
			replayed: []string{`"call_id":"call_fin"`}},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			t.Parallel()
			rt := &recordedFirst{stream: tc.stream(t, cassetteStream(t, tc.cassette))}
			env := testenv.New(t, testenv.Options{Provider: tc.provider, ProviderTransport: rt,
				Mock: mockllm.Options{Script: &mockllm.Script{Steps: []mockllm.Step{{Value: json.RawMessage(`{"command":"make test"}`)}}}}})
			c := env.Client("alice")
			chat, req := create(t, c, reportSchema)
			res := wait(t, c, req)
			if res.Status != client.OutputSucceeded || !jsonEqual(t, res.Value, json.RawMessage(`{"command":"make test"}`)) {
				t.Fatalf("result %+v %s", res, res.Value)
			}
			if len(res.Attempts) != 1 || res.Attempts[0].Reason != client.AttemptProviderTools {
				t.Fatalf("attempts %+v, want one provider_tools rejection", res.Attempts)
			}
			settled(t, env, chat, req, client.OutputSucceeded, "")
			if len(rt.bodies) != 1 {
				t.Fatalf("%d calls reached the mock, want 1 (the finalization step)", len(rt.bodies))
			}
			for _, want := range tc.replayed {
				if !bytes.Contains(rt.bodies[0], []byte(want)) {
					t.Errorf("the finalization step's request lacks %s", want)
				}
			}
			// The searching step is in the history as the provider sent it:
			// the search call and its result (provider-executed), and the
			// refused finalizer call, answered with the refusal.
			h, err := c.ListMessages(t.Context(), chat, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var search, result, refused bool
			for _, m := range h.Messages {
				for _, p := range m.Content {
					switch {
					case p.Type == "tool-call" && p.ToolCallID == tc.searchID:
						search = p.ProviderExecuted && m.Role == client.RoleAssistant
					case p.Type == "tool-result" && p.ToolCallID == tc.searchID:
						result = p.ProviderExecuted && m.Role == client.RoleAssistant
					case p.Type == "tool-result" && p.IsError && strings.Contains(string(p.Result), "provider-side tools"):
						refused = m.Role == client.RoleTool
					}
				}
			}
			if !search || !result || !refused {
				t.Fatalf("history: search call %v, its result %v, finalizer refused %v: %+v", search, result, refused, h.Messages)
			}
		})
	}
}
