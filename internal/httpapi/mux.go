package httpapi

import (
	"net/http"
)

// route serves a request and returns the pattern of its route ("" if none
// matched). w is a *statusRecorder.
func (s *Server) route(w http.ResponseWriter, r *http.Request) string {
	if s.cors(w, r) {
		return "" // a preflight, answered
	}
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		defer s.answered(w, pattern)
		s.mux.ServeHTTP(w, r) // sets the path values Handler does not
		return pattern
	}
	probe := &statusProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if allow := probe.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if probe.status == http.StatusMethodNotAllowed {
		s.render(w, r, errorf(http.StatusMethodNotAllowed, "Method %s is not allowed here.", r.Method))
		return ""
	}
	s.render(w, r, errorf(http.StatusNotFound, "No route for %s %s.", r.Method, r.URL.Path))
	return ""
}

// answered tells the tests the status a route answered with.
func (s *Server) answered(w http.ResponseWriter, pattern string) {
	s.signals.Answered.Signal(Answer{Pattern: pattern, Status: w.(*statusRecorder).status})
}

// statusRecorder remembers the status and size of a response.
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
	bytes  int64
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// statusProbe records what the mux's fallback handler would answer.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(code int)        { p.status = code }
