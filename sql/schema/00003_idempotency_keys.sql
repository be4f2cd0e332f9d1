-- Idempotency-Key: a create or send retried with the same key returns the
-- first answer instead of doing the work again. The row is written in the
-- transaction that did the work, so it exists exactly when the work
-- committed. Kept 24 hours.

-- +goose Up
CREATE TABLE idempotency_keys (
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    key         text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    -- SHA-256 of the method, the path and the body: the same key with
    -- another request is refused.
    fingerprint bytea NOT NULL CHECK (length(fingerprint) = 32),
    status      integer NOT NULL CHECK (status BETWEEN 200 AND 299),
    response    bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- +goose Down
DROP TABLE idempotency_keys;
