-- A stream ticket that a JWT asked for keeps when the server stops
-- accepting that JWT (its exp plus the leeway): the ticket expires no
-- later, and the stream it opens ends then, as a stream opened with the
-- JWT itself does. NULL for a ticket an API token asked for: its streams
-- re-check the token instead.

-- +goose Up
ALTER TABLE stream_tickets ADD COLUMN credential_valid_until timestamptz;

-- +goose Down
ALTER TABLE stream_tickets DROP COLUMN credential_valid_until;
