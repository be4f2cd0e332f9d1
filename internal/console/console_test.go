package console

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/chatd/chatd/client"
)

func TestHandler(t *testing.T) {
	t.Parallel()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "api "+r.URL.Path) })
	srv := httptest.NewServer(Mount(api))
	defer srv.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		method, path string
		status       int
		typ, body    string
	}{
		{"GET", "/console/", 200, "text/html", `<script type="module" src="app.js">`},
		{"HEAD", "/console/", 200, "text/html", ""},
		{"GET", "/console/app.js", 200, "text/javascript", "import"},
		{"GET", "/console/style.css", 200, "text/css", "prefers-color-scheme"},
		{"GET", "/console", 301, "", ""},
		{"GET", "/", 302, "", ""},
		{"HEAD", "/", 302, "", ""},
		{"POST", "/", 200, "", "api /"},
		{"GET", "/?x=1", 302, "", ""},
		{"GET", "/console/nothing.js", 404, "", ""},
		{"POST", "/console/", 405, "", ""},
		{"GET", "/api/v1/chats", 200, "", "api /api/v1/chats"},
		{"GET", "/consoles", 200, "", "api /consoles"},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.typ) || !strings.Contains(string(b), tc.body) {
			t.Errorf("%s %s: %d %s\n%s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		if loc := resp.Header.Get("Location"); resp.StatusCode == 302 && loc != Prefix {
			t.Errorf("%s %s: Location %q, want %s", tc.method, tc.path, loc, Prefix)
		}
		if strings.HasPrefix(tc.path, "/console/") && resp.StatusCode == 200 {
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || resp.Header.Get("Referrer-Policy") != "no-referrer" {
				t.Errorf("%s: CSP %q, Referrer-Policy %q", tc.path, csp, resp.Header.Get("Referrer-Policy"))
			}
		}
	}
}

// Every file the page loads is embedded, and nothing is loaded from
// another origin (the CSP would refuse it anyway).
func TestAssetsSelfContained(t *testing.T) {
	t.Parallel()
	err := fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, path)
		if err != nil {
			return err
		}
		for _, bad := range []string{"http://", "https://", "innerHTML", "localStorage", "document.cookie"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s contains %q", path, bad)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The console reads the trace URL template from /console/config.json (empty
// without one), and the server refuses a template that is no http(s) URL
// holding {trace_id}.
func TestTraceURLTemplate(t *testing.T) {
	t.Parallel()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	for tmpl, want := range map[string]string{
		"": `{"trace_url_template":""}`,
		"https://jaeger.example/trace/{trace_id}": `{"trace_url_template":"https://jaeger.example/trace/{trace_id}"}`,
	} {
		if err := ParseTraceURLTemplate(tmpl); err != nil {
			t.Fatalf("%q: %v", tmpl, err)
		}
		rec := httptest.NewRecorder()
		MountWith(api, Config{TraceURLTemplate: tmpl}).ServeHTTP(rec, httptest.NewRequest("GET", "/console/config.json", nil))
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != want {
			t.Errorf("config.json with %q: %d %s", tmpl, rec.Code, rec.Body)
		}
	}
	for _, bad := range []string{"https://jaeger.example/trace/", "javascript:alert({trace_id})", "/trace/{trace_id}", "ftp://h/{trace_id}"} {
		if err := ParseTraceURLTemplate(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestStatusWords: the console's badge says the same word for a chat status
// as the CLI (client.ChatStatus.Word), read from dom.js's table.
func TestStatusWords(t *testing.T) {
	t.Parallel()
	src, err := fs.ReadFile(assets, "assets/dom.js")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`const words = \{([^}]*)\};`).FindSubmatch(src)
	if m == nil {
		t.Fatal("dom.js has no `const words = {…};` table")
	}
	words := map[string]string{}
	for _, kv := range regexp.MustCompile(`(\w+): "([^"]*)"`).FindAllSubmatch(m[1], -1) {
		words[string(kv[1])] = string(kv[2])
	}
	for _, s := range client.ChatStatuses() {
		shown, ok := words[string(s)]
		if !ok {
			shown = strings.Replace(string(s), "_", " ", 1)
		}
		if shown != s.Word() {
			t.Errorf("the console shows %s as %q, the CLI as %q", s, shown, s.Word())
		}
	}
}
