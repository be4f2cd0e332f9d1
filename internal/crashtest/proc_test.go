package crashtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/childproc"
)

// serverOpts start one `chatd server` process.
type serverOpts struct {
	Name    string // for logs: "a", "b", "slot0.3"
	DB      string // --database-url
	Config  string // --config file
	Workers int
	Lease   time.Duration
	Drain   time.Duration
	Extra   []string
	// Quiet: the caller reports the log on failure (see cluster.report).
	Quiet bool
	// Env are more environment variables (OTEL_*, for traces).
	Env []string
}

// server is a running `chatd server` child process.
type server struct {
	t       *testing.T
	name    string
	cmd     *exec.Cmd
	URL     string
	LogPath string
	log     *logTee

	exited  chan struct{}
	waitErr error
	exitAt  time.Time
}

// childEnv is our environment without CHATD_* variables, so that only the
// flags the test passes configure the child.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHATD_") {
			env = append(env, kv)
		}
	}
	return env
}

// startServer starts chatd server on a free loopback port and waits until
// it listens. The process is in its own process group, gets SIGKILL if the
// test binary dies (Pdeathsig), and is killed when the test ends.
func startServer(t *testing.T, o serverOpts) *server {
	t.Helper()
	bin := chatdBinary(t)
	if o.Lease == 0 {
		o.Lease = 2 * time.Second
	}
	if o.Drain == 0 {
		o.Drain = 5 * time.Second
	}
	args := []string{"server", "--listen", "127.0.0.1:0", "--database-url", o.DB, "--migrate",
		"--experiments", "chat-structured-output", "--workers", strconv.Itoa(o.Workers),
		"--lease", o.Lease.String(), "--drain-timeout", o.Drain.String(), "--log-format", "json", "--log-level", "info"}
	if o.Config != "" {
		args = append(args, "--config", o.Config)
	}
	args = append(args, o.Extra...)
	logPath := filepath.Join(t.TempDir(), "chatd-"+o.Name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, name: o.Name, LogPath: logPath, exited: make(chan struct{})}
	s.log = newLogTee(logFile)
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = append(childEnv(), o.Env...)
	s.cmd.Stdout = s.log
	s.cmd.Stderr = s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = childproc.Start(s.cmd, func(err error) {
		s.waitErr, s.exitAt = err, time.Now()
		logFile.Close()
		close(s.exited)
	})
	if err != nil {
		logFile.Close()
		t.Fatalf("start chatd %s: %v", o.Name, err)
	}
	t.Cleanup(func() {
		s.signal(syscall.SIGKILL)
		<-s.exited
		if t.Failed() && !o.Quiet {
			t.Logf("chatd %s log (%s), last lines:\n%s", s.name, logPath, tailFile(logPath, 30))
		}
	})
	select {
	case addr := <-s.log.listening:
		s.URL = addr
	case <-s.exited:
		t.Fatalf("chatd %s exited during start-up (%v):\n%s", o.Name, s.waitErr, tailFile(logPath, 30))
	case <-time.After(90 * time.Second):
		t.Fatalf("chatd %s did not listen within 90s:\n%s", o.Name, tailFile(logPath, 30))
	}
	return s
}

// signal sends sig to the child's process group (only processes this
// test started are in it).
func (s *server) signal(sig syscall.Signal) {
	select {
	case <-s.exited:
		return
	default:
	}
	if s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, sig)
	}
}

// kill SIGKILLs the server and waits until it is gone.
func (s *server) kill() {
	s.signal(syscall.SIGKILL)
	<-s.exited
}

// wait waits for the process to exit (at most d) and returns its exit
// code (-1 if killed by a signal or still running).
func (s *server) wait(d time.Duration) (int, bool) {
	select {
	case <-s.exited:
	case <-time.After(d):
		return -1, false
	}
	if s.waitErr == nil {
		return 0, true
	}
	var ee *exec.ExitError
	if errors.As(s.waitErr, &ee) {
		return ee.ExitCode(), true
	}
	return -1, true
}

