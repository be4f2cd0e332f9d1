-- name: IdempotencyKeyGet :one
-- A live key of the user (older than 24 hours counts as absent).
SELECT fingerprint, status, response FROM idempotency_keys
WHERE user_id = @user_id AND key = @key AND created_at > now() - interval '24 hours';

-- name: IdempotencyKeyInsertIfFree :execrows
-- Inserted in the transaction that did the work. An expired row with the
-- same key is replaced; a live one (committed by a concurrent request with
-- the same key, which this statement waits for) leaves 0 rows, and the
-- caller rolls the work back.
-- The answer holds the chat's message: the key goes with the chat.
INSERT INTO idempotency_keys (user_id, key, fingerprint, status, response, chat_id)
VALUES (@user_id, @key, @fingerprint, @status, @response, @chat_id)
ON CONFLICT (user_id, key) DO UPDATE
SET fingerprint = EXCLUDED.fingerprint, status = EXCLUDED.status, response = EXCLUDED.response,
    chat_id = EXCLUDED.chat_id, created_at = now()
WHERE idempotency_keys.created_at <= now() - interval '24 hours';

-- name: IdempotencyKeysDeleteExpired :execrows
-- Housekeeping: expired keys, a bounded batch at a time.
DELETE FROM idempotency_keys WHERE ctid IN (
    SELECT ctid FROM idempotency_keys WHERE created_at <= now() - interval '24 hours' LIMIT @max_rows
);
