package store

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/prom"
)

// Instrument registers the store's metrics on reg: structured requests
// finished by this process, by status and error code, counted when the
// transaction that wrote their receipts committed.
func (s *Store) Instrument(reg *prometheus.Registry) {
	s.finished = prom.Counter(reg, "chatd_structured_requests_finished_total",
		"Structured requests finished by this process (receipts committed), by status and error code "+
			"(error_code is empty for succeeded).", "status", "error_code")
}

// countFinished counts the requests a committed transaction finished.
func (s *Store) countFinished(done []finished) {
	if s.finished == nil {
		return
	}
	for _, f := range done {
		s.finished.WithLabelValues(string(f.Status), string(f.Code)).Inc()
	}
}

// Depths reads the queue depths and pending requests for /metrics in one
// statement.
func (s *Store) Depths(ctx context.Context) (Depths, error) {
	d, err := s.q.MetricsDepths(ctx, s.pool)
	return Depths(d), err
}
