package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mcp/mcptest"
)

// The server starts the configured stdio MCP servers with itself and stops
// them when it shuts down gracefully.
func TestMCPServersLiveWithTheServer(t *testing.T) {
	t.Parallel()
	node, args := mcptest.Fault(t)
	marker := "chatd-server-test-" + uuid.NewString() // finds the child in /proc
	servers, _ := json.Marshal([]map[string]any{{"name": "faulty", "transport": "stdio", "command": node,
		"args": append(args, marker), "chats": "all"}})
	cfg := fmt.Sprintf(`{"providers":[{"name":"p","type":"openai-compatible","base_url":"http://127.0.0.1:9/v1"}],
		"models":[{"id":"m","provider":"p","model":"x"}],"mcp_servers":%s}`, servers)
	configPath := filepath.Join(t.TempDir(), "chatd.json")
	if err := os.WriteFile(configPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var logs bytes.Buffer
	wg.Go(func() {
		if err := run(ctx, []string{"server", "--listen", addr, "--database-url", dbtest.NewURL(t), "--config", configPath,
			"--workers", "1"}, io.Discard, &syncWriter{w: &logs}); err != nil {
			t.Errorf("server: %v", err)
		}
	})
	defer func() { stop(); wg.Wait() }()
	waitReady(t, "http://"+addr)

	var pid int
	for deadline := time.Now().Add(60 * time.Second); pid == 0; {
		pid = findProcess(marker)
		if time.Now().After(deadline) {
			t.Fatalf("the MCP server was not started; logs:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a process we started, not synchronising goroutines
	}
	stop()
	wg.Wait()
	if err := syscall.Kill(pid, 0); err == nil || findProcess(marker) != 0 {
		t.Fatalf("the MCP server (pid %d) outlived the server (%v)", pid, err)
	}
}

// findProcess returns the pid of a process whose command line holds arg.
func findProcess(arg string) int {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), arg) {
			return pid
		}
	}
	return 0
}
