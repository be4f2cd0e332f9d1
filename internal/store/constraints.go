package store

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// Constraint names a database constraint: a table constraint or unique
// index (sql/schema/), or a trigger's named RAISE (sql/triggers/, USING
// CONSTRAINT = ...). A test checks that this list and the database agree
// both ways, so an error is matched by its name, never by its text.
type Constraint string

// Table constraints and unique indexes.
const (
	UsersPkey      Constraint = "users_pkey"
	UsersNameKey   Constraint = "users_name_key"
	UsersNameCheck Constraint = "users_name_check"
	// UsersIssuerSubjectKey: an identity provider's user is one row per
	// (issuer, subject).
	UsersIssuerSubjectKey Constraint = "users_issuer_subject_key"
	UsersIdentityCheck    Constraint = "users_identity_check"

	APITokensPkey           Constraint = "api_tokens_pkey"
	APITokensUserIDFkey     Constraint = "api_tokens_user_id_fkey"
	APITokensTokenHashKey   Constraint = "api_tokens_token_hash_key"
	APITokensTokenHashCheck Constraint = "api_tokens_token_hash_check"
	APITokensScopesCheck    Constraint = "api_tokens_scopes_check"

	ChatsPkey                       Constraint = "chats_pkey"
	ChatsOwnerIDFkey                Constraint = "chats_owner_id_fkey"
	ChatsParentChatIDFkey           Constraint = "chats_parent_chat_id_fkey"
	ChatsModeCheck                  Constraint = "chats_mode_check"
	ChatsDynamicToolsCheck          Constraint = "chats_dynamic_tools_check"
	ChatsStatusCheck                Constraint = "chats_status_check"
	ChatsGenerationAttemptCheck     Constraint = "chats_generation_attempt_check"
	ChatsOwnedOnlyWhileRunnable     Constraint = "chats_owned_only_while_runnable"
	ChatsLeaseWithOwner             Constraint = "chats_lease_with_owner"
	ChatsHistoryNotAhead            Constraint = "chats_history_not_ahead"
	ChatsChildHasParent             Constraint = "chats_child_has_parent"
	ChatsDeadlineOnlyRequiresAction Constraint = "chats_deadline_only_requires_action"
	ChatsMCPServersBounded          Constraint = "chats_mcp_servers_bounded"
	ChatsSpawnDepthNonnegative      Constraint = "chats_spawn_depth_nonnegative"
	ChatsSpawnStateKnown            Constraint = "chats_spawn_state_known"
	ChatsSpawnShape                 Constraint = "chats_spawn_shape"
	ChatsSpawnMessageFk             Constraint = "chats_spawn_message_fk"
	// ChatsSpawnCallUnique: one child per spawning tool call (a unique index).
	ChatsSpawnCallUnique Constraint = "chats_spawn_call_unique"

	MCPCallsPkey             Constraint = "mcp_calls_pkey"
	MCPCallsMessageFk        Constraint = "mcp_calls_message_fk"
	MCPCallsAttemptsPositive Constraint = "mcp_calls_attempts_positive"

	WebhookSubscriptionsPkey             Constraint = "webhook_subscriptions_pkey"
	WebhookSubscriptionsEventKnown       Constraint = "webhook_subscriptions_event_known"
	WebhookDeliveriesPkey                Constraint = "webhook_deliveries_pkey"
	WebhookDeliveriesStateKnown          Constraint = "webhook_deliveries_state_known"
	WebhookDeliveriesDeliveredAt         Constraint = "webhook_deliveries_delivered_at"
	WebhookDeliveriesAttemptsNotNegative Constraint = "webhook_deliveries_attempts_not_negative"

	RequestsPkey             Constraint = "structured_requests_pkey"
	RequestsChatIDFkey       Constraint = "structured_requests_chat_id_fkey"
	RequestsNameCheck        Constraint = "structured_requests_name_check"
	RequestsDescriptionCheck Constraint = "structured_requests_description_check"
	RequestsSchemaCheck      Constraint = "structured_requests_schema_check"
	RequestsStatusCheck      Constraint = "structured_requests_status_check"
	RequestsRejectionsCheck  Constraint = "structured_requests_rejections_check"
	// RequestsCheck: validation_rejections BETWEEN 0 AND rejections (named by PostgreSQL).
	RequestsCheck                   Constraint = "structured_requests_check"
	RequestsStepsCheck              Constraint = "structured_requests_steps_check"
	RequestsErrorCodeCheck          Constraint = "structured_requests_error_code_check"
	RequestsReceiptIffFinished      Constraint = "structured_requests_receipt_iff_finished"
	RequestsFinishedAt              Constraint = "structured_requests_finished_at"
	RequestsNoCandidateWhenFinished Constraint = "structured_requests_no_candidate_when_finished"
	RequestsCandidateHasCall        Constraint = "structured_requests_candidate_has_call"
	RequestsErrorIffUnsuccessful    Constraint = "structured_requests_error_iff_unsuccessful"
	RequestsReceiptMessageFk        Constraint = "structured_requests_receipt_message_fk"
	// RequestsAttemptsList: attempts is a JSON list of at most rejections entries (migration 00009).
	RequestsAttemptsList Constraint = "structured_requests_attempts_list"
	// RequestsTraceParentForm: trace_parent is a W3C traceparent (migration 00015).
	RequestsTraceParentForm Constraint = "structured_requests_trace_parent_form"

	MessagesPkey                    Constraint = "chat_messages_pkey"
	MessagesChatIDFkey              Constraint = "chat_messages_chat_id_fkey"
	MessagesRoleCheck               Constraint = "chat_messages_role_check"
	MessagesKindCheck               Constraint = "chat_messages_kind_check"
	MessagesVisibilityCheck         Constraint = "chat_messages_visibility_check"
	MessagesContentCheck            Constraint = "chat_messages_content_check"
	MessagesStructuredRequestIDFkey Constraint = "chat_messages_structured_request_id_fkey"
	MessagesReceiptShape            Constraint = "chat_messages_receipt_shape"
	MessagesControlClientOnly       Constraint = "chat_messages_control_client_only"
	MessagesOneReceiptPerRequest    Constraint = "chat_messages_one_receipt_per_request"

	QueuePkey                    Constraint = "chat_queued_messages_pkey"
	QueueChatIDFkey              Constraint = "chat_queued_messages_chat_id_fkey"
	QueueContentCheck            Constraint = "chat_queued_messages_content_check"
	QueueStructuredRequestIDKey  Constraint = "chat_queued_messages_structured_request_id_key"
	QueueStructuredRequestIDFkey Constraint = "chat_queued_messages_structured_request_id_fkey"

	TriggerStatePkey           Constraint = "chatd_trigger_state_pkey"
	TriggerStateSingletonCheck Constraint = "chatd_trigger_state_singleton_check"

	IdempotencyKeysPkey             Constraint = "idempotency_keys_pkey"
	IdempotencyKeysUserIDFkey       Constraint = "idempotency_keys_user_id_fkey"
	IdempotencyKeysKeyCheck         Constraint = "idempotency_keys_key_check"
	IdempotencyKeysFingerprintCheck Constraint = "idempotency_keys_fingerprint_check"
	IdempotencyKeysStatusCheck      Constraint = "idempotency_keys_status_check"

	StreamTicketsPkey         Constraint = "stream_tickets_pkey"
	StreamTicketsUserIDFkey   Constraint = "stream_tickets_user_id_fkey"
	StreamTicketsChatIDFkey   Constraint = "stream_tickets_chat_id_fkey"
	StreamTicketsDigestSHA256 Constraint = "stream_tickets_digest_sha256"
	StreamTicketsTokenIDFkey  Constraint = "stream_tickets_token_id_fkey"

	ChatFollowersPkey Constraint = "chat_followers_pkey" // written by internal/notify, never refused (upsert)

	// Deletion (migration 00020).
	IdempotencyKeysChatFk     Constraint = "idempotency_keys_chat_fk"
	ChatTombstonesPkey        Constraint = "chat_tombstones_pkey"
	ChatTombstonesOwnerFk     Constraint = "chat_tombstones_owner_fk"
	ChatTombstonesReasonKnown Constraint = "chat_tombstones_reason_known"
	RequestTombstonesPkey     Constraint = "request_tombstones_pkey"
	RequestTombstonesChatFk   Constraint = "request_tombstones_chat_fk"
	RequestTombstonesFinished Constraint = "request_tombstones_finished"
)

