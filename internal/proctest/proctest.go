// Package proctest builds the repository's commands and runs them as real
// processes for tests: the mockllm binary a reader starts with `make
// mockllm`, the chatd binary. Test code only.
package proctest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	mu     sync.Mutex
	built  = map[string]string{} // package -> binary
	binDir string
)

// Root is the repository's root directory (where go.mod is).
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("proctest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Build compiles a command of the repository (such as "./cmd/mockllm")
// once per test process and returns the binary's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if bin, ok := built[pkg]; ok {
		return bin
	}
	if binDir == "" {
		dir, err := os.MkdirTemp("", "chatd-proctest-")
		if err != nil {
			t.Fatal(err)
		}
		binDir = dir
	}
	bin := filepath.Join(binDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", bin, pkg)
	cmd.Dir = Root(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	built[pkg] = bin
	return bin
}

// Cleanup removes the binaries; call it from TestMain after the tests.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}

// Process is a command started by a test.
type Process struct {
	// URL is the base URL it serves (mockllm: without /v1).
	URL string

	cmd    *exec.Cmd
	stderr *syncWriter
	once   sync.Once
}

// Stop sends SIGTERM and waits for the process (10s, then SIGKILL). It may
// be called more than once; the test's cleanup calls it too.
func (p *Process) Stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	})
}

// Stderr is what the process wrote to its standard error so far.
func (p *Process) Stderr() string { return p.stderr.String() }

// Mockllm starts the real mockllm binary on a free loopback port, in the
// repository's root, with the given flags (--listen is added). It is
// stopped when the test ends; stopping it (SIGTERM) releases held requests.
func Mockllm(t testing.TB, args ...string) *Process {
	t.Helper()
	bin := Build(t, "./cmd/mockllm")
	p := &Process{cmd: exec.Command(bin, append([]string{"--listen", "127.0.0.1:0"}, args...)...),
		stderr: &syncWriter{w: &strings.Builder{}}}
	p.cmd.Dir = Root(t)
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		for sc.Scan() { // keep the pipe drained
		}
	}()
	select {
	case line, ok := <-first:
		url, found := strings.CutPrefix(line, "mockllm listening on ")
		if !ok || !found {
			t.Fatalf("mockllm %v did not start: %q\n%s", args, line, p.Stderr())
		}
		p.URL = strings.TrimSuffix(url, "/v1")
	case <-time.After(30 * time.Second):
		t.Fatalf("mockllm %v did not start in 30s\n%s", args, p.Stderr())
	}
	return p
}

// syncWriter serialises writes (a process's stderr is copied by its own
// goroutine while a test may read it).
type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// String is what was written so far.
func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
