package pgbouncertest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/childproc"
	"github.com/chatd/chatd/internal/proctest"
)

// chatd is a `chatd server` process a test started.
type chatd struct {
	URL    string
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr strings.Builder
	exited chan struct{}
	err    error // Wait's, once exited is closed
}

// childEnv is the environment without CHATD_* variables: only the test's
// flags configure the child.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHATD_") {
			env = append(env, kv)
		}
	}
	return env
}

// startChatd runs the chatd binary with args, in its own process group,
// killed if the test binary dies and stopped when the test ends. For
// `server` (listen true) it waits until the server listens.
func startChatd(t *testing.T, listen bool, args ...string) *chatd {
	t.Helper()
	c := &chatd{exited: make(chan struct{})}
	c.cmd = exec.Command(proctest.Build(t, "./cmd/server"), args...)
	c.cmd.Env = childEnv()
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	c.cmd.Stderr = pw
	err := childproc.Start(c.cmd, func(err error) {
		c.err = err
		_ = pw.Close()
		close(c.exited)
	})
	if err != nil {
		t.Fatalf("start chatd: %v", err)
	}
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.exited
		}
		if t.Failed() {
			t.Logf("chatd %v:\n%s", args[:1], c.Stderr())
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.mu.Lock()
			c.stderr.Write(sc.Bytes())
			c.stderr.WriteByte('\n')
			c.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "chatd listening" {
				addr <- rec.Addr
			}
		}
	}()
	if !listen {
		return c
	}
	select {
	case a := <-addr:
		c.URL = a
	case <-c.exited:
		t.Fatalf("chatd %v exited at start-up (%v):\n%s", args[:1], c.err, c.Stderr())
	case <-time.After(60 * time.Second):
		t.Fatalf("chatd %v did not listen within 60s:\n%s", args[:1], c.Stderr())
	}
	return c
}

// Stderr is what the process wrote to its standard error so far.
func (c *chatd) Stderr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

// wait waits up to d for the process to exit and returns Wait's error.
func (c *chatd) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-c.exited:
		return c.err
	case <-time.After(d):
		t.Fatalf("chatd did not exit within %s:\n%s", d, c.Stderr())
		return nil
	}
}

// run runs a chatd command to completion and returns its stdout.
func run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), proctest.Build(t, "./cmd/server"), args...)
	cmd.Env = childEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chatd %v: %v\n%s", args, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// writeConfig writes a config whose one model is mockllm's (the real
// binary, answering every structured request with a valid value).
func writeConfig(t *testing.T, mockURL string) string {
	t.Helper()
	cfg := map[string]any{
		"providers":     []map[string]any{{"name": "mock", "type": "openai-compatible", "base_url": mockURL + "/v1"}},
		"models":        []map[string]any{{"id": "mock/model", "provider": "mock", "model": "mock-1"}},
		"default_model": "mock/model",
	}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), "chatd.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const schema = `{"type":"object","properties":{"title":{"type":"string","minLength":1},"count":{"type":"integer","minimum":0}},` +
	`"required":["title","count"],"additionalProperties":false}`

func structured() *client.ResponseFormat {
	return &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(schema)}}
}

func text(s string) []client.MessagePart { return []client.MessagePart{client.TextPart(s)} }

// waitSucceeded long-polls a structured request until it is terminal, and
// says why unless it succeeded with a receipt.
func waitSucceeded(ctx context.Context, c *client.Client, req uuid.UUID) error {
	res, err := c.WaitStructuredOutput(ctx, req)
	if err != nil {
		return err
	}
	if res.Status != client.OutputSucceeded || res.ReceiptMessageID == nil {
		return fmt.Errorf("request %s: %s (%+v), want succeeded with a receipt", req, res.Status, res.Error)
	}
	return nil
}

// newClient is an API client of server s for token.
func newClient(s *chatd, token string) *client.Client {
	return client.New(s.URL, token, &http.Client{Timeout: 60 * time.Second})
}
