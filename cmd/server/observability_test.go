package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/prom"
)

// The assembled server serves one registry holding the API's, the
// runner's, the store's and the process's metrics, and logs JSON with an
// access line per request.
func TestServerMetricsAndLogs(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	addr := freeAddr(t)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var logs bytes.Buffer
	wg.Go(func() {
		err := run(ctx, []string{"server", "--listen", addr, "--database-url", url, "--workers", "1", "--log-level", "debug"}, io.Discard, &syncWriter{w: &logs})
		if err != nil {
			t.Errorf("server: %v", err)
		}
	})
	defer func() { stop(); wg.Wait() }()
	base := "http://" + addr
	waitReady(t, base)

	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("X-Request-ID", "scrape-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-ID") != "scrape-1" {
		t.Fatalf("GET /metrics: %d, X-Request-ID %q", resp.StatusCode, resp.Header.Get("X-Request-ID"))
	}
	s, err := prom.Parse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	// Labelled families appear with their first series: these have one
	// before any turn ran.
	for _, name := range []string{
		"chatd_http_requests_total",   // API
		"chatd_chats_claimed",         // runner
		"chatd_db_transactions_total", // store's transaction counter
		"process_start_time_seconds",  // process collector
		"go_goroutines",               // Go collector
		"chatd_build_info",
	} {
		if s.Type(name) == "" {
			t.Errorf("%s is not served", name)
		}
	}
	if v, _ := s.Get("chatd_workers"); v != 1 {
		t.Errorf("chatd_workers = %v", v)
	}
	if v, _ := s.Get("chatd_metrics_database_up"); v != 1 {
		t.Errorf("chatd_metrics_database_up = %v", v)
	}

	stop()
	wg.Wait()
	var access map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("not a JSON log line: %s", sc.Text())
		}
		if rec["msg"] == "http request" && rec["request_id"] == "scrape-1" {
			access = rec
		}
	}
	// Probes and scrapes are logged at debug level.
	if access == nil || access["route"] != "/metrics" || access["status"] != float64(200) || access["level"] != "DEBUG" {
		t.Errorf("access log line of the scrape: %v", access)
	}
}

// The profiler is off unless --debug-listen names an address, and is never
// served on the API's listener.
func TestDebugListen(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	addr, debugAddr := freeAddr(t), freeAddr(t)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		err := run(ctx, []string{"server", "--listen", addr, "--database-url", url, "--workers", "0",
			"--debug-listen", debugAddr}, io.Discard, io.Discard)
		if err != nil {
			t.Errorf("server: %v", err)
		}
	})
	defer func() { stop(); wg.Wait() }()
	waitReady(t, "http://"+addr)
	for _, c := range []struct {
		url  string
		want int
	}{
		{"http://" + debugAddr + "/debug/pprof/", http.StatusOK},
		{"http://" + debugAddr + "/debug/pprof/goroutine?debug=1", http.StatusOK},
		{"http://" + addr + "/debug/pprof/", http.StatusNotFound},
	} {
		resp, err := http.Get(c.url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET %s: %d, want %d", c.url, resp.StatusCode, c.want)
		}
	}
}
