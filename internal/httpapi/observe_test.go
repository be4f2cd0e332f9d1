package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/prom"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/testenv"
)

// scrape reads /metrics synchronously from the env's API and parses it
// strictly.
func scrape(t *testing.T, env *testenv.Env) *prom.Scrape {
	t.Helper()
	rec := httptest.NewRecorder()
	env.Server.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	s, err := prom.Parse(bytes.NewReader(rec.Body.Bytes()))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, rec.Body.String())
	}
	return s
}

func wantValue(t *testing.T, s *prom.Scrape, want float64, name string, labels ...string) {
	t.Helper()
	got, ok := s.Get(name, labels...)
	if !ok || got != want {
		t.Errorf("%s%v = %v (present %v), want %v", name, labels, got, ok, want)
	}
}

// structuredTurn creates a structured chat and waits for its receipt, then
// stops the workers, so that everything they count is counted.
func structuredTurn(t *testing.T, env *testenv.Env) client.StructuredOutputResult {
	t.Helper()
	ctx := t.Context()
	c := env.Client("alice")
	created, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("report"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitStructuredOutput(ctx, *created.Messages[0].StructuredOutputRequestID)
	if err != nil {
		t.Fatal(err)
	}
	env.StopRunner()
	return res
}

func TestMetricsAfterAStructuredTurn(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{})
	if res := structuredTurn(t, env); res.Status != client.OutputSucceeded {
		t.Fatalf("status %s", res.Status)
	}
	s := scrape(t, env)
	// A labelled family without series yet (rejections, provider errors)
	// is left out of the exposition; the tests that count them check
	// their types.
	for name, typ := range map[string]string{
		"chatd_structured_requests_finished_total": "counter",
		"chatd_provider_call_duration_seconds":     "histogram",
		"chatd_queued_messages":                    "gauge",
		"chatd_runnable_chats":                     "gauge",
		"chatd_unclaimed_chats":                    "gauge",
		"chatd_structured_requests_pending":        "gauge",
		"chatd_chats_claimed":                      "gauge",
		"chatd_workers":                            "gauge",
		"chatd_open_streams":                       "gauge",
		"chatd_http_requests_total":                "counter",
		"chatd_http_request_duration_seconds":      "histogram",
		"chatd_metrics_database_up":                "gauge",
	} {
		if s.Type(name) != typ {
			t.Errorf("%s: type %q, want %q", name, s.Type(name), typ)
		}
	}
	wantValue(t, s, 1, "chatd_structured_requests_finished_total", "status", "succeeded", "error_code", "")
	wantValue(t, s, 1, "chatd_structured_requests_finished_total")
	wantValue(t, s, 1, "chatd_provider_call_duration_seconds_count", "model", "mock/model", "call", "step", "outcome", "ok")
	wantValue(t, s, 0, "chatd_chats_claimed") // the workers stopped
	wantValue(t, s, 3, "chatd_workers")       // testenv's default --max-running
	wantValue(t, s, 0, "chatd_open_streams")
	wantValue(t, s, 1, "chatd_metrics_database_up")
	wantValue(t, s, 0, "chatd_queued_messages")
	wantValue(t, s, 0, "chatd_structured_requests_pending")
	wantValue(t, s, 0, "chatd_unclaimed_chats")
	wantValue(t, s, 1, "chatd_http_requests_total", "route", "/api/v1/chats", "method", "POST", "status", "201")
	wantValue(t, s, 1, "chatd_http_request_duration_seconds_count", "route", "/api/v1/chats", "method", "POST")
	if _, ok := s.Get("chatd_structured_rejections_total"); ok {
		t.Error("a valid first value counted a rejection")
	}
	if _, ok := s.Get("chatd_provider_errors_total"); ok {
		t.Error("a provider error was counted")
	}

	// Unmatched paths share one label value; the scrape before counted itself.
	env.Server.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/no/such/"+t.Name(), nil))
	s = scrape(t, env)
	wantValue(t, s, 1, "chatd_http_requests_total", "route", "unmatched", "method", "GET", "status", "404")
	wantValue(t, s, 1, "chatd_http_requests_total", "route", "/metrics", "method", "GET", "status", "200")
}

func TestMetricsCountFailures(t *testing.T) {
	t.Parallel()
	t.Run("rejections", func(t *testing.T) {
		t.Parallel()
		env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Mode: mockllm.ModeInvalid}})
		if res := structuredTurn(t, env); res.Status != client.OutputFailed {
			t.Fatalf("status %s", res.Status)
		}
		s := scrape(t, env)
		if typ := s.Type("chatd_structured_rejections_total"); typ != "counter" {
			t.Errorf("chatd_structured_rejections_total: type %q", typ)
		}
		wantValue(t, s, 3, "chatd_structured_rejections_total", "kind", "invalid_value")
		wantValue(t, s, 3, "chatd_structured_rejections_total")
		wantValue(t, s, 1, "chatd_structured_requests_finished_total", "status", "failed", "error_code", "validation_exhausted")
		wantValue(t, s, 3, "chatd_provider_call_duration_seconds_count", "outcome", "ok")
	})
	t.Run("provider errors", func(t *testing.T) {
		t.Parallel()
		env := testenv.New(t, testenv.Options{Mock: mockllm.Options{
			BeforeRespond: func(context.Context, *mockllm.Request) error { return errors.New("overloaded") },
		}})
		if res := structuredTurn(t, env); res.Status != client.OutputFailed {
			t.Fatalf("status %s", res.Status)
		}
		s := scrape(t, env)
		// Five attempts for one history (the runner's default), each a 500.
		if typ := s.Type("chatd_provider_errors_total"); typ != "counter" {
			t.Errorf("chatd_provider_errors_total: type %q", typ)
		}
		wantValue(t, s, 5, "chatd_provider_errors_total", "model", "mock/model", "type", "server_error")
		wantValue(t, s, 5, "chatd_provider_call_duration_seconds_count", "outcome", "error")
		wantValue(t, s, 1, "chatd_structured_requests_finished_total", "status", "failed", "error_code", "provider_error")
	})
}

