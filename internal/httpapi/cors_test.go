package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCORS(t *testing.T) {
	t.Parallel()
	preflight := func(s *Server, origin string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodOptions, "/api/v1/chats", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type, idempotency-key")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	simple := func(s *Server, origin string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/openapi.json", nil)
		req.Header.Set("Origin", origin)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}

	// Off by default: no CORS headers, a preflight is an ordinary 405.
	off := New(Options{})
	if rec := preflight(off, "http://app.example"); rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("CORS off: %d %v", rec.Code, rec.Header())
	}

	on := New(Options{CORSOrigins: []string{"http://app.example", "https://console.example:8443"}})
	rec := preflight(on, "http://app.example")
	if rec.Code != http.StatusNoContent || rec.Header().Get("Access-Control-Allow-Origin") != "http://app.example" ||
		!strings.Contains(rec.Header().Get("Access-Control-Allow-Headers"), "Idempotency-Key") ||
		!strings.Contains(rec.Header().Get("Access-Control-Allow-Methods"), "PATCH") {
		t.Fatalf("allowed preflight: %d %v", rec.Code, rec.Header())
	}
	if rec := simple(on, "https://console.example:8443"); rec.Code != 200 || rec.Header().Get("Access-Control-Allow-Origin") != "https://console.example:8443" ||
		!strings.Contains(rec.Header().Get("Access-Control-Expose-Headers"), "X-Request-ID") || rec.Header().Get("Vary") != "Origin" {
		t.Fatalf("allowed request: %d %v", rec.Code, rec.Header())
	}
	// Another origin gets no CORS headers (the browser then refuses).
	for _, rec := range []*httptest.ResponseRecorder{preflight(on, "http://evil.example"), simple(on, "http://evil.example")} {
		if rec.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("a foreign origin was allowed: %v", rec.Header())
		}
	}
	any := New(Options{CORSOrigins: []string{"*"}})
	if rec := simple(any, "http://anything.example"); rec.Header().Get("Access-Control-Allow-Origin") != "http://anything.example" {
		t.Fatalf("*: %v", rec.Header())
	}

	if got, err := ParseOrigins(" http://a.example , https://b.example:8443,*"); err != nil || len(got) != 3 {
		t.Fatalf("ParseOrigins: %v %v", got, err)
	}
	for _, bad := range []string{"app.example", "http://a.example/", "http://a.example/path", "ftp://a.example"} {
		if _, err := ParseOrigins(bad); err == nil {
			t.Errorf("ParseOrigins accepted %q", bad)
		}
	}
}
