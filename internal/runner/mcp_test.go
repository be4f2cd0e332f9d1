package runner_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/check"
	"github.com/chatd/chatd/internal/mcp"
	"github.com/chatd/chatd/internal/mcp/mcptest"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/prom"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

// mcpSecret is in the test binary's environment under this name, which no
// server's config names: it must never reach a server, nor a stored result.
const (
	mcpSecretEnv = "CHATD_RUNNER_MCP_SECRET"
	mcpSecret    = "runner-secret-must-not-leak"
)

// mcpServers are the package's MCP servers, started once and shared (three
// node processes in all); TestMain closes them. Tests that kill or restart
// a server use the one named "crashy", one at a time (TestMCPFaultsOfTheProcess).
type mcpServers struct {
	m        *mcp.Manager
	reg      *prometheus.Registry
	record   map[string]string // RECORD_FILE of each fault server
	signals  *mcp.TestSignals  // Started is read by TestMCPFaultsOfTheProcess alone
	pids     map[string]int    // the latest process of each server read from Started
	mu       sync.Mutex
	onCall   func(mcp.Tool)
	startErr error
}

var (
	mcpOnce   sync.Once
	mcpShared *mcpServers
)

func stopMCP() {
	if mcpShared != nil {
		mcpShared.m.Close()
		for _, f := range mcpShared.record {
			os.Remove(f)
		}
	}
}

// sharedMCP starts, on first use: "everything" (server-everything over
// stdio, opt-in), "faulty" (the fault server, for all chats, 60s timeout,
// not idempotent) and "crashy" (the fault server, for chats that opt in,
// idempotent, 10s timeout).
func sharedMCP(t *testing.T) *mcpServers {
	t.Helper()
	mcpOnce.Do(func() {
		s := &mcpServers{reg: prometheus.NewRegistry(), record: map[string]string{}, signals: &mcp.TestSignals{}, pids: map[string]int{}}
		mcpShared = s
		node, everything := mcptest.Everything(t, "stdio")
		_, fault := mcptest.Fault(t)
		env := map[string]string{}
		for _, name := range []string{"faulty", "crashy"} {
			f, err := os.CreateTemp("", "chatd-mcp-record-")
			if err != nil {
				s.startErr = err
				return
			}
			f.Close()
			s.record[name] = f.Name()
			env["RECORD_"+strings.ToUpper(name)] = f.Name()
		}
		cfgs := []mcp.ServerConfig{
			{Name: "everything", Transport: mcp.TransportStdio, Command: node, Args: everything},
			{Name: "faulty", Transport: mcp.TransportStdio, Command: node, Args: fault, Chats: mcp.ChatsAll, Timeout: "60s",
				Env: map[string]string{"RECORD_FILE": "RECORD_FAULTY"}},
			{Name: "crashy", Transport: mcp.TransportStdio, Command: node, Args: fault, Timeout: "10s", Idempotent: true,
				Env: map[string]string{"RECORD_FILE": "RECORD_CRASHY"}},
		}
		s.signals.Started.Init()
		s.signals.Sending.InitFunc(func(t mcp.Tool) {
			s.mu.Lock()
			f := s.onCall
			s.mu.Unlock()
			if f != nil {
				f(t)
			}
		})
		// RetryMax is short: a server the tests killed is started again
		// promptly even when no call waits for it.
		s.m = mcp.New(cfgs, mcp.Options{
			Metrics: s.reg, Reserved: []string{runner.FinalizerName}, RetryBase: 50 * time.Millisecond, RetryMax: time.Second,
			Logger: slog.New(slog.DiscardHandler),
			Getenv: func(k string) (string, bool) {
				if v, ok := env[k]; ok {
					return v, true
				}
				return os.LookupEnv(k)
			},
			TestSignals: s.signals,
		})
		s.m.Start(context.Background())
		for _, c := range cfgs {
			if err := s.until(c.Name, 60*time.Second, func() bool { return s.m.Up(c.Name) }); err != nil {
				s.startErr = err
				return
			}
		}
	})
	if mcpShared.startErr != nil {
		t.Fatalf("MCP servers: %v", mcpShared.startErr)
	}
	return mcpShared
}

