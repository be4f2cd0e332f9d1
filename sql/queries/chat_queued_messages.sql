-- name: QueueInsert :one
INSERT INTO chat_queued_messages (chat_id, content, structured_request_id)
VALUES (@chat_id, @content, sqlc.narg(structured_request_id))
RETURNING *;

-- name: QueueList :many
SELECT * FROM chat_queued_messages WHERE chat_id = @chat_id ORDER BY id;

-- name: QueuePopHead :one
DELETE FROM chat_queued_messages
WHERE id = (SELECT min(q.id) FROM chat_queued_messages q WHERE q.chat_id = @chat_id)
RETURNING *;

-- name: QueueDelete :one
DELETE FROM chat_queued_messages WHERE chat_id = @chat_id AND id = @id
RETURNING *;

-- name: QueueClear :many
DELETE FROM chat_queued_messages WHERE chat_id = @chat_id
RETURNING *;

-- name: QueueCount :one
SELECT count(*)::integer FROM chat_queued_messages WHERE chat_id = @chat_id;

-- name: QueueListForChats :many
SELECT * FROM chat_queued_messages WHERE chat_id = ANY (@chat_ids::uuid[]) ORDER BY chat_id, id;
