-- Deleting what users stored: a chat (with its children), a chat past the
-- retention period, a user (docs/schema.md#deleting).
--
-- A deleted chat leaves a tombstone: chat_tombstones names it, its owner
-- and why it went (deleted by its owner, expired by --retain-chats, erased
-- with its user); request_tombstones keeps each of its structured
-- requests' outcome (status, error code and message, usage) without the
-- value, the schema or the attempts. Both are written by the chat's delete
-- trigger (sql/triggers/070_deletion.sql), whoever deletes, and swept
-- after --retain-tombstones; a chat id with a tombstone cannot be used
-- again.
--
-- webhook_deliveries no longer references structured_requests: a receipt
-- committed in the transaction that deleted its chat (a pending request
-- cancelled with chat_deleted) is delivered afterwards, from its request's
-- tombstone. A delivery goes with its request's tombstone instead (the
-- trigger above); chatd check reports one whose request is in neither
-- table (webhook_delivery_orphan).
--
-- The indexes make each row a delete removes cost one index probe per
-- foreign key that points at it, instead of a scan of the referencing
-- table: the deferred foreign key from structured_requests to its receipt,
-- the children spawned by a message (chats_spawn_call_unique's predicate
-- did not follow from the cascade's equality), stream tickets by chat.
-- chats_idle_updated orders the retention sweep's candidates (chats at
-- rest without a parent) and finds the oldest of them kept.
--
-- An idempotency key's stored answer holds the message that created or was
-- sent to its chat: it now names that chat and goes with it.

-- +goose Up
ALTER TABLE structured_requests
    DROP CONSTRAINT structured_requests_error_code_check,
    ADD CONSTRAINT structured_requests_error_code_check CHECK (error_code IN (
        'validation_exhausted', 'not_produced', 'configuration_error', 'provider_error', 'refused',
        'hook_failed', 'interrupted', 'queue_deleted', 'superseded', 'chat_deleted'));

CREATE TABLE chat_tombstones (
    chat_id        uuid NOT NULL,
    owner_id       uuid NOT NULL,
    parent_chat_id uuid,
    reason         text NOT NULL,
    deleted_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT chat_tombstones_pkey PRIMARY KEY (chat_id),
    CONSTRAINT chat_tombstones_owner_fk FOREIGN KEY (owner_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT chat_tombstones_reason_known CHECK (reason IN ('deleted', 'expired', 'erased'))
);
CREATE INDEX chat_tombstones_owner ON chat_tombstones (owner_id);
CREATE INDEX chat_tombstones_deleted_at ON chat_tombstones (deleted_at);

CREATE TABLE request_tombstones (
    request_id    uuid NOT NULL,
    chat_id       uuid NOT NULL,
    status        text NOT NULL,
    error_code    text,
    error_message text,
    usage         jsonb,
    trace_parent  text,
    created_at    timestamptz NOT NULL,
    finished_at   timestamptz NOT NULL,
    CONSTRAINT request_tombstones_pkey PRIMARY KEY (request_id),
    CONSTRAINT request_tombstones_chat_fk FOREIGN KEY (chat_id) REFERENCES chat_tombstones (chat_id) ON DELETE CASCADE,
    CONSTRAINT request_tombstones_finished CHECK (status IN ('succeeded', 'failed', 'cancelled'))
);
CREATE INDEX request_tombstones_chat ON request_tombstones (chat_id);

ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_request_fk;

ALTER TABLE idempotency_keys ADD COLUMN chat_id uuid,
    ADD CONSTRAINT idempotency_keys_chat_fk FOREIGN KEY (chat_id) REFERENCES chats (id) ON DELETE CASCADE;
CREATE INDEX idempotency_keys_chat ON idempotency_keys (chat_id) WHERE chat_id IS NOT NULL;

CREATE INDEX structured_requests_receipt ON structured_requests (receipt_message_id) WHERE receipt_message_id IS NOT NULL;
CREATE INDEX stream_tickets_chat ON stream_tickets (chat_id);
DROP INDEX chats_spawn_call_unique;
CREATE UNIQUE INDEX chats_spawn_call_unique ON chats (spawn_message_id, spawn_tool_call_id) WHERE spawn_message_id IS NOT NULL;
CREATE INDEX chats_idle_updated ON chats (updated_at) WHERE parent_chat_id IS NULL AND status IN ('waiting', 'error');

-- +goose Down
-- The delete triggers (sql/triggers/070_deletion.sql) write the tombstones:
-- they go with them, or every delete would fail.
DROP TRIGGER IF EXISTS chatd_chats_before_delete ON chats;
DROP FUNCTION IF EXISTS chatd_chats_before_delete();
DROP TRIGGER IF EXISTS chatd_chats_not_deleted ON chats;
DROP FUNCTION IF EXISTS chatd_chats_not_deleted();
DROP TRIGGER IF EXISTS chatd_request_tombstones_after_delete ON request_tombstones;
DROP FUNCTION IF EXISTS chatd_request_tombstones_after_delete();
DROP INDEX chats_idle_updated;
DROP INDEX chats_spawn_call_unique;
CREATE UNIQUE INDEX chats_spawn_call_unique ON chats (spawn_message_id, spawn_tool_call_id) WHERE spawn_tool_call_id IS NOT NULL;
DROP INDEX stream_tickets_chat;
DROP INDEX structured_requests_receipt;
ALTER TABLE idempotency_keys DROP COLUMN chat_id;
DELETE FROM webhook_deliveries d WHERE NOT EXISTS (SELECT 1 FROM structured_requests r WHERE r.request_id = d.request_id);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_request_fk FOREIGN KEY (request_id)
    REFERENCES structured_requests (request_id) ON DELETE CASCADE;
DROP TABLE request_tombstones;
DROP TABLE chat_tombstones;
ALTER TABLE structured_requests
    DROP CONSTRAINT structured_requests_error_code_check,
    ADD CONSTRAINT structured_requests_error_code_check CHECK (error_code IN (
        'validation_exhausted', 'not_produced', 'configuration_error', 'provider_error', 'refused',
        'hook_failed', 'interrupted', 'queue_deleted', 'superseded'));
