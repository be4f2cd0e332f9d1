package cli_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/cli"
	chatdrunner "github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

// lineSignal is a stderr that closes said once a write contains want.
type lineSignal struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	said chan struct{}
}

func (w *lineSignal) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) && w.said != nil {
		close(w.said)
		w.said = nil
	}
	return len(p), nil
}

func (w *lineSignal) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestWaitSaysProviderRetries: with the model provider unreachable,
// `chat new --wait` says on stderr that chatd is retrying while it
// retries (not only when the turn fails, 2 s later here, 18 s with the
// defaults), and the failure asks whether the local provider runs. Plain
// and structured waits alike.
func TestWaitSaysProviderRetries(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	env := testenv.New(t, testenv.Options{ProviderURL: "http://" + closed,
		Runner: chatdrunner.Options{MaxAttempts: 2, RetryBase: 2 * time.Second, RetryMax: 2 * time.Second}})
	token := env.Token("alice")
	for _, args := range [][]string{{"new", "--wait", "hello"}, {"new", "--wait", "--schema", schemaFile(t, schema), "report"}} {
		stderr := &lineSignal{want: "retrying in", said: make(chan struct{})}
		said := stderr.said
		var stdout bytes.Buffer
		io := cli.IO{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: stderr, Getenv: func(k string) string {
			switch k {
			case "CHATD_URL":
				return env.API.URL
			case "CHATD_TOKEN":
				return token
			}
			return ""
		}}
		done := make(chan int, 1)
		go func() { done <- cli.Chat(context.Background(), args, io) }()
		select {
		case <-said:
		case code := <-done:
			t.Fatalf("%v: ended (%d) without saying it retries:\n%s", args, code, stderr)
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: no retry said within 10 s:\n%s", args, stderr)
		}
		if !strings.Contains(stderr.String(), "attempt 1 of 2 to call the model failed: the model provider at "+closed+" could not be reached: connection refused") {
			t.Errorf("%v: retry line %q", args, stderr)
		}
		// The chat and the lookup show the retry while the turn runs.
		if ids := lines(stdout.String()); len(ids) == 2 {
			res, err := env.Client("alice").GetStructuredOutput(t.Context(), uuid.MustParse(ids[1]), 0)
			if err != nil || (res.Status == client.OutputPending && (res.ProviderRetry == nil || res.ProviderRetry.Attempt != 1 ||
				res.ProviderRetry.MaxAttempts != 2 || !strings.Contains(res.ProviderRetry.LastError, "connection refused"))) {
				t.Errorf("lookup while retrying: %+v %v", res, err)
			}
			chat, err := env.Client("alice").GetChat(t.Context(), uuid.MustParse(ids[0]))
			if err != nil || (chat.Status == client.StatusRunning && chat.ProviderRetry == nil) {
				t.Errorf("chat while retrying: %+v %v", chat, err)
			}
		}
		code := <-done
		if code != cli.ExitFailed {
			t.Errorf("%v: exit %d", args, code)
		}
		if out := stderr.String() + stdout.String(); !strings.Contains(out, "is the provider running? (for the example configuration: make mockllm)") {
			t.Errorf("%v: the failure does not ask whether the provider runs:\n%s", args, out)
		}
	}
}
