package mockllm

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// serveOnce serves one request in process: it returns once the handler has,
// so the call is counted out by then (over a socket, the client can read
// the whole answer before the handler's deferred count-out runs).
func serveOnce(t *testing.T, s *Server, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body)))
	return rec
}

func getStats(t *testing.T, s *Server, method, path string) Stats {
	t.Helper()
	rec := serveOnce(t, s, method, path, "")
	var st Stats
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &st) != nil {
		t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
	}
	return st
}

// TestStatsCountCallsInFlight holds three calls in the hook and reads the
// counts while they are held, after they are answered, and around a reset.
func TestStatsCountCallsInFlight(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}), make(chan struct{})
	s := New(Options{BeforeRespond: func(ctx context.Context, _ *Request) error {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}})
	const stats, reset, completions = "/_mockllm/stats", "/_mockllm/stats/reset", "/v1/chat/completions"
	if st := getStats(t, s, http.MethodGet, stats); st != (Stats{}) {
		t.Fatalf("fresh server: %+v", st)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if rec := serveOnce(t, s, http.MethodPost, completions, chatBody(true, "hi")); rec.Code != http.StatusOK {
				t.Errorf("held call: %d", rec.Code)
			}
		})
	}
	for range 3 {
		<-arrived
	}
	if st := getStats(t, s, http.MethodGet, stats); st != (Stats{InFlight: 3, PeakInFlight: 3, Calls: 3}) {
		t.Errorf("three held: %+v", st)
	}
	close(release)
	wg.Wait()
	if st := getStats(t, s, http.MethodGet, stats); st != (Stats{InFlight: 0, PeakInFlight: 3, Calls: 3}) {
		t.Errorf("answered: %+v", st)
	}
	// A reset answers the counts before it and starts a new peak.
	if st := getStats(t, s, http.MethodPost, reset); st.PeakInFlight != 3 {
		t.Errorf("reset answered %+v", st)
	}
	if st := getStats(t, s, http.MethodGet, stats); st != (Stats{InFlight: 0, PeakInFlight: 0, Calls: 3}) {
		t.Errorf("after the reset: %+v", st)
	}
	go func() { <-arrived }()
	serveOnce(t, s, http.MethodPost, completions, chatBody(false, "again"))
	if st := getStats(t, s, http.MethodGet, stats); st != (Stats{InFlight: 0, PeakInFlight: 1, Calls: 4}) {
		t.Errorf("one more call: %+v", st)
	}
}

// writeLog records each Write and Flush of a response.
type writeLog struct {
	*httptest.ResponseRecorder
	writes []string
}

func (w *writeLog) Write(b []byte) (int, error) {
	w.writes = append(w.writes, string(b))
	return w.ResponseRecorder.Write(b)
}

func TestWriteInChunks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		events int
		chunks int
		want   []string
	}{
		{"more events than chunks", 7, 3, []string{"e0e1", "e2e3", "e4e5e6"}},
		{"as many", 3, 3, []string{"e0", "e1", "e2"}},
		{"fewer events than chunks: empty waits", 2, 5, []string{"e0", "e1"}},
		{"one chunk", 4, 1, []string{"e0e1e2e3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := &writeLog{ResponseRecorder: httptest.NewRecorder()}
			const delay = 5 * time.Millisecond
			start := time.Now()
			writeInChunks(t.Context(), w, tc.chunks, delay, func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				for i := range tc.events {
					_, _ = w.Write([]byte("e" + string(rune('0'+i))))
					_ = http.NewResponseController(w).Flush()
				}
			})
			// Every chunk after the first waits, even an empty one.
			if took := time.Since(start); took < time.Duration(tc.chunks-1)*delay {
				t.Errorf("took %v, want at least %v", took, time.Duration(tc.chunks-1)*delay)
			}
			if strings.Join(w.writes, "|") != strings.Join(tc.want, "|") {
				t.Errorf("writes %q, want %q", w.writes, tc.want)
			}
			if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "text/event-stream" || !w.Flushed {
				t.Errorf("status %d, header %v, flushed %v", w.Code, w.Header(), w.Flushed)
			}
		})
	}
}

// TestStreamChunksOption: a real stream through the server arrives whole,
// in the option's chunks, and a non-streamed answer waits as long.
func TestStreamChunksOption(t *testing.T) {
	t.Parallel()
	const delay = 20 * time.Millisecond
	_, hs := startServer(t, Options{StreamChunks: 4, ChunkDelay: delay})
	start := time.Now()
	resp, body := post(t, hs.URL+"/v1/chat/completions", chatBody(true, "chunked", toolJSON(FinalizerTool, finalizerParams)))
	if took := time.Since(start); took < 3*delay {
		t.Errorf("stream took %v, want at least %v", took, 3*delay)
	}
	events := sseEvents(t, body)
	if resp.StatusCode != http.StatusOK || len(events) < 4 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("%s: %q", resp.Status, events)
	}
	start = time.Now()
	post(t, hs.URL+"/v1/chat/completions", chatBody(false, "whole"))
	if took := time.Since(start); took < 3*delay {
		t.Errorf("non-streamed answer took %v, want at least %v", took, 3*delay)
	}
}
