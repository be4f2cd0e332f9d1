-- name: StreamTicketInsertIfOwned :one
-- Issues a ticket for one of the user's chats (no row: not theirs) and
-- drops expired tickets on the way. A JWT's ticket expires by the time the
-- JWT stops being accepted (LEAST ignores the NULL of a token's).
WITH purged AS (
    DELETE FROM stream_tickets WHERE stream_tickets.expires_at < now()
)
INSERT INTO stream_tickets (digest, user_id, chat_id, expires_at, token_id, credential_valid_until)
SELECT @digest, chats.owner_id, chats.id,
    LEAST(now() + make_interval(secs => @ttl_seconds::double precision), sqlc.narg(credential_valid_until)::timestamptz),
    sqlc.narg(token_id)::uuid, sqlc.narg(credential_valid_until)::timestamptz
FROM chats WHERE chats.id = @chat_id AND chats.owner_id = @user_id
RETURNING expires_at;

-- name: StreamTicketRedeem :one
-- Uses a ticket up: it is deleted whether or not it is still valid, so it
-- works once at most. The caller checks the chat and valid.
DELETE FROM stream_tickets WHERE stream_tickets.digest = @digest
RETURNING user_id, chat_id, token_id, credential_valid_until, (expires_at >= now())::boolean AS valid;
