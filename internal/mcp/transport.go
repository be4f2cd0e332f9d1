package mcp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatd/chatd/internal/childproc"
)

// Getenv reads chatd's environment; tests give each server its own.
type Getenv func(string) (string, bool)

// transport builds the connection to one server.
func (s *server) transport() (sdk.Transport, error) {
	if s.cfg.Transport == TransportHTTP {
		h := http.Header{}
		for name, v := range s.cfg.Headers {
			val, ok := s.m.getenv(v)
			if !ok {
				return nil, fmt.Errorf("header %s: environment variable %s is not set", name, v)
			}
			h.Set(name, val)
		}
		return &sdk.StreamableClientTransport{
			Endpoint:     s.cfg.URL,
			HTTPClient:   &http.Client{Transport: &headerTransport{base: pooled, header: h}},
			MaxRetries:   2,
			MaxEventSize: MaxMessageBytes,
		}, nil
	}
	return &stdioTransport{s: s}, nil
}

// pooled carries the calls to HTTP servers: http.DefaultTransport's
// configuration keeping 64 idle connections per host where it keeps 2, so
// that the calls workers make at once to one server do not close their
// connections and dial (and shake hands) again.
var pooled = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}()

// headerTransport adds the configured headers and caps response bodies that
// are not event streams (one JSON-RPC message each).
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.header {
		r.Header[k] = v
	}
	res, err := t.base.RoundTrip(r)
	if err == nil && !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		res.Body = &limitedBody{ReadCloser: res.Body, left: MaxMessageBytes}
	}
	return res, err
}

var errMessageTooLarge = fmt.Errorf("a message from the MCP server exceeds %d bytes", MaxMessageBytes)

type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errMessageTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// stdioTransport runs the server's command: no shell, only the named
// environment variables, its own process group (so the whole tree is
// stopped with it), and on Linux a SIGKILL when chatd itself dies.
type stdioTransport struct{ s *server }

func (t *stdioTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	cfg := t.s.cfg
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = cfg.Dir
	cmd.Env = []string{} // never nil: nil would hand over chatd's environment
	for child, parent := range cfg.Env {
		if v, ok := t.s.m.getenv(parent); ok {
			cmd.Env = append(cmd.Env, child+"="+v)
		}
	}
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = stopGrace // a grandchild holding stderr open cannot hold Wait
	// Our own pipes: exec's StdoutPipe would be closed by Wait while a
	// final message is still being read.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	stderr := &lineLogger{log: t.s.log}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	p := &process{cmd: cmd, stdin: inW, stdout: outR, exited: make(chan struct{})}
	if err := p.run(stderr); err != nil {
		for _, f := range []*os.File{inR, inW, outR, outW} {
			f.Close()
		}
		return nil, fmt.Errorf("start %s: %w", cfg.Command, err)
	}
	inR.Close()
	outW.Close()
	t.s.m.opts.TestSignals.Started.Signal(Child{Server: cfg.Name, PID: cmd.Process.Pid})
	return (&sdk.IOTransport{Reader: outR, Writer: p, MaxLineLength: MaxMessageBytes}).Connect(ctx)
}

// process is the child's stdin; closing it stops the child: stdin is
// closed, then the group gets SIGTERM, then SIGKILL.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	exited chan struct{}
	err    error
	once   sync.Once
}

// Grace periods of a stopping child.
var (
	stopGrace = 2 * time.Second
	termGrace = 2 * time.Second
)

// run starts the child and waits for it in the background (childproc:
// another goroutine's exit must not take the child's Pdeathsig with it).
func (p *process) run(stderr *lineLogger) error {
	return childproc.Start(p.cmd, func(err error) {
		p.err = err
		stderr.flush()
		close(p.exited)
	})
}

func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

func (p *process) Close() error {
	p.once.Do(func() {
		p.stdin.Close()
		pgid := -p.cmd.Process.Pid
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
			_ = syscall.Kill(pgid, syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(termGrace):
			}
		}
		// The group may outlive its leader; nothing of it stays.
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.exited
		p.stdout.Close()
	})
	return nil
}

// lineLogger logs a child's stderr line by line under the server's name.
type lineLogger struct {
	log *slog.Logger
	mu  sync.Mutex
	buf bytes.Buffer
}

// maxLogLine cuts long stderr lines.
const maxLogLine = 4096

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		i := bytes.IndexByte(l.buf.Bytes(), '\n')
		if i < 0 {
			break
		}
		l.emit(l.buf.Next(i + 1))
	}
	if l.buf.Len() > maxLogLine {
		l.emit(l.buf.Next(l.buf.Len()))
	}
	return len(p), nil
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() > 0 {
		l.emit(l.buf.Next(l.buf.Len()))
	}
}

func (l *lineLogger) emit(line []byte) {
	s := strings.TrimRight(string(line), "\r\n")
	if len(s) > maxLogLine {
		s = s[:maxLogLine] + "…"
	}
	if s != "" {
		l.log.Info("mcp server stderr", slog.String("line", s))
	}
}
