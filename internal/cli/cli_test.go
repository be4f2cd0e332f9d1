package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/cli"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const schema = `{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}`

// run runs one command line (["chat", "new", ...] or ["result", ...])
// against env as user alice.
type runner struct {
	t     *testing.T
	url   string
	token string
}

func newRunner(t *testing.T, env *testenv.Env) runner {
	return runner{t: t, url: env.API.URL, token: env.Token("alice")}
}

func (r runner) run(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	r.t.Helper()
	var out, errOut bytes.Buffer
	io := cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string {
		switch k {
		case "CHATD_URL":
			return r.url
		case "CHATD_TOKEN":
			return r.token
		}
		return ""
	}}
	switch args[0] {
	case "chat":
		code = cli.Chat(ctx, args[1:], io)
	case "result":
		code = cli.Result(ctx, args[1:], io)
	default:
		r.t.Fatalf("no command %s", args[0])
	}
	return code, out.String(), errOut.String()
}

func schemaFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "project-report.schema.json")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

func result(t *testing.T, line string) client.StructuredOutputResult {
	t.Helper()
	var res client.StructuredOutputResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		t.Fatalf("not a result: %q: %v", line, err)
	}
	return res
}

// TestNewSchemaExitCodes: `chat new --schema --wait` exits 0 on a succeeded
// receipt, 1 on a failed one, 2 when the server refuses the schema.
func TestNewSchemaExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode   string
		code   int
		status client.RequestStatus
		error  client.ErrorCode
	}{
		{mockllm.ModeValid, cli.ExitOK, client.OutputSucceeded, ""},
		{mockllm.ModeInvalid, cli.ExitFailed, client.OutputFailed, client.CodeValidationExhausted},
		{mockllm.ModeText, cli.ExitFailed, client.OutputFailed, client.CodeNotProduced},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Mode: tc.mode}})
			r := newRunner(t, env)
			code, out, errOut := r.run(t.Context(), "chat", "new", "--schema", schemaFile(t, schema), "--wait", "Report the test command.")
			l := lines(out)
			if code != tc.code || len(l) != 3 {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			chat, err1 := uuid.Parse(l[0])
			req, err2 := uuid.Parse(l[1])
			res := result(t, l[2])
			if err1 != nil || err2 != nil || res.RequestID != req || res.ChatID != chat || res.Status != tc.status {
				t.Fatalf("output:\n%s", out)
			}
			if tc.error != "" && (res.Error == nil || res.Error.Code != tc.error) {
				t.Fatalf("error %+v, want %s", res.Error, tc.error)
			}
			if tc.status == client.OutputSucceeded && !strings.Contains(string(res.Value), `"command"`) {
				t.Fatalf("value %s", res.Value)
			}
			// chatd result agrees, with the same exit status.
			code, out, _ = r.run(t.Context(), "result", req.String())
			if code != tc.code || result(t, strings.TrimSpace(out)).Status != tc.status {
				t.Fatalf("result: exit %d %s", code, out)
			}
		})
	}
}

func TestUsageAndTransportErrorsExit2(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{})
	r := newRunner(t, env)
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no text", []string{"chat", "new"}, "want the message TEXT"},
		{"unknown command", []string{"chat", "frobnicate"}, `unknown command "frobnicate"`},
		{"unknown flag", []string{"chat", "new", "--colour", "red", "hi"}, "flag provided but not defined"},
		{"missing schema file", []string{"chat", "new", "--schema", "/nonexistent.json", "hi"}, "--schema"},
		{"not JSON", []string{"chat", "new", "--schema", schemaFile(t, "{"), "hi"}, "not JSON"},
		{"schema refused by the server", []string{"chat", "new", "--schema", schemaFile(t, `{"type":"object","$ref":"#/x"}`), "hi"},
			"response_format.json_schema.schema"},
		{"bad chat id", []string{"chat", "show", "nope"}, "not a chat id"},
		{"no such chat", []string{"chat", "show", uuid.NewString()}, "HTTP 404"},
		{"bad request id", []string{"result", "nope"}, "not a request id"},
	} {
		code, out, errOut := r.run(ctx, tc.args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, stderr %q (want %q), stdout %q", tc.name, code, errOut, tc.want, out)
		}
	}

	// A server that does not answer, and no token.
	gone := runner{t: t, url: "http://127.0.0.1:1", token: "x"}
	if code, _, errOut := gone.run(ctx, "chat", "list"); code != cli.ExitUsage || !strings.Contains(errOut, "connect") {
		t.Errorf("unreachable server: exit %d %q", code, errOut)
	}
	noToken := runner{t: t, url: env.API.URL}
	if code, _, errOut := noToken.run(ctx, "chat", "list"); code != cli.ExitUsage || !strings.Contains(errOut, "CHATD_TOKEN") {
		t.Errorf("no token: exit %d %q", code, errOut)
	}
}

