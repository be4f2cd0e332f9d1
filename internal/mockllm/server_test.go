package mockllm

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
	"strings"
	"sync"
	"testing"
	"time"
)

const finalizerParams = `{"type":"object","properties":{"output":{"type":"object","properties":{"title":{"type":"string","minLength":3},"tags":{"type":"array","items":{"enum":["a","b"]},"minItems":1}},"required":["title","tags"],"additionalProperties":false}},"required":["output"],"additionalProperties":false}`

func chatBody(stream bool, user string, tools ...string) string {
	b := fmt.Sprintf(`{"model":"mock-1","messages":[{"role":"system","content":"be brief"},{"role":"user","content":%q}]`, user)
	if stream {
		b += `,"stream":true,"stream_options":{"include_usage":true}`
	}
	if len(tools) > 0 {
		b += `,"tools":[` + strings.Join(tools, ",") + `]`
	}
	return b + "}"
}

func toolJSON(name, params string) string {
	return fmt.Sprintf(`{"type":"function","function":{"name":%q,"description":"d","parameters":%s}}`, name, params)
}

func startServer(t *testing.T, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	s := New(opts)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs
}

func post(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

// sseEvents returns the data payloads of a server-sent event stream.
func sseEvents(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected SSE line %q", line)
		}
		out = append(out, data)
	}
	return out
}

type wireChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			Reasoning string  `json:"reasoning_content"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// streamSummary reassembles a stream the way a client does.
type streamSummary struct {
	text, reasoning, finish string
	names, ids, args        []string
	usage                   bool
	done                    bool
	chunks                  []wireChunk
}

func summarize(t *testing.T, body []byte) streamSummary {
	t.Helper()
	var s streamSummary
	for _, ev := range sseEvents(t, body) {
		if s.done {
			t.Fatalf("event after [DONE]: %s", ev)
		}
		if ev == "[DONE]" {
			s.done = true
			continue
		}
		var c wireChunk
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("bad chunk %s: %v", ev, err)
		}
		if c.Object != "chat.completion.chunk" || !strings.HasPrefix(c.ID, "chatcmpl-") || c.Model != "mock-1" {
			t.Errorf("bad chunk header %s", ev)
		}
		if len(s.chunks) > 0 && c.ID != s.chunks[0].ID {
			t.Errorf("chunk id changed mid-stream")
		}
		s.chunks = append(s.chunks, c)
		if c.Usage != nil {
			if len(c.Choices) != 0 || c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens || c.Usage.CompletionTokens == 0 {
				t.Errorf("bad usage chunk %s", ev)
			}
			s.usage = true
		}
		for _, ch := range c.Choices {
			if ch.FinishReason != nil {
				s.finish = *ch.FinishReason
			}
			if ch.Delta.Content != nil {
				s.text += *ch.Delta.Content
			}
			s.reasoning += ch.Delta.Reasoning
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index == nil {
					t.Fatalf("tool call delta without index: %s", ev)
				}
				i := *tc.Index
				if i == len(s.ids) {
					if tc.ID == "" || tc.Type != "function" || tc.Function.Name == "" {
						t.Errorf("first delta of tool call %d lacks id/type/name: %s", i, ev)
					}
					s.ids, s.names, s.args = append(s.ids, tc.ID), append(s.names, tc.Function.Name), append(s.args, "")
				}
				s.args[i] += tc.Function.Arguments
			}
		}
	}
	return s
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	_, hs := startServer(t, Options{})
	for _, path := range []string{"/v1/chat/completions", "/chat/completions"} {
		resp, body := post(t, hs.URL+path, chatBody(false, "hi"))
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"object":"chat.completion"`) {
			t.Errorf("POST %s: %d %s", path, resp.StatusCode, body)
		}
	}
	for _, path := range []string{"/v1/models", "/models", "/v1/models/gpt-x"} {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"object":"`) {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
		}
	}
	for _, path := range []string{"/v1/nope", "/v1/chat/completions"} {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct{ Message, Type, Code string }
		}
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 404 || err != nil || e.Error.Code != "unknown_url" || e.Error.Type != "invalid_request_error" {
			t.Errorf("GET %s: %d %+v %v", path, resp.StatusCode, e, err)
		}
	}
	for _, body := range []string{`{`, `{"messages":[{"role":"user","content":"x"}]}`, `{"model":"m","messages":[]}`, `{"model":"m","messages":[{"role":"user"}],"tools":[{"type":"web"}]}`} {
		resp, data := post(t, hs.URL+"/v1/chat/completions", body)
		if resp.StatusCode != 400 || !strings.Contains(string(data), `"invalid_request_error"`) {
			t.Errorf("POST %s: %d %s", body, resp.StatusCode, data)
		}
	}
}

