package notify

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// RefreshRegistry runs one refresh of the follower registry.
func (h *Hub) RefreshRegistry(ctx context.Context) error { return h.refreshRegistry(ctx) }

// TrustAdmissionsFor sets how long an admission is trusted (Pending).
func (h *Hub) TrustAdmissionsFor(d time.Duration) { h.admittedFor = d }

// PublishRequest delivers an announced finish of request, as chatd_request
// would.
func (h *Hub) PublishRequest(request uuid.UUID) { h.publishRequest(request) }
