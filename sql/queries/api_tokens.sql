-- name: TokenInsert :one
INSERT INTO api_tokens (user_id, token_hash, expires_at, scopes, act_as)
VALUES (@user_id, @token_hash, CASE WHEN @expires_in_seconds::double precision > 0
    THEN now() + make_interval(secs => @expires_in_seconds::double precision) END, @scopes::text[], @act_as)
RETURNING id, created_at, expires_at;

-- name: TokenAuthenticate :one
-- Resolves a token digest that has not expired to its user. last_used_at is
-- refreshed at most once a minute so that authentication stays a read on the
-- hot path.
WITH t AS (
    SELECT api_tokens.id, api_tokens.user_id, api_tokens.last_used_at, api_tokens.scopes, api_tokens.act_as
    FROM api_tokens WHERE api_tokens.token_hash = @token_hash
      AND (api_tokens.expires_at IS NULL OR api_tokens.expires_at > now())
), touched AS (
    UPDATE api_tokens SET last_used_at = now()
    FROM t
    WHERE api_tokens.id = t.id AND (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute')
)
SELECT users.id, users.name, t.id AS token_id, t.scopes, t.act_as
FROM t JOIN users ON users.id = t.user_id;

-- name: TokenIsLive :one
-- Whether a token still exists and has not expired (open streams ask).
SELECT EXISTS (
    SELECT 1 FROM api_tokens
    WHERE api_tokens.id = @id AND (api_tokens.expires_at IS NULL OR api_tokens.expires_at > now())
)::boolean AS live;

-- name: TokenList :many
-- Every token, or one user's, with its state on the database clock.
SELECT api_tokens.id, users.id AS user_id, users.name AS user_name, api_tokens.scopes, api_tokens.act_as,
    api_tokens.created_at, api_tokens.last_used_at, api_tokens.expires_at,
    (api_tokens.expires_at IS NOT NULL AND api_tokens.expires_at <= now())::boolean AS expired
FROM api_tokens JOIN users ON users.id = api_tokens.user_id
WHERE sqlc.narg(user_name)::text IS NULL OR users.name = sqlc.narg(user_name)::text
ORDER BY users.name, api_tokens.created_at, api_tokens.id;

-- name: TokenDelete :one
-- Revokes a token: it stops authenticating (within store.TokenCacheTTL on
-- processes that cached it) and its unused stream tickets go with it.
DELETE FROM api_tokens WHERE api_tokens.id = @id
RETURNING id;