func (s *mcpServers) until(server string, d time.Duration, cond func() bool) error {
	timeout := time.After(d)
	for {
		ch := s.m.Changed(server)
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-timeout:
			return context.DeadlineExceeded
		}
	}
}

// lastStart reads the starts signalled so far and returns the pid of
// server's latest process.
func (s *mcpServers) lastStart(server string) int {
	for len(s.signals.Started.C()) > 0 {
		c := <-s.signals.Started.C()
		s.pids[c.Server] = c.PID
	}
	return s.pids[server]
}

// nextStart waits for server's process to be started again, after those
// lastStart read, and connected.
func (s *mcpServers) nextStart(t *testing.T, server string) {
	t.Helper()
	for {
		select {
		case c := <-s.signals.Started.C():
			s.pids[c.Server] = c.PID
			if c.Server != server {
				continue
			}
			if err := s.until(server, 60*time.Second, func() bool { return s.m.Up(server) }); err != nil {
				t.Fatalf("%s started again but did not connect: %v", server, err)
			}
			return
		case <-t.Context().Done():
			t.Fatalf("%s was not started again", server)
		}
	}
}

// watchCalls reports the calls of one server's tool as they are sent.
func (s *mcpServers) watchCalls(t *testing.T, server, tool string) <-chan struct{} {
	ch := make(chan struct{}, 8)
	s.mu.Lock()
	s.onCall = func(t mcp.Tool) {
		if t.Server == server && t.Tool == tool {
			ch <- struct{}{}
		}
	}
	s.mu.Unlock()
	t.Cleanup(func() {
		s.mu.Lock()
		s.onCall = nil
		s.mu.Unlock()
	})
	return ch
}

func (s *mcpServers) recorded(t *testing.T, server string) int {
	t.Helper()
	b, err := os.ReadFile(s.record[server])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "called ")
}

func createMCP(t *testing.T, c *client.Client, optIn ...string) (uuid.UUID, uuid.UUID) {
	t.Helper()
	res, err := c.CreateChat(t.Context(), client.CreateChatRequest{
		Content:        []client.MessagePart{client.TextPart("Report the test command.")},
		ResponseFormat: structured(reportSchema), MCPServers: optIn,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.Chat.ID, *res.Messages[0].StructuredOutputRequestID
}

// toolResults are the stored tool results of a chat, by tool name.
func toolResults(t *testing.T, env *testenv.Env, chat uuid.UUID) map[string][]string {
	t.Helper()
	rows, err := env.Pool.Query(t.Context(), `SELECT p->>'tool_name', coalesce(p->>'is_error', 'false'), p->>'result'
		FROM chat_messages m, jsonb_array_elements(m.content) p
		WHERE m.chat_id = $1 AND m.role = 'tool' AND p->>'type' = 'tool-result' ORDER BY m.id`, chat)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var name, isError, result string
		if err := rows.Scan(&name, &isError, &result); err != nil {
			t.Fatal(err)
		}
		out[name] = append(out[name], "is_error="+isError+" "+result)
	}
	return out
}

func checkClean(t *testing.T, env *testenv.Env) {
	t.Helper()
	rep, err := check.Run(t.Context(), env.Pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Errorf("chatd check: %v", v)
	}
}

func oneReceipt(t *testing.T, env *testenv.Env, req uuid.UUID) {
	t.Helper()
	var n int
	if err := env.Pool.QueryRow(t.Context(), `SELECT count(*) FROM chat_messages WHERE structured_request_id = $1 AND kind = 'receipt'`, req).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d receipts (%v)", n, err)
	}
}

