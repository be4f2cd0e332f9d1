-- The core tables. Invariants that span rows or tables are carried by the
-- trigger functions in sql/triggers/, which `chatd migrate up` re-applies after
-- every migration run. See docs/schema.md for what each column means.

-- +goose Up
CREATE TABLE users (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name       text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Bearer tokens are stored as SHA-256 digests; the secret is shown once.
CREATE TABLE api_tokens (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_hash   bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz
);

CREATE TABLE chats (
    id                       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id                 uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    parent_chat_id           uuid REFERENCES chats (id) ON DELETE CASCADE,
    title                    text NOT NULL DEFAULT '',
    model                    text NOT NULL,
    system_prompt            text NOT NULL DEFAULT '',
    mode                     text NOT NULL DEFAULT 'normal' CHECK (mode IN ('normal', 'plan', 'child')),
    dynamic_tools            jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(dynamic_tools) = 'array'),
    status                   text NOT NULL DEFAULT 'waiting'
        CHECK (status IN ('waiting', 'running', 'requires_action', 'interrupting', 'error')),
    -- Ownership: the worker that runs the chat holds a lease it renews.
    worker_id                uuid,
    lease_expires_at         timestamptz,
    -- Bumped exactly once by every transaction that changes the chat, its
    -- messages, its queue or its structured requests (enforced by trigger).
    snapshot_version         bigint NOT NULL DEFAULT 1,
    snapshot_xact            xid8,
    -- Set to snapshot_version when model-relevant history changes; runners fence on it.
    history_version          bigint NOT NULL DEFAULT 0,
    -- Provider attempts for the current history_version; reset when history changes.
    generation_attempt       integer NOT NULL DEFAULT 0 CHECK (generation_attempt >= 0),
    last_error               jsonb,
    requires_action_deadline timestamptz,
    compaction_requested_at  timestamptz,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT chats_owned_only_while_runnable CHECK (status IN ('running', 'interrupting') OR worker_id IS NULL),
    CONSTRAINT chats_lease_with_owner CHECK ((worker_id IS NULL) = (lease_expires_at IS NULL)),
    CONSTRAINT chats_history_not_ahead CHECK (history_version <= snapshot_version),
    CONSTRAINT chats_child_has_parent CHECK (mode <> 'child' OR parent_chat_id IS NOT NULL),
    CONSTRAINT chats_deadline_only_requires_action CHECK (status = 'requires_action' OR requires_action_deadline IS NULL)
);

CREATE INDEX chats_owner_updated ON chats (owner_id, updated_at DESC, id);
CREATE INDEX chats_runnable ON chats (updated_at) WHERE status IN ('running', 'interrupting');
CREATE INDEX chats_requires_action_deadline ON chats (requires_action_deadline) WHERE status = 'requires_action';

-- The ledger: one row per structured request, updated in the same
-- transaction as the messages it describes.
CREATE TABLE structured_requests (
    request_id            uuid PRIMARY KEY,
    chat_id               uuid NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    name                  text NOT NULL CHECK (name ~ '^[A-Za-z0-9_-]{1,64}$'),
    description           text NOT NULL DEFAULT '' CHECK (octet_length(description) <= 1024),
    schema                jsonb NOT NULL CHECK (jsonb_typeof(schema) = 'object'),
    status                text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'succeeded', 'failed', 'cancelled')),
    -- Rejected finalization batches (text-only ending, invalid value or arguments, invalid batching).
    rejections            integer NOT NULL DEFAULT 0 CHECK (rejections BETWEEN 0 AND 3),
    -- How many of those rejections were values that failed schema validation.
    validation_rejections integer NOT NULL DEFAULT 0 CHECK (validation_rejections BETWEEN 0 AND rejections),
    -- Provider steps taken for this request.
    steps                 integer NOT NULL DEFAULT 0 CHECK (steps >= 0),
    -- The current validated value (SQL NULL = none; JSON null is a value).
    candidate             jsonb,
    candidate_tool_call_id text,
    error_code            text CHECK (error_code IN (
        'validation_exhausted', 'not_produced', 'configuration_error', 'provider_error', 'refused',
        'interrupted', 'queue_deleted', 'superseded')),
    error_message         text,
    receipt_message_id    bigint,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    finished_at           timestamptz,
    CONSTRAINT structured_requests_receipt_iff_finished CHECK ((status = 'pending') = (receipt_message_id IS NULL)),
    CONSTRAINT structured_requests_finished_at CHECK ((status = 'pending') = (finished_at IS NULL)),
    CONSTRAINT structured_requests_no_candidate_when_finished CHECK (status = 'pending' OR candidate IS NULL),
    CONSTRAINT structured_requests_candidate_has_call CHECK ((candidate IS NULL) = (candidate_tool_call_id IS NULL)),
    CONSTRAINT structured_requests_error_iff_unsuccessful CHECK ((status IN ('failed', 'cancelled')) = (error_code IS NOT NULL))
);

