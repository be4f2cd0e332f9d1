package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/chatd/chatd/internal/dbtest"
)

// openPTY opens a pseudo-terminal: the side a program writes to (a
// terminal) and the side the test reads what it wrote from.
func openPTY(t *testing.T) (term, reader *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ptmx.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ioctlErr error
	if err := rc.Control(func(fd uintptr) {
		if ioctlErr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ioctlErr == nil {
			n, ioctlErr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
		}
	}); err != nil || ioctlErr != nil {
		t.Fatal(err, ioctlErr)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return pts, ptmx
}

func TestIsTerminal(t *testing.T) {
	t.Parallel()
	term, reader := openPTY(t)
	defer reader.Close()
	defer term.Close()
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for w, want := range map[io.Writer]bool{term: true, devNull: false, file: false, &bytes.Buffer{}: false} {
		if got := isTerminal(w); got != want {
			t.Errorf("isTerminal(%T %v) = %v", w, w, got)
		}
	}
}

// TestStartBanner: on a terminal the server prints, before its logs, its
// URL, the command for a token, the console's URL, and that the models of
// a local provider need that server (make mockllm); logs to a pipe or a
// file stay logs (the other server tests, whose stderr is a buffer).
func TestStartBanner(t *testing.T) {
	t.Parallel()
	mockURL := "http://127.0.0.1:9"
	cfgPath := filepath.Join(t.TempDir(), "chatd.json")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, `{"providers":[{"name":"local","type":"openai-compatible","base_url":%q,"no_api_key":true},
		{"name":"remote","type":"openai","api_key_env":"NONE"}],
		"models":[{"id":"local/mock","provider":"local","model":"m"},{"id":"gpt","provider":"remote","model":"g"},
		{"id":"local/two","provider":"local","model":"m2"}]}`, mockURL+"/v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	term, reader := openPTY(t)
	var out syncWriter
	out.w = new(bytes.Buffer)
	var readers sync.WaitGroup
	shown := make(chan struct{})
	readers.Go(func() {
		buf := make([]byte, 4096)
		var once sync.Once
		for {
			n, err := reader.Read(buf)
			_, _ = out.Write(buf[:n])
			out.mu.Lock()
			done := strings.Contains(out.w.(*bytes.Buffer).String(), "chatd listening") // the log line after the banner
			out.mu.Unlock()
			if done {
				once.Do(func() { close(shown) })
			}
			if err != nil {
				return
			}
		}
	})
	addr := freeAddr(t)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	exited := make(chan struct{})
	wg.Go(func() {
		defer close(exited)
		if err := run(ctx, []string{"server", "--listen", addr, "--database-url", dbtest.NewURL(t), "--max-running", "0",
			"--config", cfgPath, "--console"}, io.Discard, term); err != nil {
			t.Errorf("server: %v", err)
		}
	})
	select {
	case <-shown:
	case <-exited:
	}
	stop()
	wg.Wait()
	term.Close()
	readers.Wait()
	reader.Close()
	got := strings.ReplaceAll(out.w.(*bytes.Buffer).String(), "\r", "")
	for _, want := range []string{
		"chatd is ready at http://" + addr + "\n",
		"token create --user alice --database-url URL\n",
		"console:  http://" + addr + "/console/ (sign in with the token)\n",
		"models:   local/mock, local/two call 127.0.0.1:9: start that server first (the example's mock: make mockllm)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the terminal lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "gpt") {
		t.Errorf("a remote provider's model is listed:\n%s", got)
	}
}
