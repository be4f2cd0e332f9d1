package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/chatd/chatd/internal/mcp"
	"github.com/chatd/chatd/internal/mcp/mcptest"
	"github.com/chatd/chatd/internal/prom"
)

// secretEnv is set in chatd's (the test binary's) environment and named by
// no server: it must never reach one.
const secretEnv = "CHATD_MCP_TEST_SECRET"

func TestMain(m *testing.M) {
	os.Setenv(secretEnv, "must-not-leak")
	os.Setenv("CHATD_MCP_TEST_TOKEN", "token-for-the-server")
	code := m.Run()
	if sharedStop != nil {
		sharedStop()
	}
	if code == 0 {
		// Every session, reader and server process a test starts ends with it.
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: goroutines outlived the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// logBuf collects log lines of concurrent writers.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type env struct {
	m       *mcp.Manager
	reg     *prometheus.Registry
	logs    *logBuf
	signals *mcp.TestSignals
}

// pid waits for the next child to start.
func (e *env) pid() int { return (<-e.signals.Started.C()).PID }

// sent waits for the next call to be sent and returns its tool's name.
func (e *env) sent() string { return (<-e.signals.Sending.C()).Tool }

// start runs a Manager over cfgs until the test ends and waits until every
// server is connected.
func start(t *testing.T, cfgs ...mcp.ServerConfig) *env {
	t.Helper()
	e := &env{reg: prometheus.NewRegistry(), logs: &logBuf{}, signals: &mcp.TestSignals{}}
	e.signals.Started.Init()
	e.signals.Sending.Init()
	e.m = mcp.New(cfgs, mcp.Options{
		Logger:      slog.New(slog.NewJSONHandler(e.logs, nil)),
		Metrics:     e.reg,
		Reserved:    []string{"coder_structured_output"},
		RetryBase:   50 * time.Millisecond,
		TestSignals: e.signals,
	})
	e.m.Start(context.Background())
	t.Cleanup(e.m.Close)
	for _, c := range cfgs {
		e.until(t, c.Name, func() bool { return e.m.Up(c.Name) })
	}
	return e
}

// until waits for cond, re-checking at every change of the server.
func (e *env) until(t *testing.T, server string, cond func() bool) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		ch := e.m.Changed(server)
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("server %s: condition not met within a minute; logs:\n%s", server, e.logs)
		}
	}
}

// metric is the value of a family's series whose labels include the given
// pairs (0 when absent).
func (e *env) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	s, err := prom.Gather(e.reg)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := s.Get(name, labels...)
	return v
}

