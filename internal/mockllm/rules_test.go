package mockllm

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// answer decodes a non-streaming Chat Completions answer: its text and the
// names of the tools it calls.
func answer(t *testing.T, body []byte) (string, []string) {
	t.Helper()
	var c struct {
		Choices []struct {
			Message struct {
				Content   string
				ToolCalls []struct {
					Function struct{ Name string }
				} `json:"tool_calls"`
			}
		}
	}
	if err := json.Unmarshal(body, &c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("%v %s", err, body)
	}
	var names []string
	for _, tc := range c.Choices[0].Message.ToolCalls {
		names = append(names, tc.Function.Name)
	}
	return c.Choices[0].Message.Content, names
}

func TestRulesAnswerByContentBeforeSteps(t *testing.T) {
	t.Parallel()
	sc, err := ParseScript([]byte(`{"rules":[
	  {"contains":"weather","tool":"get_weather","step":{"tool_calls":[{"name":"get_weather","arguments":"{}"}]}},
	  {"contains":"greet","step":{"text":"hello there"}}],
	 "steps":[{"text":"first step"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, hs := startServer(t, Options{Script: sc})
	weatherTool := toolJSON("get_weather", `{"type":"object"}`)

	if _, calls := answer(t, mustPost(t, hs.URL, chatBody(false, "the weather?", weatherTool))); len(calls) != 1 || calls[0] != "get_weather" {
		t.Fatalf("weather rule: calls %v", calls)
	}
	// Without the tool on offer the rule does not apply: the step answers.
	if text, _ := answer(t, mustPost(t, hs.URL, chatBody(false, "the weather?"))); text != "first step" {
		t.Fatalf("a rule whose tool is not offered answered: %q", text)
	}
	if text, _ := answer(t, mustPost(t, hs.URL, chatBody(false, "greet me"))); text != "hello there" {
		t.Fatalf("greet rule: %q", text)
	}
	// A conversation resumed after the tool's result ends with a tool
	// message: no rule matches, and the steps are exhausted.
	resumed := `{"model":"mock-1","messages":[{"role":"user","content":"the weather?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"sunny"}],"tools":[` + weatherTool + `]}`
	if text, calls := answer(t, mustPost(t, hs.URL, resumed)); len(calls) != 0 || !strings.HasPrefix(text, "mockllm: ") {
		t.Fatalf("resumed conversation: %q %v", text, calls)
	}
}

func TestHoldWaitsForReleaseOrClient(t *testing.T) {
	t.Parallel()
	sc, err := ParseScript([]byte(`{"rules":[{"contains":"hold","step":{"hold":true,"text":"released"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s, hs := startServer(t, Options{Script: sc})

	// A client that gives up ends its held request.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/chat/completions", strings.NewReader(chatBody(false, "hold on")))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("a held request was answered: %d", resp.StatusCode)
	}

	done := make(chan []byte)
	go func() { done <- mustPost(t, hs.URL, chatBody(false, "hold on")) }()
	select {
	case body := <-done:
		t.Fatalf("answered before Release: %s", body)
	case <-time.After(100 * time.Millisecond):
	}
	s.Release()
	if text, _ := answer(t, <-done); text != "released" {
		t.Fatalf("after Release: %q", text)
	}
	// Released for good: a new held request goes straight through.
	if text, _ := answer(t, mustPost(t, hs.URL, chatBody(false, "hold again"))); text != "released" {
		t.Fatalf("after Release, a new request: %q", text)
	}
}

func TestParseScriptRejectsBadRules(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`{"rules":[{"step":{"text":"x"}}]}`,                              // no contains
		`{"rules":[{"contains":"x","step":{"text":"x","colour":1}}]}`,    // unknown step key
		`{"rules":[{"contains":"x","step":{"value":1,"invalid":true}}]}`, // exclusive fields
		`{"rules":[{"contains":"x","when":"always","step":{}}]}`,         // unknown rule key
	} {
		if _, err := ParseScript([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// The example script the README's `make mockllm` loads parses, and its
// rules do what docs/api.md's examples rely on.
func TestExampleScript(t *testing.T) {
	t.Parallel()
	sc, err := LoadScript(filepath.Join("..", "..", "examples", "mockllm.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("..", "..", "docs", "mockllm.md")); err != nil {
		t.Fatalf("the script format is documented in docs/mockllm.md: %v", err)
	}
	var hold, weather, sloppy bool
	for _, r := range sc.Rules {
		hold = hold || r.Contains == "#hold" && r.Step.Hold
		weather = weather || r.Contains == "#weather" && r.Tool == "get_weather" && len(r.Step.ToolCalls) == 1
		sloppy = sloppy || r.Contains == "#sloppy" && r.Tool == "coder_structured_output" && string(r.Step.Value) == `{"command": ""}`
	}
	if !hold || !weather || !sloppy {
		t.Fatalf("examples/mockllm.json lacks the hold, weather or sloppy rule: %+v", sc.Rules)
	}
}

// records is a slog.Handler that passes each record on.
type records chan slog.Record

func (records) Enabled(context.Context, slog.Level) bool { return true }
func (h records) Handle(_ context.Context, r slog.Record) error {
	h <- r
	return nil
}
func (h records) WithAttrs([]slog.Attr) slog.Handler { return withAttrs{h, nil} }
func (h records) WithGroup(string) slog.Handler      { return h }

// withAttrs keeps a logger's attributes on its records.
type withAttrs struct {
	h     records
	attrs []slog.Attr
}

func (w withAttrs) Enabled(context.Context, slog.Level) bool { return true }
func (w withAttrs) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(w.attrs...)
	return w.h.Handle(ctx, r)
}
func (w withAttrs) WithAttrs(as []slog.Attr) slog.Handler {
	return withAttrs{w.h, append(append([]slog.Attr(nil), w.attrs...), as...)}
}
func (w withAttrs) WithGroup(string) slog.Handler { return w }

// TestExampleScriptDirectives: the example script's rules answer only their
// directive (#hold, #weather, #sloppy), not a message that merely contains
// the word ("household" was held for minutes), and a held request is
// logged, naming the rule.
func TestExampleScriptDirectives(t *testing.T) {
	t.Parallel()
	sc, err := LoadScript(filepath.Join("..", "..", "examples", "mockllm.json"))
	if err != nil {
		t.Fatal(err)
	}
	logged := make(records, 64)
	s, hs := startServer(t, Options{Script: sc, Logger: slog.New(logged)})
	t.Cleanup(s.Release)
	weatherTool := toolJSON("get_weather", `{"type":"object"}`)
	for _, text := range []string{"Sort the household chores.", "Hold on, what is the weather like?", "A sloppy answer will do."} {
		// A held request would wait until the test's end: give up sooner.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/chat/completions", strings.NewReader(chatBody(false, text, weatherTool)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Errorf("%q: %v (held?)", text, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if got, calls := answer(t, body); got != "mockllm: "+text || len(calls) != 0 {
			t.Errorf("%q: answered %q %v, want the echo", text, got, calls)
		}
	}
	if _, calls := answer(t, mustPost(t, hs.URL, chatBody(false, "#weather in Florence?", weatherTool))); len(calls) != 1 {
		t.Errorf("#weather: calls %v", calls)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/chat/completions", strings.NewReader(chatBody(false, "#hold a long task")))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	for r := range logged {
		if !strings.HasPrefix(r.Message, "holding the request") {
			continue
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		if attrs["rule"] != "0" || attrs["contains"] != "#hold" {
			t.Errorf("held request logged with %v, want rule 0, #hold", attrs)
		}
		break
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("a held request was answered")
	}
}
