package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/proctest"
)

// TestDescriptorCeiling runs the chatd binary with 400 file descriptors
// and its default --max-running: it derives its slots and its client
// connections from them, and 250 clients, each on a connection of its own,
// start a structured turn at once against a model that takes 2 s. Those
// past the connection bound are answered 503 with Retry-After (nothing is
// stored); each then retries after it. Every client's turn ends
// succeeded, and chatd never ran out of descriptors.
func TestDescriptorCeiling(t *testing.T) {
	t.Parallel()
	const clients = 250
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cd := startChatd(t, ctx, []string{"--latency", "2s"}, []string{"sh", "-c", `ulimit -n 400 && exec "$0" "$@"`})
	base, token := cd.base, cd.token
	started := cd.log()
	m := regexp.MustCompile(`max_running=(\d+) max_running_bound=descriptors max_connections=(\d+) descriptors=400`).FindStringSubmatch(started)
	if m == nil {
		t.Fatalf("the start-up line does not say the ceiling from 400 descriptors:\n%s", started)
	}
	if conns, _ := strconv.Atoi(m[2]); conns >= clients {
		t.Fatalf("%s client connections allowed: the test's %d clients would not pass it", m[2], clients)
	}
	var mu sync.Mutex
	refused, other := 0, []string{}
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			n, err := turnWithRetries(ctx, base, token, i)
			mu.Lock()
			defer mu.Unlock()
			refused += n
			if err != nil {
				other = append(other, err.Error())
			}
		})
	}
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("%d of %d clients' turns failed, e.g. %s\n%s", len(other), clients, other[0], cd.log())
	}
	if log := cd.log(); strings.Contains(log, "too many open files") {
		t.Fatalf("chatd ran out of descriptors:\n%s", log)
	}
	if refused == 0 {
		t.Fatalf("no request was refused with %d clients past the %s connections allowed", clients, m[2])
	}
	t.Logf("max_running %s, max_connections %s: %d requests answered 503 and retried, %d turns succeeded", m[1], m[2], refused, clients)
}

// turnWithRetries runs one structured turn on a connection of its own,
// retrying a 503 after its Retry-After; it returns how many 503s it got.
func turnWithRetries(ctx context.Context, base, token string, i int) (int, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer hc.CloseIdleConnections()
	body, _ := json.Marshal(client.CreateChatRequest{
		Content: []client.MessagePart{client.TextPart(fmt.Sprintf("Client %d: report.", i))},
		ResponseFormat: &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{
			Name: "r", Schema: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`)}},
	})
	refused := 0
	var created client.CreateChatResponse
	if err := callRetrying(ctx, hc, token, http.MethodPost, base+"/api/v1/chats", body, &created, &refused); err != nil {
		return refused, err
	}
	id := created.Messages[0].StructuredOutputRequestID
	for {
		var res client.StructuredOutputResult
		if err := callRetrying(ctx, hc, token, http.MethodGet, base+"/api/v1/structured-outputs/"+id.String()+"?wait=30s", nil, &res, &refused); err != nil {
			return refused, err
		}
		switch res.Status {
		case client.OutputPending:
			continue
		case client.OutputSucceeded:
			return refused, nil
		}
		return refused, fmt.Errorf("request %s ended %s", id, res.Status)
	}
}

// callRetrying makes one call, retrying after each 503's Retry-After
// (counted in refused), and decodes a 2xx answer into out.
func callRetrying(ctx context.Context, hc *http.Client, token, method, url string, body []byte, out any, refused *int) error {
	for {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		switch {
		case err != nil:
			return err
		case res.StatusCode == http.StatusServiceUnavailable:
			after, err := strconv.Atoi(res.Header.Get("Retry-After"))
			if err != nil {
				return fmt.Errorf("503 without a Retry-After: %s", b)
			}
			*refused++
			select { // what the answer asks of the client
			case <-time.After(time.Duration(after) * time.Second):
			case <-ctx.Done():
				return ctx.Err()
			}
		case res.StatusCode/100 != 2:
			return fmt.Errorf("%s %s: %d %s", method, url, res.StatusCode, b)
		default:
			return json.Unmarshal(b, out)
		}
	}
}

// chatdProc is the chatd binary serving a database with a mockllm
// process as its model, and a token for alice.
type chatdProc struct {
	base, debug, token string
	logBuf             *bytes.Buffer
	logW               *syncWriter
}

// log is what chatd wrote to its standard error so far.
func (c *chatdProc) log() string {
	c.logW.mu.Lock()
	defer c.logW.mu.Unlock()
	return c.logBuf.String()
}

// startChatd starts mockllm with mockArgs and chatd (behind wrap, a
// command line that execs it, when given) with its profiler on, and waits
// until chatd is ready; both stop when the test ends.
func startChatd(t *testing.T, ctx context.Context, mockArgs, wrap []string) *chatdProc {
	t.Helper()
	mock := proctest.Mockllm(t, mockArgs...)
	bin := proctest.Build(t, "./cmd/server")
	db := dbtest.NewURL(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`{"providers":[{"name":"local","type":"openai-compatible","base_url":%q,"no_api_key":true}],
		"models":[{"id":"local/mock","provider":"local","model":"mock-1"}],"default_model":"local/mock"}`, mock.URL+"/v1")
	if err := os.WriteFile(filepath.Join(dir, "chatd.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	token, _, err := runCmd(ctx, "token", "create", "--user", "alice", "--database-url", db)
	if err != nil {
		t.Fatal(err)
	}
	c := &chatdProc{base: "http://" + freeAddr(t), debug: freeAddr(t), token: strings.TrimSpace(token), logBuf: &bytes.Buffer{}}
	c.logW = &syncWriter{w: c.logBuf}
	args := append(slices.Clone(wrap), bin, "server", "--listen", strings.TrimPrefix(c.base, "http://"), "--debug-listen", c.debug,
		"--database-url", db, "--migrate", "--config", filepath.Join(dir, "chatd.json"),
		"--experiments", "chat-structured-output", "--log-format", "text")
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stderr = c.logW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitReady(t, c.base)
	return c
}