func (e *env) call(t *testing.T, name, args string) mcp.Result {
	t.Helper()
	tool, ok := e.m.Lookup("m", nil, name)
	if !ok {
		t.Fatalf("no tool %s among %v", name, names(e.m.Tools("m", nil)))
	}
	res, err := e.m.Call(t.Context(), tool, json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func names(ts []mcp.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func stdio(name, cmd string, args []string) mcp.ServerConfig {
	return mcp.ServerConfig{Name: name, Transport: mcp.TransportStdio, Command: cmd, Args: args, Chats: mcp.ChatsAll}
}

var (
	sharedOnce sync.Once
	shared     *env
	sharedStop func()
	sharedErr  string
	fsRoot     string
)

// sharedServers starts the npm servers once for the package: everything
// (stdio and streamable HTTP, the latter behind a proxy that records
// headers) and filesystem.
func sharedServers(t *testing.T) *env {
	t.Helper()
	sharedOnce.Do(func() {
		node, everything := mcptest.Everything(t, "stdio")
		_, fs := mcptest.Filesystem(t)
		root, err := os.MkdirTemp("", "chatd-mcp-fs-")
		if err != nil {
			sharedErr = err.Error()
			return
		}
		fsRoot, _ = filepath.EvalSymlinks(root)
		os.WriteFile(filepath.Join(fsRoot, "notes.txt"), []byte("hello from the workspace\n"), 0o644)
		port := mcptest.FreePort(t)
		stopHTTP := mcptest.Serve(t, []string{fmt.Sprintf("PORT=%d", port)}, node, everything[0], "streamableHttp")
		target, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", port))
		proxy := httptest.NewServer(recordHeaders(httputil.NewSingleHostReverseProxy(target)))
		sharedStop = func() {
			proxy.Close()
			stopHTTP()
			os.RemoveAll(root)
		}
		httpCfg := mcp.ServerConfig{Name: "remote", Transport: mcp.TransportHTTP, URL: proxy.URL + "/mcp", Chats: mcp.ChatsAll,
			Headers: map[string]string{"X-Chatd-Token": "CHATD_MCP_TEST_TOKEN"}, Allow: []string{"echo", "get-sum"}}
		shared = startShared(t, stdio("everything", node, everything), stdio("fs", node, append(fs, fsRoot)), httpCfg)
	})
	if shared == nil {
		t.Fatalf("shared servers did not start: %s", sharedErr)
	}
	return shared
}

// startShared is start without the test's cleanup: the servers live for
// the package (TestMain stops them).
func startShared(t *testing.T, cfgs ...mcp.ServerConfig) *env {
	e := &env{reg: prometheus.NewRegistry(), logs: &logBuf{}}
	e.m = mcp.New(cfgs, mcp.Options{Logger: slog.New(slog.NewJSONHandler(e.logs, nil)), Metrics: e.reg,
		Reserved: []string{"coder_structured_output"}})
	e.m.Start(context.Background())
	stop := sharedStop
	sharedStop = func() { e.m.Close(); stop() }
	for _, c := range cfgs {
		e.until(t, c.Name, func() bool { return e.m.Up(c.Name) })
	}
	return e
}

var (
	headersMu sync.Mutex
	headers   []http.Header
)

func recordHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headersMu.Lock()
		headers = append(headers, r.Header.Clone())
		headersMu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func TestEverythingOverStdio(t *testing.T) {
	t.Parallel()
	e := sharedServers(t)
	got := names(e.m.Tools("m", nil))
	for _, want := range []string{"everything__echo", "everything__get-sum", "everything__get-structured-content", "everything__get-tiny-image"} {
		if !strings.Contains(strings.Join(got, " "), want) {
			t.Errorf("tools %v lack %s", got, want)
		}
	}
	cases := []struct {
		name, tool, args string
		isError          bool
		contains         []string
		absent           []string
	}{
		{"text", "everything__echo", `{"message":"hi <there>"}`, false, []string{`"text":"Echo: hi <there>"`}, nil},
		{"sum", "everything__get-sum", `{"a":1,"b":2}`, false, []string{"The sum of 1 and 2 is 3."}, nil},
		{"structured", "everything__get-structured-content", `{"location":"Chicago"}`, false,
			[]string{`"structured_content":{`, `"temperature":`}, nil},
		{"image as a reference", "everything__get-tiny-image", `{}`, false,
			[]string{`"type":"image"`, `"mime_type":"image/png"`, `"sha256":"`, `"bytes":`}, []string{`"data"`, "iVBOR"}},
		{"invalid arguments", "everything__get-structured-content", `{"location":5}`, true, []string{"Invalid"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := e.call(t, c.tool, c.args)
			if res.IsError != c.isError {
				t.Errorf("is_error %v, want %v: %s", res.IsError, c.isError, res.Output)
			}
			for _, s := range c.contains {
				if !strings.Contains(string(res.Output), s) {
					t.Errorf("result %s lacks %s", res.Output, s)
				}
			}
			for _, s := range c.absent {
				if strings.Contains(string(res.Output), s) {
					t.Errorf("result %s holds %s", res.Output, s)
				}
			}
		})
	}
}

// server-everything registers a tool after initialization and announces
// it with notifications/tools/list_changed: the list is read again.
func TestListChanged(t *testing.T) {
	t.Parallel()
	e := sharedServers(t)
	e.until(t, "everything", func() bool {
		_, ok := e.m.Lookup("m", nil, "everything__simulate-research-query")
		return ok
	})
	e.until(t, "everything", func() bool {
		return e.metric(t, "chatd_mcp_tool_refreshes_total", "server", "everything", "reason", "list_changed") >= 1
	})
}

func TestFilesystemOverStdio(t *testing.T) {
	t.Parallel()
	e := sharedServers(t)
	res := e.call(t, "fs__read_text_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(fsRoot, "notes.txt")))
	if res.IsError || !strings.Contains(string(res.Output), "hello from the workspace") {
		t.Errorf("read: %s (error %v)", res.Output, res.IsError)
	}
	res = e.call(t, "fs__list_directory", fmt.Sprintf(`{"path":%q}`, fsRoot))
	if res.IsError || !strings.Contains(string(res.Output), "notes.txt") {
		t.Errorf("list: %s (error %v)", res.Output, res.IsError)
	}
	res = e.call(t, "fs__read_text_file", `{"path":"/etc/passwd"}`)
	if !res.IsError || strings.Contains(string(res.Output), "root:") {
		t.Errorf("outside the allowed directory: %s (error %v)", res.Output, res.IsError)
	}
}

func TestStreamableHTTP(t *testing.T) {
	t.Parallel()
	e := sharedServers(t)
	if got := names(e.m.Tools("m", nil)); !strings.Contains(strings.Join(got, " "), "remote__echo") {
		t.Fatalf("tools %v", got)
	}
	res := e.call(t, "remote__get-sum", `{"a":20,"b":22}`)
	if res.IsError || !strings.Contains(string(res.Output), "is 42") {
		t.Errorf("sum over HTTP: %s", res.Output)
	}
	// allow lists echo and get-sum only.
	if _, ok := e.m.Lookup("m", nil, "remote__get-env"); ok {
		t.Error("a tool outside the allow list can be called")
	}
	headersMu.Lock()
	defer headersMu.Unlock()
	if len(headers) == 0 || headers[0].Get("X-Chatd-Token") != "token-for-the-server" {
		t.Errorf("the configured header did not reach the server: %v", headers)
	}
}

// faultServer is a fresh stdio fault server for one test.
func faultServer(t *testing.T, name string, mod func(*mcp.ServerConfig)) *env {
	t.Helper()
	cmd, args := mcptest.Fault(t)
	c := stdio(name, cmd, args)
	c.Timeout = "2s"
	if mod != nil {
		mod(&c)
	}
	return start(t, c)
}

func TestHostileToolsAreRefused(t *testing.T) {
	t.Parallel()
	e := faultServer(t, "faulty", nil)
	got := strings.Join(names(e.m.Tools("m", nil)), " ")
	for _, refused := range []string{"remote_ref", "deep", "coder_structured_output", "bad.name"} {
		if strings.Contains(got, "faulty__"+refused) {
			t.Errorf("%s is offered: %s", refused, got)
		}
		if _, ok := e.m.Lookup("m", nil, "faulty__"+refused); ok {
			t.Errorf("%s can be called", refused)
		}
	}
	if !strings.Contains(got, "faulty__echo") {
		t.Errorf("echo is not offered: %s", got)
	}
	for reason, want := range map[string]float64{"schema": 2, "reserved": 1, "name": 1} {
		if got := e.metric(t, "chatd_mcp_tools_refused_total", "server", "faulty", "reason", reason); got != want {
			t.Errorf("refused for %s: %v, want %v", reason, got, want)
		}
	}
}

func TestHangingCallTimesOut(t *testing.T) {
	t.Parallel()
	e := faultServer(t, "slow", func(c *mcp.ServerConfig) { c.Timeout = "500ms" })
	began := time.Now()
	res := e.call(t, "slow__hang", `{}`)
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the call took %s", took)
	}
	if !res.IsError || !strings.Contains(string(res.Output), "did not answer within 500ms") {
		t.Errorf("result %s", res.Output)
	}
	// The connection survives an abandoned call.
	if res := e.call(t, "slow__echo", `{"text":"still here"}`); res.IsError {
		t.Errorf("after a timeout: %s", res.Output)
	}
}

func TestOversizedResult(t *testing.T) {
	t.Parallel()
	e := faultServer(t, "big", func(c *mcp.ServerConfig) { c.Timeout = "60s" })
	res := e.call(t, "big__huge", `{}`)
	if !res.IsError || !strings.Contains(string(res.Output), "over the limit") || len(res.Output) > 1024 {
		t.Errorf("result (%d bytes) %.300s", len(res.Output), res.Output)
	}
	if got := e.metric(t, "chatd_mcp_calls_total", "server", "big", "tool", "huge", "outcome", "too_large"); got != 1 {
		t.Errorf("too_large calls: %v", got)
	}
}

// A server that dies in the middle of a call, by itself or killed: the
// call ends with an error result, and the server is started again.
func TestServerDiesMidCall(t *testing.T) {
	t.Parallel()
	e := faultServer(t, "crashy", func(c *mcp.ServerConfig) { c.Timeout = "60s" })
	first := e.pid()
	res := e.call(t, "crashy__die", `{}`)
	e.sent()
	if !res.IsError || !strings.Contains(string(res.Output), "closed the connection") {
		t.Errorf("die: %s", res.Output)
	}
	second := e.pid() // restarted
	if second == first {
		t.Fatal("same pid")
	}
	done := make(chan mcp.Result)
	go func() {
		tool, _ := e.m.Lookup("m", nil, "crashy__hang")
		res, _ := e.m.Call(t.Context(), tool, json.RawMessage(`{}`))
		done <- res
	}()
	if tool := e.sent(); tool != "hang" {
		t.Fatal(tool)
	}
	// Kill it from outside while the call is in flight.
	if err := syscall.Kill(second, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res = <-done
	if !res.IsError {
		t.Errorf("killed: %s", res.Output)
	}
	e.pid() // and restarted again
	e.until(t, "crashy", func() bool { return e.m.Up("crashy") })
	if res := e.call(t, "crashy__echo", `{"text":"back"}`); res.IsError {
		t.Errorf("after the restart: %s", res.Output)
	}
}

// The child gets the variables its config names and nothing else of
// chatd's environment; the server's stderr reaches the log under its name;
// Close stops the process.
func TestStdioHygiene(t *testing.T) {
	t.Parallel()
	e := faultServer(t, "envy", func(c *mcp.ServerConfig) {
		c.Env = map[string]string{"TOKEN": "CHATD_MCP_TEST_TOKEN", "UNSET": "CHATD_MCP_TEST_UNSET"}
	})
	pid := e.pid()
	res := e.call(t, "envy__env", `{}`)
	var got map[string]string
	var out struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(res.Output, &out); err != nil || len(out.Content) == 0 {
		t.Fatalf("env: %s", res.Output)
	}
	if err := json.Unmarshal([]byte(out.Content[0].Text), &got); err != nil {
		t.Fatal(err)
	}
	if got["TOKEN"] != "token-for-the-server" {
		t.Errorf("TOKEN = %q", got["TOKEN"])
	}
	for k := range got {
		if k != "TOKEN" {
			t.Errorf("the server sees %s, which its config does not name", k)
		}
	}
	if strings.Contains(out.Content[0].Text, "must-not-leak") {
		t.Error("chatd's secret reached the server")
	}
	e.m.Close()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d outlived Close", pid)
	}
}

func TestStderrIsLogged(t *testing.T) {
	t.Parallel()
	e := sharedServers(t)
	e.until(t, "everything", func() bool {
		return strings.Contains(e.logs.String(), `"msg":"mcp server stderr","mcp_server":"everything"`)
	})
}

func TestUnreachableServer(t *testing.T) {
	t.Parallel()
	m := mcp.New([]mcp.ServerConfig{{Name: "gone", Transport: mcp.TransportStdio, Command: "/nonexistent/mcp-server",
		Chats: mcp.ChatsAll, Timeout: "300ms"}}, mcp.Options{RetryBase: 20 * time.Millisecond})
	m.Start(context.Background())
	t.Cleanup(m.Close)
	res, err := m.Call(t.Context(), mcp.Tool{Name: "gone__x", Server: "gone", Tool: "x"}, json.RawMessage(`{}`))
	if err != nil || !res.IsError || !strings.Contains(string(res.Output), "could not be reached") {
		t.Errorf("%s %v", res.Output, err)
	}
}

func TestWhoMayUseAServer(t *testing.T) {
	t.Parallel()
	cmd, args := mcptest.Fault(t)
	optIn := stdio("optin", cmd, args)
	optIn.Chats = mcp.ChatsOptIn
	forModel := stdio("modelonly", cmd, args)
	forModel.Models = []string{"big"}
	denied := stdio("denied", cmd, args)
	denied.Deny = []string{"env"}
	e := start(t, optIn, forModel, denied)
	has := func(model string, optIns []string, name string) bool {
		_, ok := e.m.Lookup(model, optIns, name)
		offered := strings.Contains(" "+strings.Join(names(e.m.Tools(model, optIns)), " ")+" ", " "+name+" ")
		if ok != offered {
			t.Errorf("%s: offered %v but callable %v", name, offered, ok)
		}
		return ok
	}
	cases := []struct {
		model string
		optIn []string
		tool  string
		want  bool
	}{
		{"small", nil, "optin__echo", false},
		{"small", []string{"optin"}, "optin__echo", true},
		{"small", nil, "modelonly__echo", false},
		{"big", nil, "modelonly__echo", true},
		{"small", nil, "denied__echo", true},
		{"small", nil, "denied__env", false},
		{"small", []string{"optin"}, "nosuch__echo", false},
	}
	for _, c := range cases {
		if got := has(c.model, c.optIn, c.tool); got != c.want {
			t.Errorf("model %s, opt-in %v, %s: %v, want %v", c.model, c.optIn, c.tool, got, c.want)
		}
	}
	if err := e.m.Usable("modelonly", "small"); err == nil {
		t.Error("modelonly is usable by small")
	}
	if err := e.m.Usable("nosuch", "small"); err == nil {
		t.Error("an unknown server is usable")
	}
	if !e.m.Reserves("optin__anything") || e.m.Reserves("other__x") || e.m.Reserves("optin") {
		t.Error("Reserves")
	}
}

// A call right after a call that found the server dead waits for the
// restart instead of being sent on the dead connection (which Wait may not
// have noticed yet): a crash costs one error result, not two.
func TestCallAfterACrashWaitsForTheRestart(t *testing.T) {
	t.Parallel()
	e := faultServer(t, "phoenix", func(c *mcp.ServerConfig) { c.Timeout = "60s" })
	for i := range 3 {
		if res := e.call(t, "phoenix__die", `{}`); !res.IsError || !strings.Contains(string(res.Output), "closed the connection") {
			t.Fatalf("die %d: %s", i, res.Output)
		}
		if res := e.call(t, "phoenix__echo", `{"text":"again"}`); res.IsError {
			t.Fatalf("echo after crash %d: %s", i, res.Output)
		}
	}
}
