package notify

import "context"

// RefreshRegistry runs one refresh of the follower registry.
func (h *Hub) RefreshRegistry(ctx context.Context) error { return h.refreshRegistry(ctx) }
