package mockllm

import (
	"net/http"
	"sync"
)

// Stats are the mock's counts of completion calls (every format), as
// GET /_mockllm/stats answers them. A benchmark reads them to know how many
// provider calls the system under test had in flight at once.
type Stats struct {
	// InFlight are the calls being answered now: from the request's arrival
	// until its answer is written or its client went away.
	InFlight int `json:"in_flight"`
	// PeakInFlight is the most calls in flight at once since the server
	// started or the last POST /_mockllm/stats/reset.
	PeakInFlight int `json:"peak_in_flight"`
	// Calls are all the calls received, never reset.
	Calls int64 `json:"calls"`
}

// callStats counts the calls; the zero value is ready.
type callStats struct {
	mu sync.Mutex
	s  Stats
}

// begin counts a call in; the returned func counts it out.
func (c *callStats) begin() func() {
	c.mu.Lock()
	c.s.Calls++
	c.s.InFlight++
	c.s.PeakInFlight = max(c.s.PeakInFlight, c.s.InFlight)
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.s.InFlight--
		c.mu.Unlock()
	}
}

// Stats returns the call counts.
func (s *Server) Stats() Stats {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	return s.calls.s
}

// ResetPeak starts a new peak at the calls in flight now and returns the
// counts as they were before.
func (s *Server) ResetPeak() Stats {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	old := s.calls.s
	s.calls.s.PeakInFlight = s.calls.s.InFlight
	return old
}

func (s *Server) serveStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}

func (s *Server) serveStatsReset(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.ResetPeak())
}