// TestRequestsRecordsExactly: tool schemas are kept byte for byte, as sent.
func TestRequestsRecordsExactly(t *testing.T) {
	t.Parallel()
	s, hs := startServer(t, Options{})
	params := "{ \"type\" : \"object\",\n  \"properties\": {\"output\": {\"type\": \"number\", \"multipleOf\": 0.10}},\n  \"required\": [\"output\"] }"
	body := `{"model":"mock-1","tool_choice":{"type":"function","function":{"name":"coder_structured_output"}},` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"part one, "},{"type":"text","text":"part two"}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"result"}],` +
		`"tools":[` + toolJSON("read", `{}`) + `,` + toolJSON(FinalizerTool, params) + `]}`
	if resp, data := post(t, hs.URL+"/v1/chat/completions", body); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("got %d requests", len(reqs))
	}
	r := reqs[0]
	if string(r.Body) != body || r.Model != "mock-1" || r.Stream || r.IncludeUsage {
		t.Errorf("request = %+v", r)
	}
	if len(r.Tools) != 2 || r.Tools[1].Name != FinalizerTool || string(r.Tools[1].Parameters) != params || r.Tools[0].Description != "d" {
		t.Errorf("tools = %+v", r.Tools)
	}
	if got := string(r.ToolChoice); got != `{"type":"function","function":{"name":"coder_structured_output"}}` {
		t.Errorf("tool_choice = %s", got)
	}
	m := r.Messages
	if len(m) != 3 || m[0].Content != "part one, part two" || m[1].ToolCalls[0] != (MessageToolCall{"call_1", "read", "{}"}) || m[2].ToolCallID != "call_1" || m[2].Content != "result" {
		t.Errorf("messages = %+v", m)
	}
	reqs[0].Model = "changed"
	_ = append(reqs, Request{})
	if got := s.Requests(); len(got) != 1 || got[0].Model != "mock-1" {
		t.Errorf("Requests is not a copy: %+v", got)
	}
	s.Reset()
	if got := s.Requests(); len(got) != 0 {
		t.Errorf("after Reset: %d requests", len(got))
	}
}

func TestUnscriptedFinalizerStream(t *testing.T) {
	t.Parallel()
	_, hs := startServer(t, Options{})
	resp, body := post(t, hs.URL+"/v1/chat/completions", chatBody(true, "go", toolJSON("other", `{}`), toolJSON(FinalizerTool, finalizerParams)))
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
		t.Errorf("content type %q", ct)
	}
	s := summarize(t, body)
	if !s.done || !s.usage || s.finish != "tool_calls" || s.text != "" {
		t.Errorf("stream summary %+v", s)
	}
	if len(s.names) != 1 || s.names[0] != FinalizerTool || !strings.HasPrefix(s.ids[0], "call_") {
		t.Fatalf("tool calls %v %v", s.names, s.ids)
	}
	if len(s.chunks) < 4 {
		t.Errorf("arguments should arrive in several fragments, got %d chunks", len(s.chunks))
	}
	first := s.chunks[0].Choices[0].Delta
	if first.Role != "assistant" {
		t.Errorf("first delta has no role: %+v", first)
	}
	sch := compileDraft7(t, finalizerParams)
	if ok, why := validates(t, sch, []byte(s.args[0])); !ok {
		t.Errorf("arguments %s invalid: %s", s.args[0], why)
	}
}

func TestStreamWithoutUsage(t *testing.T) {
	t.Parallel()
	_, hs := startServer(t, Options{})
	_, body := post(t, hs.URL+"/v1/chat/completions", `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	if strings.Contains(string(body), `"usage"`) {
		t.Errorf("usage sent although not requested: %s", body)
	}
	s := summarize(t, body)
	if s.text != "mockllm: hello" || s.finish != "stop" || !s.done {
		t.Errorf("summary %+v", s)
	}
}

