package client

import "github.com/google/uuid"

// ErasureReport is what erasing a user removed (chatd user erase): every
// count is of rows deleted.
type ErasureReport struct {
	UserID uuid.UUID `json:"user_id"`
	User   string    `json:"user"`
	// Chats deleted, their descendants included, and what went with them.
	Chats              int64 `json:"chats"`
	Messages           int64 `json:"messages"`
	QueuedMessages     int64 `json:"queued_messages"`
	StructuredRequests int64 `json:"structured_requests"`
	// CancelledRequests were pending: each got its cancelled receipt
	// (chat_deleted) before its chat went.
	CancelledRequests int64 `json:"cancelled_requests"`
	Tokens            int64 `json:"tokens"`
	IdempotencyKeys   int64 `json:"idempotency_keys"`
	StreamTickets     int64 `json:"stream_tickets"`
	// Followers are the user's rows in the follower registry (open streams).
	Followers int64 `json:"followers"`
	// WebhookDeliveries owed for the user's requests, of which
	// UnsentWebhookDeliveries had not been delivered.
	WebhookDeliveries       int64 `json:"webhook_deliveries"`
	UnsentWebhookDeliveries int64 `json:"unsent_webhook_deliveries"`
	// Tombstones of the user's deleted chats (earlier deletions included).
	Tombstones int64 `json:"tombstones"`
}
