-- Stream tickets: a browser's EventSource cannot send the Authorization
-- header, so it follows a chat's stream with a short-lived, single-use
-- ticket in the query instead of the long-lived token. Tickets live in the
-- database, so any replica redeems a ticket any other replica issued; only
-- the SHA-256 digest is stored.

-- +goose Up
CREATE TABLE stream_tickets (
    digest     bytea PRIMARY KEY CONSTRAINT stream_tickets_digest_sha256 CHECK (length(digest) = 32),
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    chat_id    uuid NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    expires_at timestamptz NOT NULL
);
CREATE INDEX stream_tickets_expires ON stream_tickets (expires_at);

-- +goose Down
DROP TABLE stream_tickets;