// holdAll keeps every provider call waiting until released (or the test ends).
type holdAll struct {
	once    sync.Once
	release chan struct{}
}

func (h *holdAll) hook(ctx context.Context, _ *mockllm.Request) error {
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return nil
}

func TestChatCommands(t *testing.T) {
	t.Parallel()
	h := &holdAll{release: make(chan struct{})}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{BeforeRespond: h.hook}})
	t.Cleanup(func() { h.once.Do(func() { close(h.release) }) })
	r := newRunner(t, env)
	ctx := t.Context()

	// A structured chat whose turn is held: pending (exit 3), then
	// interrupted (exit 1, cancelled).
	code, out, errOut := r.run(ctx, "chat", "new", "--schema", schemaFile(t, schema), "--title", "Held", "Report.")
	if code != 0 || len(lines(out)) != 2 {
		t.Fatalf("new: exit %d %q %q", code, out, errOut)
	}
	chat, req := lines(out)[0], lines(out)[1]
	if code, out, _ := r.run(ctx, "result", req); code != cli.ExitPending || result(t, strings.TrimSpace(out)).Status != client.OutputPending {
		t.Fatalf("pending result: exit %d %s", code, out)
	}
	// A send to the busy chat is queued (stderr says so).
	if code, out, errOut := r.run(ctx, "chat", "send", chat, "And then?"); code != 0 || out != "" || !strings.Contains(errOut, "queued") {
		t.Fatalf("send while busy: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut := r.run(ctx, "chat", "interrupt", chat); code != 0 || !strings.Contains(out, "interrupting") {
		t.Fatalf("interrupt: exit %d %q %q", code, out, errOut)
	}
	h.once.Do(func() { close(h.release) })
	code, out, _ = r.run(ctx, "result", "--wait", req)
	if res := result(t, strings.TrimSpace(out)); code != cli.ExitFailed || res.Status != client.OutputCancelled || res.Error.Code != client.CodeInterrupted {
		t.Fatalf("interrupted result: exit %d %s", code, out)
	}
	// The queued message ran after the interrupt; tail prints the history
	// and stops once the chat is idle.
	code, out, errOut = r.run(ctx, "chat", "tail", "--until-idle", chat)
	for _, want := range []string{"user: (structured request " + req + ")", "receipt " + req + " cancelled (interrupted:",
		"user:\n    And then?", "assistant:\n    mockllm: And then?", "-- finished"} {
		if !strings.Contains(out, want) {
			t.Errorf("tail lacks %q:\n%s\n%s", want, out, errOut)
		}
	}
	if code != 0 {
		t.Fatalf("tail: exit %d %s", code, errOut)
	}
	code, show, _ := r.run(ctx, "chat", "show", chat)
	if code != 0 || !strings.Contains(show, "chat "+chat+"  finished") || !strings.Contains(show, "mockllm: And then?") {
		t.Fatalf("show: exit %d\n%s", code, show)
	}
	code, js, _ := r.run(ctx, "chat", "show", "--json", chat)
	var shown struct {
		Chat     client.Chat
		Messages []client.ChatMessage
	}
	if code != 0 || json.Unmarshal([]byte(js), &shown) != nil || shown.Chat.ID.String() != chat || len(shown.Messages) < 4 {
		t.Fatalf("show --json: exit %d\n%s", code, js)
	}

	// An idle chat: send --wait prints the reply; list shows both chats.
	if code, out, errOut := r.run(ctx, "chat", "send", "--wait", chat, "Hello again."); code != 0 || out != "mockllm: Hello again.\n" {
		t.Fatalf("send --wait: exit %d %q %q", code, out, errOut)
	}
	code, out, errOut = r.run(ctx, "chat", "new", "--wait", "Plain question.")
	if l := lines(out); code != 0 || len(l) != 2 || l[1] != "mockllm: Plain question." {
		t.Fatalf("new --wait without a schema: exit %d %q %q", code, out, errOut)
	}
	code, out, errOut = r.run(ctx, "chat", "list", "--limit", "1")
	if code != 0 || !strings.HasPrefix(out, "ID") || !strings.Contains(out, "Plain question.") || !strings.Contains(errOut, "--cursor") {
		t.Fatalf("list: exit %d %q %q", code, out, errOut)
	}
	// The console's word for an idle chat, not the API's.
	if f := strings.Fields(lines(out)[1]); len(f) < 2 || f[1] != "finished" {
		t.Errorf("list prints the status as %q, want finished:\n%s", f, out)
	}

	// export prints the chat as JSON Lines; delete removes it, and a
	// second delete is a 404 that says it was deleted.
	code, out, errOut = r.run(ctx, "chat", "export", chat)
	if l := lines(out); code != 0 || len(l) < 4 || !strings.Contains(l[0], `"type":"chatd_export"`) || !strings.Contains(l[len(l)-1], `"type":"end"`) {
		t.Fatalf("export: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut := r.run(ctx, "chat", "delete", chat); code != 0 || out != "deleted 1 chat(s)\n" {
		t.Fatalf("delete: exit %d %q %q", code, out, errOut)
	}
	if code, _, errOut := r.run(ctx, "chat", "delete", chat); code != cli.ExitUsage || !strings.Contains(errOut, "was deleted") {
		t.Fatalf("second delete: exit %d %q", code, errOut)
	}
}

// cutFirstStream is a proxy to chatd that ends the first stream it carries
// after the stream's first event, as a dropped connection would. It
// records the Last-Event-ID header of each stream request.
func cutFirstStream(t *testing.T, target string) (string, func() []string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	var mu sync.Mutex
	var lastEventIDs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/stream") {
			proxy.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		lastEventIDs = append(lastEventIDs, r.Header.Get("Last-Event-ID"))
		first := len(lastEventIDs) == 1
		mu.Unlock()
		if !first {
			proxy.ServeHTTP(w, r)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), nil)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		maps.Copy(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		rd := bufio.NewReader(resp.Body)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			_, _ = io.WriteString(w, line)
			if line == "\n" { // the end of the first event: the stream ends here
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lastEventIDs)
	}
}