// Trigger invariants (sql/triggers/).
const (
	ChatsTouchRequiresChat     Constraint = "chats_touch_requires_chat"
	ChatsIdentityImmutable     Constraint = "chats_identity_immutable"
	ChatsStatusTransition      Constraint = "chats_status_transition"
	ChatsHistoryVersionForward Constraint = "chats_history_version_forward"

	MessagesRevisionByDatabase   Constraint = "chat_messages_revision_by_database"
	MessagesReceiptImmutable     Constraint = "chat_messages_receipt_immutable"
	MessagesIdentityImmutable    Constraint = "chat_messages_identity_immutable"
	MessagesNoUndelete           Constraint = "chat_messages_no_undelete"
	MessagesReceiptNeedsPending  Constraint = "chat_messages_receipt_needs_pending_request"
	MessagesRequestInChat        Constraint = "chat_messages_request_in_chat"
	MessagesNoDelete             Constraint = "chat_messages_no_delete"
	MessagesReceiptClosesRequest Constraint = "chat_messages_receipt_closes_request"

	RequestsNoDelete            Constraint = "structured_requests_no_delete"
	RequestsStartPending        Constraint = "structured_requests_start_pending"
	RequestsFinishedImmutable   Constraint = "structured_requests_finished_immutable"
	RequestsDefinitionImmutable Constraint = "structured_requests_definition_immutable"
	RequestsCountersGrow        Constraint = "structured_requests_counters_grow"
	RequestsFinishWithReceipt   Constraint = "structured_requests_finish_with_receipt"

	QueueIdentityImmutable Constraint = "chat_queued_messages_identity_immutable"
	// QueueAtMost20 refuses a 21st queued message of a chat (ErrQueueFull).
	QueueAtMost20 Constraint = "chat_queued_messages_at_most_20"
	// ChatsRunnablePerUser refuses an admission past the owner's runnable
	// chats limit (ErrTooManyRunnable; chatd_runnable_within).
	ChatsRunnablePerUser Constraint = "chats_runnable_per_user"

	// ChatsDeleteRequestsFinished refuses deleting a chat with a pending
	// structured request (its receipt is owed first).
	ChatsDeleteRequestsFinished Constraint = "chats_delete_requests_finished"
	// ChatsDeleteAwaitedChild refuses deleting a spawned child its living
	// parent still awaits.
	ChatsDeleteAwaitedChild Constraint = "chats_delete_awaited_child"
	// ChatsNotDeleted refuses a chat under a deleted chat's id.
	ChatsNotDeleted Constraint = "chats_not_deleted"
)

// IsConstraint reports whether err is a database error raised by one of
// the named constraints.
func IsConstraint(err error, names ...Constraint) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	for _, n := range names {
		if pgErr.ConstraintName == string(n) {
			return true
		}
	}
	return false
}
