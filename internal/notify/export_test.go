package notify

import (
	"context"
	"time"
)

// RefreshRegistry runs one refresh of the follower registry.
func (h *Hub) RefreshRegistry(ctx context.Context) error { return h.refreshRegistry(ctx) }

// TrustAdmissionsFor sets how long an admission is trusted (Pending).
func (h *Hub) TrustAdmissionsFor(d time.Duration) { h.admittedFor = d }
