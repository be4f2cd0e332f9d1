-- The provider retry a running chat waits out: {"attempt", "max_attempts",
-- "next_try_at", "last_error"}, set by the worker when a provider call
-- failed and will be made again (ChatSetProviderRetryIfOwned), cleared by
-- chatd_chats_before_update when the chat's history or status moves (the
-- step was committed, the turn ended or was interrupted). Streams send it
-- as provider_retry; the chat and the lookup show it.

-- +goose Up
ALTER TABLE chats ADD COLUMN provider_retry jsonb;

-- +goose Down
ALTER TABLE chats DROP COLUMN provider_retry;