CREATE INDEX structured_requests_chat ON structured_requests (chat_id, created_at);
CREATE INDEX structured_requests_pending ON structured_requests (chat_id) WHERE status = 'pending';

CREATE TABLE chat_messages (
    id                    bigserial PRIMARY KEY,
    chat_id               uuid NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    role                  text NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    -- message: ordinary history; receipt: the terminal outcome of a structured
    -- request; control: a client-visible marker that is never sent to the model.
    kind                  text NOT NULL DEFAULT 'message' CHECK (kind IN ('message', 'receipt', 'control')),
    -- user: clients only; model: provider only; both.
    visibility            text NOT NULL DEFAULT 'both' CHECK (visibility IN ('user', 'model', 'both')),
    content               jsonb NOT NULL CHECK (jsonb_typeof(content) = 'array'),
    structured_request_id uuid REFERENCES structured_requests (request_id) DEFERRABLE INITIALLY DEFERRED,
    finish_reason         text,
    usage                 jsonb,
    compressed            boolean NOT NULL DEFAULT false,
    deleted               boolean NOT NULL DEFAULT false,
    -- The chat's snapshot_version at the row's last change (set by trigger).
    revision              bigint NOT NULL,
    created_at            timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT chat_messages_receipt_shape CHECK (
        kind <> 'receipt' OR (role = 'assistant' AND visibility = 'user' AND structured_request_id IS NOT NULL)),
    CONSTRAINT chat_messages_control_client_only CHECK (kind <> 'control' OR visibility = 'user')
);

CREATE INDEX chat_messages_chat_id ON chat_messages (chat_id, id);
CREATE INDEX chat_messages_chat_revision ON chat_messages (chat_id, revision);
CREATE UNIQUE INDEX chat_messages_one_receipt_per_request ON chat_messages (structured_request_id) WHERE kind = 'receipt';
CREATE INDEX chat_messages_request ON chat_messages (structured_request_id) WHERE structured_request_id IS NOT NULL;

ALTER TABLE structured_requests
    ADD CONSTRAINT structured_requests_receipt_message_fk
    FOREIGN KEY (receipt_message_id) REFERENCES chat_messages (id) DEFERRABLE INITIALLY DEFERRED;

CREATE TABLE chat_queued_messages (
    id                    bigserial PRIMARY KEY,
    chat_id               uuid NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    content               jsonb NOT NULL CHECK (jsonb_typeof(content) = 'array'),
    structured_request_id uuid UNIQUE REFERENCES structured_requests (request_id) DEFERRABLE INITIALLY DEFERRED,
    created_at            timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX chat_queued_messages_chat ON chat_queued_messages (chat_id, id);

-- What `chatd migrate up` last applied from sql/triggers/, so a server can
-- refuse to run against stale trigger definitions.
CREATE TABLE chatd_trigger_state (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    files_hash text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE chatd_trigger_state;
DROP TABLE chat_queued_messages CASCADE;
DROP TABLE chat_messages CASCADE;
DROP TABLE structured_requests CASCADE;
DROP TABLE chats CASCADE;
DROP TABLE api_tokens;
DROP TABLE users;
-- The trigger functions belong to the tables dropped above.
DROP FUNCTION IF EXISTS chatd_touch_chat(uuid) CASCADE;
DROP FUNCTION IF EXISTS chatd_touch_chat(uuid, boolean) CASCADE;
DROP FUNCTION IF EXISTS chatd_chats_before_update() CASCADE;
DROP FUNCTION IF EXISTS chatd_chats_before_insert() CASCADE;
DROP FUNCTION IF EXISTS chatd_chats_notify() CASCADE;
DROP FUNCTION IF EXISTS chatd_chats_notify_delete() CASCADE;
DROP FUNCTION IF EXISTS chatd_messages_before_write() CASCADE;
DROP FUNCTION IF EXISTS chatd_messages_before_delete() CASCADE;
DROP FUNCTION IF EXISTS chatd_messages_fence_insert() CASCADE;
DROP FUNCTION IF EXISTS chatd_messages_fence_update() CASCADE;
DROP FUNCTION IF EXISTS chatd_receipt_closes_request() CASCADE;
DROP FUNCTION IF EXISTS chatd_requests_guard() CASCADE;
DROP FUNCTION IF EXISTS chatd_queue_touch() CASCADE;
