// Package console serves the web console (chatd server --console): static
// files embedded in the binary, served under /console/. The console is only
// a client of the public API: it signs in with an API token kept in the
// tab's sessionStorage and calls /api/v1 like any other client, so it has
// no endpoints of its own and works against any replica.
package console

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
)

// Prefix is the path the console is served under.
const Prefix = "/console/"

//go:embed assets
var assets embed.FS

// files is the assets folder as the root of the console.
var files, _ = fs.Sub(assets, "assets")

// csp allows the console's own files and same-origin API calls only: no
// inline script or style, no third-party origin, and framing only by the
// origins given (none by default).
func csp(frameAncestors []string) string {
	ancestors := "'none'"
	if len(frameAncestors) > 0 {
		ancestors = strings.Join(frameAncestors, " ")
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors " + ancestors
}

// Handler serves the console's files under Prefix; no page may frame it.
func Handler() http.Handler { return handler(nil) }

func handler(frameAncestors []string) http.Handler {
	policy := csp(frameAncestors)
	static := http.StripPrefix(Prefix, http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", policy)
		h.Set("X-Content-Type-Options", "nosniff")
		// Stream tickets travel in URLs: never send them on as a referrer.
		h.Set("Referrer-Policy", "no-referrer")
		// Embedded files have no modification time: revalidate every load,
		// so a new binary's console is picked up at once.
		h.Set("Cache-Control", "no-cache")
		static.ServeHTTP(w, r)
	})
}

// Mount serves the console under Prefix and everything else with api; the
// root, which the API does not serve, redirects (302: it is the console
// only while the server runs with it) to the console.
func Mount(api http.Handler) http.Handler { return MountWith(api, Config{}) }

// Config is what the server tells the console (GET /console/config.json).
type Config struct {
	// TraceURLTemplate, when set, links a request to its trace: an
	// absolute http(s) URL in which {trace_id} stands for the request's
	// trace id (--trace-url-template).
	TraceURLTemplate string `json:"trace_url_template"`
	// FrameAncestors are the origins whose pages may embed the console in
	// a frame, and hand it their users' JWTs (--console-frame-ancestors);
	// none by default.
	FrameAncestors []string `json:"-"`
}

// ParseTraceURLTemplate checks a trace URL template: empty (no links), or
// an absolute http or https URL holding {trace_id}.
func ParseTraceURLTemplate(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(strings.ReplaceAll(s, "{trace_id}", "0"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.Contains(s, "{trace_id}") {
		return fmt.Errorf("%q is not an http(s) URL holding {trace_id}, like https://jaeger.example/trace/{trace_id}", s)
	}
	return nil
}

// MountWith is Mount with the console's configuration.
func MountWith(api http.Handler, cfg Config) http.Handler {
	body, _ := json.Marshal(cfg)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"config.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(body)
	})
	mux.Handle(Prefix, handler(cfg.FrameAncestors))
	mux.Handle("GET /console", http.RedirectHandler(Prefix, http.StatusMovedPermanently))
	mux.Handle("GET /{$}", http.RedirectHandler(Prefix, http.StatusFound))
	mux.Handle("/", api)
	return mux
}