// logLines returns the JSON log records written so far.
func logLines(t *testing.T, logs *testenv.LogBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %s", sc.Text())
		}
		out = append(out, m)
	}
	return out
}

func TestRequestIDAndAccessLog(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	logs := &testenv.LogBuffer{}
	api := httpapi.New(httpapi.Options{TestSignals: testenv.APISignals(nil), Store: env.Store, Models: env.Models, Hub: env.Hub,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	token := env.Token("alice")

	do := func(method, path, body, requestID string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if requestID != "" {
			req.Header.Set(httpapi.RequestIDHeader, requestID)
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		return rec
	}
	access := func(id string) map[string]any {
		t.Helper()
		for _, l := range logLines(t, logs) {
			if l["msg"] == "http request" && l["request_id"] == id {
				return l
			}
		}
		t.Fatalf("no access log line with request_id %q", id)
		return nil
	}

	// A given id is kept and echoed; the chat created is named in the log.
	rec := do("POST", "/api/v1/chats", `{"content":[{"type":"text","text":"hi"}]}`, "trace-7.a:b/c")
	if rec.Code != 201 || rec.Header().Get(httpapi.RequestIDHeader) != "trace-7.a:b/c" {
		t.Fatalf("create: %d, X-Request-ID %q", rec.Code, rec.Header().Get(httpapi.RequestIDHeader))
	}
	var created client.CreateChatResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &created); err != nil {
		t.Fatal(err)
	}
	l := access("trace-7.a:b/c")
	for k, want := range map[string]any{"level": "INFO", "method": "POST", "route": "/api/v1/chats", "path": "/api/v1/chats",
		"status": float64(201), "chat_id": created.Chat.ID.String()} {
		if l[k] != want {
			t.Errorf("access log %s = %v, want %v (line %v)", k, l[k], want, l)
		}
	}
	if d, ok := l["duration_ms"].(float64); !ok || d < 0 {
		t.Errorf("duration_ms = %v", l["duration_ms"])
	}
	if l["user_id"] == nil {
		t.Errorf("no user_id in %v", l)
	}

	// A route with {chat} names the chat, errors included.
	missing := "00000000-0000-4000-8000-000000000000"
	if rec := do("GET", "/api/v1/chats/"+missing, "", "lookup-1"); rec.Code != 404 {
		t.Fatalf("get: %d", rec.Code)
	}
	if l := access("lookup-1"); l["chat_id"] != missing || l["status"] != float64(404) || l["route"] != "/api/v1/chats/{chat}" {
		t.Errorf("access log %v", l)
	}

	// Unacceptable ids are replaced by a fresh one, which is echoed.
	for _, bad := range []string{"has space", `quote"`, strings.Repeat("x", 129), "naïve"} {
		rec := do("GET", "/healthz", "", bad)
		got := rec.Header().Get(httpapi.RequestIDHeader)
		if got == "" || got == bad {
			t.Errorf("id %q: echoed %q", bad, got)
			continue
		}
		if l := access(got); l["level"] != "DEBUG" || l["route"] != "/healthz" {
			t.Errorf("health check log %v", l)
		}
	}
	// No id: one is minted.
	if got := do("GET", "/healthz", "", "").Header().Get(httpapi.RequestIDHeader); len(got) != 36 {
		t.Errorf("minted id %q", got)
	}
	// Every record logged for a request carries its id: a 500 here.
	gone, err := pgxpool.NewWithConfig(context.Background(), env.Pool.Config().Copy())
	if err != nil {
		t.Fatal(err)
	}
	gone.Close() // a database that went away
	logs2 := &testenv.LogBuffer{}
	broken := httpapi.New(httpapi.Options{TestSignals: testenv.APISignals(nil), Store: store.New(gone), Models: env.Models, Hub: env.Hub,
		Logger: slog.New(slog.NewJSONHandler(logs2, nil))})
	req := httptest.NewRequest("GET", "/api/v1/chats", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(httpapi.RequestIDHeader, "broken-1")
	rec = httptest.NewRecorder()
	broken.ServeHTTP(rec, req)
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("with the database gone: %d", rec.Code)
	}
	n := 0
	for _, l := range logLines(t, logs2) {
		if l["request_id"] != "broken-1" {
			t.Errorf("record without the request id: %v", l)
		}
		n++
	}
	if n < 2 { // the error and the access line
		t.Errorf("%d records", n)
	}
}

// TestAccessLogLevel: the access lines are logged at the level asked for
// (make run puts them at debug, under its info logger).
func TestAccessLogLevel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		level slog.Level
		want  int
	}{{0, 1}, {slog.LevelDebug, 0}} {
		logs := &testenv.LogBuffer{}
		api := httpapi.New(httpapi.Options{TestSignals: testenv.APISignals(nil), AccessLogLevel: tc.level,
			Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		api.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/nothing-here", nil))
		if got := strings.Count(logs.String(), `"msg":"http request"`); got != tc.want {
			t.Errorf("access level %v under an info logger: %d access lines, want %d\n%s", tc.level, got, tc.want, logs.String())
		}
	}
}