// TestTailReconnects: `chat tail` follows a stream whose connection drops
// after the first event: it reconnects with Last-Event-ID and prints every
// message once.
func TestTailReconnects(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{})
	r := newRunner(t, env)
	ctx := t.Context()
	code, out, errOut := r.run(ctx, "chat", "new", "--wait", "First question.")
	if code != 0 {
		t.Fatalf("new: exit %d %q %q", code, out, errOut)
	}
	chat := lines(out)[0]
	if code, out, errOut := r.run(ctx, "chat", "send", "--wait", chat, "Second question."); code != 0 {
		t.Fatalf("send: exit %d %q %q", code, out, errOut)
	}

	proxyURL, lastEventIDs := cutFirstStream(t, env.API.URL)
	r.url = proxyURL
	code, out, errOut = r.run(ctx, "chat", "tail", "--until-idle", chat)
	if code != 0 {
		t.Fatalf("tail: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"First question.", "mockllm: First question.", "Second question.", "mockllm: Second question."} {
		if n := strings.Count(out, "    "+want+"\n"); n != 1 {
			t.Errorf("tail printed %q %d times:\n%s", want, n, out)
		}
	}
	if ids := lastEventIDs(); len(ids) != 2 || ids[0] != "" || ids[1] != "1" {
		t.Errorf("stream requests' Last-Event-ID: %q, want a first without and a reconnection after message 1", ids)
	}
	if !strings.Contains(errOut, "reconnected after message 1") || !strings.HasSuffix(out, "-- finished\n") {
		t.Errorf("tail:\n%s\nstderr:\n%s", out, errOut)
	}
}