// A structured turn calls a tool of a real MCP server (server-everything's
// echo, over stdio), sees its result, and finalizes, through the HTTP API.
// The call is journaled once; the tools of servers the chat did not opt
// into are neither offered nor callable.
func TestMCPToolThenFinalize(t *testing.T) {
	t.Parallel()
	s := sharedMCP(t)
	script := &mockllm.Script{Steps: []mockllm.Step{
		{ToolCalls: []mockllm.ToolCall{{Name: "everything__echo", Arguments: `{"message":"make test"}`}}},
		{Value: json.RawMessage(`{"command":"make test"}`)},
	}}
	env := testenv.New(t, testenv.Options{MCP: s.m, Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	chat, req := createMCP(t, c, "everything")
	if res := wait(t, c, req); res.Status != client.OutputSucceeded || !jsonEqual(t, res.Value, json.RawMessage(`{"command":"make test"}`)) {
		t.Fatalf("result %+v %s", res, res.Value)
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")
	reqs := env.Mock.Requests()
	first := reqs[0]
	if first.Tool("everything__echo") == nil || first.Tool("faulty__echo") == nil || first.Tool(runner.FinalizerName) == nil {
		t.Fatalf("tools offered: %+v", first.Tools)
	}
	if first.Tool("crashy__echo") != nil {
		t.Error("a server the chat did not opt into is offered")
	}
	msgs := reqs[1].Messages
	if m := msgs[len(msgs)-1]; m.Role != "tool" || !strings.Contains(m.Content, "Echo: make test") {
		t.Fatalf("the model saw %+v", m)
	}
	results := toolResults(t, env, chat)
	if r := results["everything__echo"]; len(r) != 1 || !strings.HasPrefix(r[0], "is_error=false") || !strings.Contains(r[0], `"text": "Echo: make test"`) {
		t.Errorf("stored result %v", r)
	}
	var sends int
	if err := env.Pool.QueryRow(t.Context(), `SELECT attempts FROM mcp_calls c JOIN chat_messages m ON m.id = c.message_id
		WHERE m.chat_id = $1 AND c.server = 'everything' AND c.tool = 'echo'`, chat).Scan(&sends); err != nil || sends != 1 {
		t.Errorf("journal: %d sends (%v)", sends, err)
	}
	oneReceipt(t, env, req)
	checkClean(t, env)
}

// A chat reaches only the tools it may use: a server it did not opt into,
// or a tool outside the offer, is an unknown tool, never called.
func TestMCPToolsNotAllowedAreNotReached(t *testing.T) {
	t.Parallel()
	s := sharedMCP(t)
	script := &mockllm.Script{Steps: []mockllm.Step{
		{ToolCalls: []mockllm.ToolCall{
			{ID: "a", Name: "everything__echo", Arguments: `{"message":"x"}`},
			{ID: "b", Name: "crashy__record", Arguments: `{}`},
			{ID: "c", Name: "faulty__bad.name", Arguments: `{}`},
		}},
		{Value: json.RawMessage(`{"command":"none"}`)},
	}}
	env := testenv.New(t, testenv.Options{MCP: s.m, Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	before := s.recorded(t, "crashy")
	chat, req := createMCP(t, c) // opts into nothing; faulty is for all chats
	if res := wait(t, c, req); res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v", res)
	}
	results := toolResults(t, env, chat)
	for _, name := range []string{"everything__echo", "crashy__record", "faulty__bad.name"} {
		if r := results[name]; len(r) != 1 || !strings.Contains(r[0], "Unknown tool") {
			t.Errorf("%s: %v", name, r)
		}
	}
	if s.recorded(t, "crashy") != before {
		t.Error("crashy__record ran for a chat that did not opt in")
	}
	var n int
	_ = env.Pool.QueryRow(t.Context(), `SELECT count(*) FROM mcp_calls c JOIN chat_messages m ON m.id = c.message_id WHERE m.chat_id = $1`, chat).Scan(&n)
	if n != 0 {
		t.Errorf("%d calls journaled", n)
	}
	oneReceipt(t, env, req)
}

// Every failure of a server ends in an error result and the turn goes on
// to its one receipt: a hanging call (crashy's 10s deadline), 10 MiB
// answered, tools refused at admission (a remote $ref, 100 levels deep, the
// finalizer's name), and a server's environment: only what its config names.
func TestMCPFaultsEndInErrorResults(t *testing.T) {
	t.Parallel()
	s := sharedMCP(t)
	script := &mockllm.Script{Steps: []mockllm.Step{
		{ToolCalls: []mockllm.ToolCall{{Name: "crashy__hang", Arguments: `{}`}}},
		{ToolCalls: []mockllm.ToolCall{{Name: "faulty__huge", Arguments: `{}`}}},
		{ToolCalls: []mockllm.ToolCall{
			{ID: "r", Name: "faulty__remote_ref", Arguments: `{}`},
			{ID: "d", Name: "faulty__deep", Arguments: `{}`},
			{ID: "f", Name: "faulty__coder_structured_output", Arguments: `{"output":{"command":"hijacked"}}`},
		}},
		{ToolCalls: []mockllm.ToolCall{{Name: "faulty__env", Arguments: `{}`}}},
		{Value: json.RawMessage(`{"command":"make test"}`)},
	}}
	env := testenv.New(t, testenv.Options{MCP: s.m, Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	chat, req := createMCP(t, c, "crashy")
	if res := wait(t, c, req); res.Status != client.OutputSucceeded || !jsonEqual(t, res.Value, json.RawMessage(`{"command":"make test"}`)) {
		t.Fatalf("result %+v %s", res, res.Value)
	}
	first := env.Mock.Requests()[0]
	for _, refused := range []string{"faulty__remote_ref", "faulty__deep", "faulty__coder_structured_output", "faulty__bad.name"} {
		if first.Tool(refused) != nil {
			t.Errorf("%s is offered", refused)
		}
	}
	results := toolResults(t, env, chat)
	want := map[string]string{
		"crashy__hang":                    "did not answer within 10s",
		"faulty__huge":                    "over the limit",
		"faulty__remote_ref":              "Unknown tool",
		"faulty__deep":                    "Unknown tool",
		"faulty__coder_structured_output": "Unknown tool",
	}
	for name, text := range want {
		if r := results[name]; len(r) != 1 || !strings.HasPrefix(r[0], "is_error=true") || !strings.Contains(r[0], text) {
			t.Errorf("%s: %.300v, want an error saying %q", name, r, text)
		}
	}
	if r := results["faulty__env"]; len(r) != 1 || strings.Contains(r[0], mcpSecret) || strings.Contains(r[0], mcpSecretEnv) ||
		strings.Contains(r[0], "PATH") || !strings.Contains(r[0], "RECORD_FILE") {
		t.Errorf("the server's environment: %v", r)
	}
	var largest int
	_ = env.Pool.QueryRow(t.Context(), `SELECT max(octet_length(content::text)) FROM chat_messages WHERE chat_id = $1`, chat).Scan(&largest)
	if largest > 64<<10 {
		t.Errorf("a %d-byte row was stored", largest)
	}
	oneReceipt(t, env, req)
	checkClean(t, env)
}

// The processes behind the calls fail: a server that exits mid-call, one
// killed from outside mid-call (both: an error result, the server is
// started again, the turn goes on), and workers that stop mid-call (the
// at-least-once rule: an idempotent server's call is sent again, a
// non-idempotent one's is answered with an error and never repeated).
// One at a time: they kill and restart the shared "crashy" server.
func TestMCPFaultsOfTheProcess(t *testing.T) {
	s := sharedMCP(t)
	notRepeated := func() float64 { // the registry is the package's: count this run's (-count)
		g, err := prom.Gather(s.reg)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := g.Get("chatd_mcp_calls_total", "server", "faulty", "tool", "record", "outcome", "not_repeated")
		return n
	}
	notRepeated0 := notRepeated()

	t.Run("server exits mid-call", func(t *testing.T) {
		// The echo after the crash is held until crashy is back: its 10s
		// are for the call, while a node start on a loaded machine can
		// take longer.
		script := &mockllm.Script{Steps: []mockllm.Step{
			{ToolCalls: []mockllm.ToolCall{{Name: "crashy__die", Arguments: `{}`}}},
			{ToolCalls: []mockllm.ToolCall{{Name: "crashy__echo", Arguments: `{"text":"back"}`}}, Hold: true},
			{Value: json.RawMessage(`{"command":"make test"}`)},
		}}
		s.until("crashy", 60*time.Second, func() bool { return s.m.Up("crashy") })
		s.lastStart("crashy")
		died := s.watchCalls(t, "crashy", "die")
		env := testenv.New(t, testenv.Options{MCP: s.m, Mock: mockllm.Options{Script: script}})
		c := env.Client("alice")
		chat, req := createMCP(t, c, "crashy")
		<-died
		s.nextStart(t, "crashy")
		env.Mock.Release()
		if res := wait(t, c, req); res.Status != client.OutputSucceeded {
			t.Fatalf("result %+v", res)
		}
		results := toolResults(t, env, chat)
		if r := results["crashy__die"]; len(r) != 1 || !strings.Contains(r[0], "closed the connection") {
			t.Errorf("die: %v", r)
		}
		if r := results["crashy__echo"]; len(r) != 1 || !strings.HasPrefix(r[0], "is_error=false") || !strings.Contains(r[0], "back") {
			t.Errorf("after the restart: %v", r)
		}
		oneReceipt(t, env, req)
		checkClean(t, env)
	})

	t.Run("server killed mid-call", func(t *testing.T) {
		s.until("crashy", 60*time.Second, func() bool { return s.m.Up("crashy") })
		pid := s.lastStart("crashy")
		calls := s.watchCalls(t, "crashy", "hang")
		script := &mockllm.Script{Steps: []mockllm.Step{
			{ToolCalls: []mockllm.ToolCall{{Name: "crashy__hang", Arguments: `{}`}}},
			{Value: json.RawMessage(`{"command":"make test"}`)},
		}}
		env := testenv.New(t, testenv.Options{MCP: s.m, Mock: mockllm.Options{Script: script}})
		c := env.Client("alice")
		chat, req := createMCP(t, c, "crashy")
		<-calls
		if pid == 0 {
			t.Fatal("no pid of crashy")
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if res := wait(t, c, req); res.Status != client.OutputSucceeded {
			t.Fatalf("result %+v", res)
		}
		if r := toolResults(t, env, chat)["crashy__hang"]; len(r) != 1 || !strings.HasPrefix(r[0], "is_error=true") {
			t.Errorf("killed: %v", r)
		}
		oneReceipt(t, env, req)
		checkClean(t, env)
	})

	for _, tc := range []struct {
		server     string
		idempotent bool
	}{{"crashy", true}, {"faulty", false}} {
		t.Run("worker stops mid-call, idempotent "+map[bool]string{true: "true", false: "false"}[tc.idempotent], func(t *testing.T) {
			s.until(tc.server, 60*time.Second, func() bool { return s.m.Up(tc.server) })
			calls := s.watchCalls(t, tc.server, "record")
			before := s.recorded(t, tc.server)
			tool := tc.server + "__record"
			script := &mockllm.Script{Steps: []mockllm.Step{
				{ToolCalls: []mockllm.ToolCall{{Name: tool, Arguments: `{"hang_once":"` + uuid.NewString() + `"}`}}},
				{Value: json.RawMessage(`{"command":"make test"}`)},
			}}
			env := testenv.New(t, testenv.Options{MCP: s.m, Mock: mockllm.Options{Script: script},
				Runner: runner.Options{DrainTimeout: 100 * time.Millisecond}})
			c := env.Client("alice")
			chat, req := createMCP(t, c, tc.server)
			<-calls
			env.StopRunner() // the call is cut off: nothing is committed
			if r := toolResults(t, env, chat)[tool]; len(r) != 0 {
				t.Fatalf("a result was committed: %v", r)
			}
			env.StartRunner()
			if res := wait(t, c, req); res.Status != client.OutputSucceeded {
				t.Fatalf("result %+v", res)
			}
			r := toolResults(t, env, chat)[tool]
			var sends int
			_ = env.Pool.QueryRow(t.Context(), `SELECT attempts FROM mcp_calls c JOIN chat_messages m ON m.id = c.message_id WHERE m.chat_id = $1`, chat).Scan(&sends)
			got := s.recorded(t, tc.server) - before
			if tc.idempotent {
				// Sent again (the server hangs only on the first send of a key).
				if got != 2 || sends != 2 || len(r) != 1 || !strings.HasPrefix(r[0], "is_error=false") || !strings.Contains(r[0], "recorded") {
					t.Errorf("made %d times, journal %d, result %v", got, sends, r)
				}
			} else {
				if got != 1 || sends != 2 || len(r) != 1 || !strings.Contains(r[0], "is not repeated") {
					t.Errorf("made %d times, journal %d, result %v", got, sends, r)
				}
			}
			oneReceipt(t, env, req)
			checkClean(t, env)
		})
	}
	if got := notRepeated() - notRepeated0; got != 1 {
		t.Errorf("not_repeated calls: %v", got)
	}
}
