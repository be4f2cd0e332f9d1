package httpapi

import (
	"net/http"
	"slices"
	"strings"
)

// CORS: browsers on the configured origins may call the API. Off by
// default (no origins). Tokens travel in the Authorization header, never in
// cookies, so credentials are not allowed; EventSource, which cannot send
// headers, uses a stream ticket instead (POST …/stream-ticket).

const (
	corsMethods = "GET, POST, PATCH, DELETE"
	corsHeaders = "Authorization, Content-Type, Idempotency-Key, Last-Event-ID, X-Request-ID"
	corsExpose  = "X-Request-ID, Idempotent-Replayed, Retry-After, Location"
)

// cors adds the CORS headers for an allowed Origin and answers a preflight;
// it reports whether it did (the request is then done).
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	if len(s.corsOrigins) == 0 {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if origin == "" || !(slices.Contains(s.corsOrigins, origin) || slices.Contains(s.corsOrigins, "*")) {
		return false
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Add("Vary", "Access-Control-Request-Method")
		h.Add("Vary", "Access-Control-Request-Headers")
		h.Set("Access-Control-Allow-Methods", corsMethods)
		h.Set("Access-Control-Allow-Headers", corsHeaders)
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	h.Set("Access-Control-Expose-Headers", corsExpose)
	return false
}

// ParseOrigins reads a comma-separated list of origins (scheme://host[:port],
// or * for any), as --cors-origins takes it.
func ParseOrigins(list string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(list, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if o != "*" && (!strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") ||
			strings.Count(o, "/") != 2 || strings.HasSuffix(o, "/")) {
			return nil, &originError{o}
		}
		out = append(out, o)
	}
	return out, nil
}

type originError struct{ origin string }

func (e *originError) Error() string {
	return "CORS origin " + e.origin + ": want scheme://host[:port] (no path), or *"
}