func TestScriptedStreamShapes(t *testing.T) {
	t.Parallel()
	sc, err := ParseScript([]byte(`{"steps":[
		{"value": {"title": "exact",  "n": 1.50}},
		{"reasoning": "thinking hard about it", "text": "Here is a longer answer that spans several chunks.", "finish_reason": "length"},
		{"text": "calling", "tool_calls": [{"name": "read", "arguments": "{not json"}, {"id": "call_mine", "name": "coder_structured_output", "value": [1, 2]}]},
		{"text": "this answer is cut off before it ends", "truncate": true},
		{"tool_calls": [{"name": "read", "arguments": "{\"path\":\"a/very/long/path/name.go\"}"}], "truncate": true}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, hs := startServer(t, Options{Script: sc})
	url := hs.URL + "/v1/chat/completions"

	_, body := post(t, url, chatBody(true, "x"))
	s := summarize(t, body)
	if len(s.args) != 1 || s.args[0] != `{"output":{"title": "exact",  "n": 1.50}}` || s.names[0] != FinalizerTool || s.finish != "tool_calls" {
		t.Errorf("value step: %+v", s)
	}

	_, body = post(t, url, chatBody(true, "x"))
	s = summarize(t, body)
	if s.reasoning != "thinking hard about it" || s.text != "Here is a longer answer that spans several chunks." || s.finish != "length" || len(s.args) != 0 {
		t.Errorf("text step: %+v", s)
	}

	_, body = post(t, url, chatBody(true, "x"))
	s = summarize(t, body)
	if s.text != "calling" || len(s.args) != 2 || s.args[0] != "{not json" || s.ids[1] != "call_mine" || s.args[1] != `{"output":[1, 2]}` || s.ids[0] == s.ids[1] {
		t.Errorf("tool_calls step: %+v", s)
	}

	for range 2 {
		_, body = post(t, url, chatBody(true, "x"))
		s = summarize(t, body)
		if s.done || s.usage || s.finish != "" {
			t.Errorf("truncated stream has an ending: %s", body)
		}
	}

	// The script is exhausted: unscripted answers again.
	_, body = post(t, url, chatBody(true, "after the script"))
	if s = summarize(t, body); s.text != "mockllm: after the script" {
		t.Errorf("after script: %+v", s)
	}
}

func TestNonStreaming(t *testing.T) {
	t.Parallel()
	sc, err := ParseScript([]byte(`{"steps":[{"reasoning":"hmm","value":{"title":"t"}},{"text":"cut","truncate":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, hs := startServer(t, Options{Script: sc})
	resp, body := post(t, hs.URL+"/v1/chat/completions", chatBody(false, "x"))
	var c struct {
		ID, Object string
		Choices    []struct {
			Message struct {
				Role             string
				Content          *string
				ReasoningContent string `json:"reasoning_content"`
				ToolCalls        []struct {
					ID, Type string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &c); err != nil || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%v %s", err, body)
	}
	ch := c.Choices[0]
	if c.Object != "chat.completion" || !strings.HasPrefix(c.ID, "chatcmpl-") || ch.FinishReason != "tool_calls" || ch.Message.Role != "assistant" ||
		ch.Message.Content != nil || ch.Message.ReasoningContent != "hmm" || len(ch.Message.ToolCalls) != 1 ||
		ch.Message.ToolCalls[0].Function.Arguments != `{"output":{"title":"t"}}` || ch.Message.ToolCalls[0].Type != "function" {
		t.Errorf("completion %s", body)
	}
	if c.Usage.PromptTokens == 0 || c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens {
		t.Errorf("usage %+v", c.Usage)
	}
	_, body = post(t, hs.URL+"/v1/chat/completions", chatBody(false, "x"))
	if json.Valid(body) || len(body) == 0 {
		t.Errorf("truncated body should be cut JSON: %s", body)
	}
}

func TestModes(t *testing.T) {
	t.Parallel()
	sch := compileDraft7(t, finalizerParams)
	for _, tc := range []struct {
		mode      string
		wantValid bool
		wantCall  bool
	}{{"", true, true}, {ModeValid, true, true}, {ModeInvalid, false, true}, {ModeText, false, false}} {
		_, hs := startServer(t, Options{Mode: tc.mode})
		_, body := post(t, hs.URL+"/v1/chat/completions", chatBody(true, "x", toolJSON(FinalizerTool, finalizerParams)))
		s := summarize(t, body)
		if (len(s.args) == 1) != tc.wantCall {
			t.Errorf("mode %q: calls %v text %q", tc.mode, s.args, s.text)
			continue
		}
		if tc.wantCall {
			if ok, _ := validates(t, sch, []byte(s.args[0])); ok != tc.wantValid {
				t.Errorf("mode %q: arguments %s valid=%v", tc.mode, s.args[0], ok)
			}
		}
	}
}

func TestEchoIsBounded(t *testing.T) {
	t.Parallel()
	_, hs := startServer(t, Options{})
	long := strings.Repeat("é", 300) // two bytes each: the cut must not split one
	_, body := post(t, hs.URL+"/v1/chat/completions", chatBody(false, long))
	var c struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	got := c.Choices[0].Message.Content
	if got != "mockllm: "+strings.Repeat("é", 100) {
		t.Errorf("echo %q (%d bytes)", got, len(got))
	}
}

func TestScriptedErrors(t *testing.T) {
	t.Parallel()
	sc, err := ParseScript([]byte(`{"steps":[
		{"error":{"status":429,"retry_after":2,"should_retry":false}},
		{"error":{"message":"boom","type":"overloaded_error","code":"x1"}}
	],"then":"repeat"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, hs := startServer(t, Options{Script: sc})
	resp, body := post(t, hs.URL+"/v1/chat/completions", chatBody(false, "x"))
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || resp.Header.Get("X-Should-Retry") != "false" ||
		string(body) != `{"error":{"code":"rate_limit_exceeded","message":"Too Many Requests","param":null,"type":"requests"}}` {
		t.Errorf("429: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	for range 2 { // "repeat" keeps answering with the last step
		resp, body = post(t, hs.URL+"/v1/chat/completions", chatBody(true, "x"))
		if resp.StatusCode != 500 || resp.Header.Get("Retry-After") != "" ||
			string(body) != `{"error":{"code":"x1","message":"boom","param":null,"type":"overloaded_error"}}` {
			t.Errorf("500: %d %s", resp.StatusCode, body)
		}
	}
}

func TestParseScriptRejects(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`{"steps":[{"txt":"typo"}]}`,
		`{"steps":[],"then":"loop"}`,
		`{"steps":[{"finish_reason":"done"}]}`,
		`{"steps":[{"value":1,"invalid":true}]}`,
		`{"steps":[{"text_only":true,"tool_calls":[{"name":"x"}]}]}`,
		`{"steps":[{"tool_calls":[{"arguments":"{}"}]}]}`,
		`{"steps":[{"tool_calls":[{"name":"x","arguments":"{}","value":1}]}]}`,
		`{"steps":[{"error":{"status":200}}]}`,
		`{"steps":[{"delay_ms":-1}]}`,
		`[]`,
	} {
		if _, err := ParseScript([]byte(bad)); err == nil {
			t.Errorf("ParseScript(%s) succeeded", bad)
		}
	}
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, []byte(`{"steps":[{"value":null},{}],"then":"unscripted"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sc, err := LoadScript(path)
	if err != nil || len(sc.Steps) != 2 || string(sc.Steps[0].Value) != "null" {
		t.Errorf("LoadScript = %+v, %v", sc, err)
	}
	if _, err := LoadScript(path + ".missing"); err == nil {
		t.Error("LoadScript of a missing file succeeded")
	}
}

// TestScriptConcurrent: each step is handed out exactly once under load.
func TestScriptConcurrent(t *testing.T) {
	t.Parallel()
	const n = 40
	var sc Script
	for i := range n {
		sc.Steps = append(sc.Steps, Step{Text: fmt.Sprintf("step-%d", i)})
	}
	s, hs := startServer(t, Options{Script: &sc})
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody(false, "x")))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var c struct {
				Choices []struct{ Message struct{ Content string } }
			}
			if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen[c.Choices[0].Message.Content]++
			mu.Unlock()
		})
	}
	wg.Wait()
	for i := range n {
		if k := fmt.Sprintf("step-%d", i); seen[k] != 1 {
			t.Errorf("%s answered %d times", k, seen[k])
		}
	}
	if got := len(s.Requests()); got != n {
		t.Errorf("recorded %d requests", got)
	}
}

func TestBeforeRespond(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	released := make(chan error, 1)
	sc := &Script{Steps: []Step{{Text: "first scripted answer"}}}
	var calls int
	var mu sync.Mutex
	_, hs := startServer(t, Options{Script: sc, BeforeRespond: func(ctx context.Context, req *Request) error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		switch n {
		case 1:
			return fmt.Errorf("injected failure for %s", req.Model)
		case 2: // hold the request until the client gives up
			close(entered)
			<-ctx.Done()
			released <- ctx.Err()
			return ctx.Err()
		}
		return nil
	}})
	url := hs.URL + "/v1/chat/completions"

	resp, body := post(t, url, chatBody(false, "x"))
	if resp.StatusCode != 500 || !strings.Contains(string(body), "injected failure for mock-1") {
		t.Errorf("hook error: %d %s", resp.StatusCode, body)
	}

	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(chatBody(false, "x")))
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-entered
	cancel()
	if err := <-errc; err == nil {
		t.Error("cancelled request succeeded")
	}
	if err := <-released; err != context.Canceled {
		t.Errorf("hook saw %v", err)
	}

	// Neither the failed nor the abandoned request consumed the script step.
	_, body = post(t, url, chatBody(false, "x"))
	if !strings.Contains(string(body), "first scripted answer") {
		t.Errorf("script step was consumed early: %s", body)
	}
}

// TestStreamStopsWhenClientLeaves: a slow stream ends as soon as the client
// cancels, instead of writing into the void until the script is done.
func TestStreamStopsWhenClientLeaves(t *testing.T) {
	t.Parallel()
	s := New(Options{Script: &Script{Steps: []Step{{Text: strings.Repeat("slow text ", 20), ChunkDelayMS: 3_600_000}}}})
	handlerDone := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(w, r)
		close(handlerDone)
	}))
	defer hs.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/chat/completions", strings.NewReader(chatBody(true, "x")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first chunk: %q %v", line, err)
	}
	cancel()
	select {
	case <-handlerDone:
	case <-time.After(30 * time.Second): // a failure guard, not synchronisation
		t.Fatal("handler still streaming after the client left")
	}
}