// client returns an API client for token.
func (s *server) client(token string) *client.Client {
	return client.New(s.URL, token, &http.Client{Timeout: 60 * time.Second})
}

// ready reports whether GET /readyz answers 200.
func (s *server) ready(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := client.New(s.URL, "", nil).Ready(ctx)
	return err == nil
}

// logTee writes the child's output to a file and watches it for the
// listening address.
type logTee struct {
	mu        sync.Mutex
	w         io.Writer
	buf       bytes.Buffer
	listening chan string
}

func newLogTee(w io.Writer) *logTee {
	return &logTee{w: w, listening: make(chan string, 1)}
}

// Write is called by exec's copying goroutine.
func (l *logTee) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.w.Write(p)
	l.buf.Write(p)
	for {
		i := bytes.IndexByte(l.buf.Bytes(), '\n')
		if i < 0 {
			break
		}
		l.line(l.buf.Next(i + 1)[:i])
	}
	return n, err
}

func (l *logTee) line(b []byte) {
	var rec struct {
		Msg  string `json:"msg"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal(b, &rec) == nil && rec.Msg == "chatd listening" && rec.Addr != "" {
		select {
		case l.listening <- rec.Addr:
		default:
		}
	}
}

func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// runChatd runs a chatd command to completion and returns its stdout.
func runChatd(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(chatdBinary(t), args...)
	cmd.Env = childEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err := childproc.Run(cmd)
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("chatd %v: %v", args, err)
	}
	if code != 0 && stderr.Len() > 0 {
		t.Logf("chatd %v stderr: %s", args, stderr.String())
	}
	return stdout.String(), code
}

// newToken creates a user and token with `chatd token create`.
func newToken(t *testing.T, db, user string) string {
	t.Helper()
	out, code := runChatd(t, "token", "create", "--user", user, "--database-url", db)
	if code != 0 {
		t.Fatalf("token create: exit %d", code)
	}
	return strings.TrimSpace(out)
}

// writeConfig writes a config with two models on the mock at mockURL: the
// default over Chat Completions and geminiModel over the Gemini API
// (thinking on, thought summaries included); the providers send header
// X-Crash-Proc: proc so the mock knows which process called.
func writeConfig(t *testing.T, mockURL, workspace, proc string) string {
	t.Helper()
	cfg := map[string]any{
		"providers": []map[string]any{{"name": "mock", "type": "openai-compatible", "base_url": mockURL + "/v1",
			"headers": map[string]string{procHeader: proc}},
			{"name": "gemini", "type": "google", "base_url": mockURL, "headers": map[string]string{procHeader: proc}}},
		"models": []map[string]any{{"id": "mock/model", "provider": "mock", "model": "mock-1"},
			{"id": geminiModel, "provider": "gemini", "model": "gemini-3-pro-preview", "thinking_level": "low", "include_thoughts": true}},
		"default_model": "mock/model",
	}
	if workspace != "" {
		cfg["workspace"] = workspace
	}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), fmt.Sprintf("chatd-%s.json", proc))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// procHeader names the server process that made a provider request.
const procHeader = "X-Crash-Proc"

// geminiModel is the configured model that speaks the Gemini API.
const geminiModel = "mock/gemini"

// logSummary counts a server log's warnings and errors by message (and the
// start of their error text), for the test's own log.
func logSummary(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct{ Level, Msg, Error string }
		if json.Unmarshal(sc.Bytes(), &rec) != nil || (rec.Level != "WARN" && rec.Level != "ERROR") {
			continue
		}
		e := rec.Error
		if len(e) > 60 {
			e = e[:60]
		}
		counts[fmt.Sprintf("%s %q %s", rec.Level, rec.Msg, e)]++
	}
	var lines []string
	for k, n := range counts {
		lines = append(lines, fmt.Sprintf("%4d %s", n, k))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// logErrors returns the error texts of the log records with message msg.
func logErrors(path, msg string) []string {
	f, err := os.Open(path)
	if err != nil {
		return []string{err.Error()}
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct{ Msg, Path, Error string }
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == msg {
			out = append(out, rec.Path+": "+rec.Error)
		}
	}
	return out
}
