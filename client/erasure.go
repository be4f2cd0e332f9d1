package client

import (
	"time"

	"github.com/google/uuid"
)

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

// DeleteChatResponse answers DeleteChat: what the deletion removed.
type DeleteChatResponse struct {
	// DeletedChatIDs are the chat and its descendants (child chats go
	// with their parent).
	DeletedChatIDs []uuid.UUID `json:"deleted_chat_ids"`
	// CancelledRequestIDs are the structured requests that were pending:
	// each got its cancelled receipt (chat_deleted), which the lookup and
	// webhooks deliver.
	CancelledRequestIDs []uuid.UUID `json:"cancelled_request_ids"`
}

// ChatDeletion is a deleted chat's tombstone, as a late lookup of one of
// its structured requests tells it.
type ChatDeletion struct {
	// Reason is why the chat went: deleted (by its owner or an operator),
	// expired (the retention period) or erased (with its user).
	Reason    DeletionReason `json:"reason"`
	DeletedAt time.Time      `json:"deleted_at"`
}

// DeletionReason says why a chat was deleted.
type DeletionReason string

// Deletion reasons.
const (
	DeletionDeleted DeletionReason = "deleted"
	DeletionExpired DeletionReason = "expired"
	DeletionErased  DeletionReason = "erased"
)

// DeletionReasons lists every DeletionReason.
func DeletionReasons() []DeletionReason {
	return []DeletionReason{DeletionDeleted, DeletionExpired, DeletionErased}
}
