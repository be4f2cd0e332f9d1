-- name: UserUpsertByName :one
-- A named user (chatd token create --user, the token API, X-Chatd-User
-- without an identity provider), created on first use; an identity
-- provider's user is found by its idp: name too, never created by it (its
-- name fails users_name_check without an issuer).
INSERT INTO users (name) VALUES (@name)
ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
RETURNING *;

-- name: UserUpsertBySubject :one
-- An identity provider's user, created on first use, keyed by (issuer,
-- subject): the same subject at another issuer is another user.
INSERT INTO users (name, issuer, subject) VALUES (@name, @issuer, @subject)
ON CONFLICT ON CONSTRAINT users_issuer_subject_key DO UPDATE SET subject = EXCLUDED.subject
RETURNING *;

-- name: UserGetByID :one
SELECT * FROM users WHERE id = @id;

-- name: UserList :many
-- A page of users by name, after the cursor (a name) when there is one.
SELECT * FROM users
WHERE sqlc.narg(after)::text IS NULL OR users.name > sqlc.narg(after)::text
ORDER BY users.name
LIMIT @max_rows;

-- name: UserGetByName :one
SELECT * FROM users WHERE name = @name;

-- name: UserLockByID :one
-- Taken by an erasure's last transaction: a chat, token or key inserted
-- for the user meanwhile waits for it (its foreign key check), then fails.
SELECT * FROM users WHERE id = @id FOR UPDATE;

-- name: UserDelete :execrows
-- The user row, last: what is left of theirs goes with it (ON DELETE
-- CASCADE), their tombstones included.
DELETE FROM users WHERE id = @id;

-- name: UserTokensDelete :execrows
DELETE FROM api_tokens WHERE user_id = @user_id;

-- name: UserStreamTicketsDelete :execrows
DELETE FROM stream_tickets WHERE user_id = @user_id;

-- name: UserIdempotencyKeysDelete :execrows
DELETE FROM idempotency_keys WHERE user_id = @user_id;

-- name: UserFollowersDelete :execrows
DELETE FROM chat_followers WHERE owner_id = @owner_id;

-- name: UserWebhookDeliveriesDelete :many
-- The webhook deliveries owed for the user's deleted chats' requests, by
-- state (pending ones were not yet sent).
WITH gone AS (
    DELETE FROM webhook_deliveries d
    USING request_tombstones r, chat_tombstones c
    WHERE d.request_id = r.request_id AND r.chat_id = c.chat_id AND c.owner_id = @owner_id
    RETURNING d.state
)
SELECT state, count(*)::bigint AS deliveries FROM gone GROUP BY state;

-- name: UserTombstonesDelete :execrows
DELETE FROM chat_tombstones WHERE owner_id = @owner_id;
