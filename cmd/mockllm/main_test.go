package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
)

func TestFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, 0, "MOCKLLM_CHUNK_DELAY"},
		{[]string{"--mode", "bogus"}, 2, "--mode must be"},
		{[]string{"--format", "vertex"}, 2, "--format must be"},
		{[]string{"--chunk-delay", "fast"}, 2, "--chunk-delay must be"},
		{[]string{"--latency", "-1s"}, 2, "--latency must be"},
		{[]string{"--stream-chunks", "-2"}, 2, "--stream-chunks must be"},
		{[]string{"--stream-chunks", "many"}, 2, "--stream-chunks must be"},
		{[]string{"--script", "/nonexistent/script.json"}, 2, "no such file"},
		{[]string{"extra"}, 2, "unexpected arguments"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("run(%v) = %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}

// TestServeAndShutdown runs the command for real: it must print its URL,
// answer, and stop cleanly on SIGINT. Not parallel: signals are per process.
func TestServeAndShutdown(t *testing.T) {
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run([]string{"--listen", "127.0.0.1:0", "--mode", "text", "--format", "all"}, pw, &stderr)
		pw.Close()
	}()
	br := bufio.NewReader(pr)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("no banner: %v (stderr %s)", err, stderr.String())
	}
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "mockllm listening on ")
	if !ok || !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasSuffix(base, "/v1") {
		t.Fatalf("banner %q", line)
	}
	line, _ = br.ReadString('\n')
	anthropicBase, ok := strings.CutPrefix(strings.TrimSpace(line), "anthropic and google base URL: ")
	if !ok || anthropicBase+"/v1" != base {
		t.Fatalf("second banner line %q", line)
	}
	go io.Copy(io.Discard, br) //nolint:errcheck // drain anything else

	resp, err := http.Post(base+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"ping"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "mockllm: ping") {
		t.Errorf("response %s", body)
	}
	// The same server speaks Anthropic Messages, streamed.
	resp, err = http.Post(anthropicBase+"/v1/messages", "application/json",
		strings.NewReader(`{"model":"claude","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"pong"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") ||
		!strings.Contains(string(body), "event: message_stop") || !strings.Contains(string(body), "mockllm: pong") {
		t.Errorf("anthropic stream %s %s", ct, body)
	}
	// ... and Gemini, at the same base URL.
	resp, err = http.Post(anthropicBase+"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "application/json",
		strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"pang"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"finishReason":"STOP"`) || !strings.Contains(string(body), "mockllm: pang") {
		t.Errorf("gemini stream %s", body)
	}

	// The banner is printed after the signal handler is installed.
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 0 {
		t.Errorf("exit code %d, stderr %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "msg=stopped") || !strings.Contains(stderr.String(), "model=m") {
		t.Errorf("log %s", stderr.String())
	}
}
