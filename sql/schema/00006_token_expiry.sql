-- Tokens may expire (chatd token create --expires-in), and a stream ticket
-- remembers the token that asked for it: revoking that token (deleting its
-- row) removes its unused tickets, and streams opened with either notice
-- within store.TokenCacheTTL.

-- +goose Up
ALTER TABLE api_tokens ADD COLUMN expires_at timestamptz;
ALTER TABLE stream_tickets ADD COLUMN token_id uuid REFERENCES api_tokens (id) ON DELETE CASCADE;

-- +goose Down
ALTER TABLE stream_tickets DROP COLUMN token_id;
ALTER TABLE api_tokens DROP COLUMN expires_at;
