-- name: TokenInsert :one
INSERT INTO api_tokens (user_id, token_hash) VALUES (@user_id, @token_hash)
RETURNING id;

-- name: TokenAuthenticate :one
-- Resolves a token digest to its user. last_used_at is refreshed at most once
-- a minute so that authentication stays a read on the hot path.
WITH t AS (
    SELECT api_tokens.id, api_tokens.user_id, api_tokens.last_used_at
    FROM api_tokens WHERE api_tokens.token_hash = @token_hash
), touched AS (
    UPDATE api_tokens SET last_used_at = now()
    FROM t
    WHERE api_tokens.id = t.id AND (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute')
)
SELECT users.id, users.name
FROM t JOIN users ON users.id = t.user_id;
