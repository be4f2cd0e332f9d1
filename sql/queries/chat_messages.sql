-- name: MessageInsert :one
INSERT INTO chat_messages (chat_id, role, kind, visibility, content, structured_request_id, finish_reason, usage)
VALUES (@chat_id, @role, @kind, @visibility, @content, sqlc.narg(structured_request_id), sqlc.narg(finish_reason), sqlc.narg(usage))
RETURNING *;

-- name: MessageInsertReceipt :one
-- Inserts a receipt whose outcome (the content's second part) keeps the
-- request's usage sum as this statement sees it (chatd_request_usage),
-- the steps this transaction inserted included — so that a worker commit
-- sends its steps, the progress and the receipt in one batch instead of
-- reading the sum first.
INSERT INTO chat_messages (chat_id, role, kind, visibility, content, structured_request_id)
VALUES (@chat_id, @role, @kind, @visibility,
        jsonb_set(@content::jsonb, '{1,outcome,usage}', chatd_request_usage(@request_id::uuid)), @request_id::uuid)
RETURNING *;

-- name: MessageInsertRows :many
-- Inserts a worker commit's messages in one statement (one round trip): rows
-- is a JSON array of objects with MessageInsert's parameters as keys (an
-- absent key is NULL, or the column default for kind and visibility). Ids
-- are taken in the array's order, and the rows return in that order.
INSERT INTO chat_messages (chat_id, role, kind, visibility, content, structured_request_id, finish_reason, usage)
SELECT @chat_id::uuid, r.m->>'role', r.m->>'kind', r.m->>'visibility', r.m->'content',
       (r.m->>'structured_request_id')::uuid, r.m->>'finish_reason', r.m->'usage'
FROM jsonb_array_elements(@rows::jsonb) WITH ORDINALITY AS r(m, n)
ORDER BY r.n
RETURNING *;

-- name: MessageListForClient :many
-- What a client may see: not deleted, not model-only, ascending ids.
SELECT * FROM chat_messages
WHERE chat_id = @chat_id AND NOT deleted AND visibility IN ('user', 'both') AND id > @after_id
ORDER BY id
LIMIT @max_rows;

-- name: MessageListForPrompt :many
-- What the provider may see: ordinary messages, not deleted, not client-only,
-- not summarised away by compaction. Receipts and controls are never replayed.
SELECT * FROM chat_messages
WHERE chat_id = @chat_id AND NOT deleted AND NOT compressed AND kind = 'message' AND visibility IN ('model', 'both')
ORDER BY id;

-- name: MessageCompressBefore :execrows
-- Compaction: rows before the current turn, and earlier summaries, leave the
-- prompt (the new summary replaces them). Receipts and controls never take
-- part.
UPDATE chat_messages SET compressed = true
WHERE chat_id = @chat_id AND NOT deleted AND NOT compressed
  AND kind = 'message' AND visibility IN ('model', 'both')
  AND (id < @before_id OR content @> '[{"type":"summary"}]');

-- name: MessageGetLatestUserRequest :one
-- The latest real user request: client-visible user input (not a model-only
-- feedback row), which decides whether a structured request governs the turn.
SELECT * FROM chat_messages
WHERE chat_id = @chat_id AND NOT deleted AND kind = 'message' AND role = 'user' AND visibility IN ('user', 'both')
ORDER BY id DESC
LIMIT 1;

-- name: MessageGetByID :one
SELECT * FROM chat_messages WHERE id = @id;

-- name: MessageGetInChat :one
SELECT * FROM chat_messages WHERE chat_id = @chat_id AND id = @id;

-- name: MessageSoftDeleteFrom :many
-- Discards history from a message on (an edit). Receipts stay: they are the
-- durable record of requests that already finished, and are immutable.
UPDATE chat_messages SET deleted = true
WHERE chat_id = @chat_id AND id >= @from_id AND NOT deleted AND kind <> 'receipt'
RETURNING id, visibility;

-- name: MessageCountControls :one
SELECT count(*)::integer FROM chat_messages
WHERE structured_request_id = @request_id AND kind = 'control';

-- name: MessageListChangedForStream :many
-- Client-visible rows changed after a stream's watermark, deleted ones
-- included (a deletion means the client must reset its history).
SELECT * FROM chat_messages
WHERE chat_id = @chat_id AND revision > @after_revision AND visibility IN ('user', 'both')
ORDER BY id;

-- name: RequestUsageSum :one
-- The usage sum a structured request's receipt keeps (chatd_request_usage,
-- sql/triggers/020_messages.sql).
SELECT chatd_request_usage(@request_id::uuid)::jsonb AS usage;

-- name: MessageLastAssistant :one
-- The last ordinary assistant step of a chat: a spawned child's answer.
SELECT * FROM chat_messages
WHERE chat_id = @chat_id AND NOT deleted AND kind = 'message' AND role = 'assistant' AND visibility IN ('user', 'both')
ORDER BY id DESC
LIMIT 1;

-- name: MessageListForChats :many
-- An export's messages: every row of the chats, deleted ones included.
SELECT * FROM chat_messages WHERE chat_id = ANY (@chat_ids::uuid[]) ORDER BY chat_id, id;

-- name: MessageImportMany :many
-- An imported chat's history in one statement: rows is a JSON array of
-- objects with the columns as keys (an absent key is NULL, or the column
-- default). Ids are taken in the array's order, and returned in it.
INSERT INTO chat_messages (chat_id, role, kind, visibility, content, structured_request_id, finish_reason, usage,
                           compressed, deleted, created_at)
SELECT @chat_id::uuid, r.m->>'role', r.m->>'kind', r.m->>'visibility', r.m->'content',
       (r.m->>'structured_request_id')::uuid, r.m->>'finish_reason', r.m->'usage',
       coalesce((r.m->>'compressed')::boolean, false), coalesce((r.m->>'deleted')::boolean, false),
       coalesce((r.m->>'created_at')::timestamptz, now())
FROM jsonb_array_elements(@rows::jsonb) WITH ORDINALITY AS r(m, n)
ORDER BY r.n
RETURNING id;
