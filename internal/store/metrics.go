package store

import (
	"context"

	"github.com/chatd/chatd/internal/metrics"
)

// Instrument registers the store's metrics on reg: structured requests
// finished by this process, by status and error code, counted when the
// transaction that wrote their receipts committed.
func (s *Store) Instrument(reg *metrics.Registry) {
	s.finished = reg.Counter("chatd_structured_requests_finished_total",
		"Structured requests finished by this process (receipts committed), by status and error code "+
			"(error_code is empty for succeeded).", "status", "error_code")
}

func (s *Store) countFinished(done []Outcome) {
	for _, o := range done {
		s.finished.Inc(string(o.Status), string(o.Code))
	}
}

// Depths reads the queue depths and pending requests for /metrics in one
// statement.
func (s *Store) Depths(ctx context.Context) (Depths, error) {
	d, err := s.q.MetricsDepths(ctx, s.pool)
	return Depths(d), err
}
