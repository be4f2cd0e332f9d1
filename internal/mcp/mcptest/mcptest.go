// Package mcptest finds (and on first use installs) the real MCP servers
// the tests run: the pinned npm packages of internal/mcp/testdata/npm and
// its fault server. Test code only.
package mcptest

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/childproc"
)

// Dir is the npm project holding the servers.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "npm")
}

// Node returns the node binary after making sure the pinned packages are
// installed (npm ci from the committed lockfile, once per machine). Without
// node or npm the test is skipped, or fails under CI=true.
func Node(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = exec.LookPath("npm")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node and npm are required (make mcp-deps installs them): %v", err)
		}
		t.Skipf("node and npm are not installed (make mcp-deps installs them): %v", err)
	}
	if err := install(); err != nil {
		t.Fatalf("installing the MCP test servers: %v", err)
	}
	return node
}

// install runs npm ci unless node_modules matches the lockfile; a lock
// file keeps concurrent test packages from installing twice.
func install() error {
	dir := Dir()
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "chatd-mcp-npm.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	lockfile, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(lockfile)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(dir, "node_modules", ".chatd-lock-sha256")
	if have, err := os.ReadFile(stamp); err == nil && string(have) == want {
		return nil
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci: %v\n%s", err, out)
	}
	return os.WriteFile(stamp, []byte(want), 0o644)
}

// Everything is the command of @modelcontextprotocol/server-everything
// with its transport argument ("stdio" or "streamableHttp").
func Everything(t testing.TB, transport string) (string, []string) {
	return Node(t), []string{filepath.Join(Dir(), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"), transport}
}

// Filesystem is the command of @modelcontextprotocol/server-filesystem
// serving dirs.
func Filesystem(t testing.TB, dirs ...string) (string, []string) {
	return Node(t), append([]string{filepath.Join(Dir(), "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")}, dirs...)
}

// Fault is the command of the fault server (testdata/npm/fault-server.mjs).
func Fault(t testing.TB, args ...string) (string, []string) {
	return Node(t), append([]string{filepath.Join(Dir(), "fault-server.mjs")}, args...)
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Serve starts a long-running server process and waits until it says on
// stderr that it listens; stop kills it (its whole group).
func Serve(t testing.TB, env []string, name string, args ...string) (stop func()) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	// Its own group, and killed with the test binary however that dies (a
	// test that times out must not leave node running).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	if err := childproc.Start(cmd, func(error) { close(exited) }); err != nil {
		t.Fatal(err)
	}
	stop = func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(strings.ToLower(sc.Text()), "listening") {
				ready <- nil
				_, _ = io.Copy(io.Discard, stderr)
				return
			}
		}
		ready <- fmt.Errorf("exited before listening: %v", sc.Err())
	}()
	select {
	case err := <-ready:
		if err != nil {
			stop()
			t.Fatalf("%s: %v", name, err)
		}
	case <-time.After(60 * time.Second):
		stop()
		t.Fatalf("%s did not start listening within a minute", name)
	}
	return stop
}