func TestStepForAnswersByContentWithoutConsumingTheScript(t *testing.T) {
	t.Parallel()
	sc, err := ParseScript([]byte(`{"steps":[{"text":"scripted"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, hs := startServer(t, Options{Script: sc, StepFor: func(r *Request) (Step, bool) {
		if r.Messages[len(r.Messages)-1].Content != "weather?" {
			return Step{}, false
		}
		return Step{ToolCalls: []ToolCall{{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Florence"}`}}}, true
	}})
	text := func(body []byte) (string, string) {
		var c struct {
			Choices []struct {
				Message struct {
					Content   string
					ToolCalls []struct{ ID string } `json:"tool_calls"`
				}
			}
		}
		if err := json.Unmarshal(body, &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("%v %s", err, body)
		}
		m := c.Choices[0].Message
		if len(m.ToolCalls) == 1 {
			return "", m.ToolCalls[0].ID
		}
		return m.Content, ""
	}
	if _, call := text(mustPost(t, hs.URL, chatBody(false, "weather?"))); call != "call_w" {
		t.Fatalf("chosen step not used: call %q", call)
	}
	if got, _ := text(mustPost(t, hs.URL, chatBody(false, "hello"))); got != "scripted" {
		t.Fatalf("the script was consumed by the chosen step: %q", got)
	}
}

func mustPost(t *testing.T, base, body string) []byte {
	t.Helper()
	_, b := post(t, base+"/v1/chat/completions", body)
	return b
}
