-- Tombstones of deleted chats (sql/schema/00020_deletion.sql).

-- name: TombstonesInsert :exec
-- The tombstones of chats a transaction is about to delete (all of them,
-- descendants included, their requests finished), in one statement, with
-- @reason; the transaction then says it wrote them (chatd.tombstones), so
-- that the delete trigger writes none row by row.
WITH said AS (
    SELECT set_config('chatd.tombstones', 'written', true) AS flag
), written AS (
    INSERT INTO chat_tombstones (chat_id, owner_id, parent_chat_id, reason)
    SELECT c.id, c.owner_id, c.parent_chat_id, @reason FROM chats c, said
    WHERE c.id = ANY (@chat_ids::uuid[]) AND said.flag IS NOT NULL
)
INSERT INTO request_tombstones (request_id, chat_id, status, error_code, error_message, usage, trace_parent, created_at, finished_at)
SELECT r.request_id, r.chat_id, r.status, r.error_code, r.error_message, m.content #> '{1,outcome,usage}',
       r.trace_parent, r.created_at, r.finished_at
FROM structured_requests r
LEFT JOIN chat_messages m ON m.id = r.receipt_message_id
WHERE r.chat_id = ANY (@chat_ids::uuid[]);

-- name: ChatTombstoneGetForOwner :one
SELECT * FROM chat_tombstones WHERE chat_id = @chat_id AND owner_id = @owner_id;

-- name: RequestTombstoneGet :one
-- A deleted chat's request: its outcome and its chat's tombstone.
SELECT r.request_id, r.chat_id, r.status, r.error_code, r.error_message, r.usage, r.trace_parent,
       r.created_at, r.finished_at, c.owner_id, c.reason, c.deleted_at
FROM request_tombstones r
JOIN chat_tombstones c ON c.chat_id = r.chat_id
WHERE r.request_id = @request_id;

-- name: TombstonesSweep :execrows
-- Drops tombstones older than @ttl_seconds, a bounded batch at a time,
-- keeping those a webhook delivery still pending needs. Their request
-- tombstones and webhook deliveries go with them.
DELETE FROM chat_tombstones WHERE chat_id IN (
    SELECT t.chat_id FROM chat_tombstones t
    WHERE t.deleted_at < now() - make_interval(secs => @ttl_seconds::float8)
      AND NOT EXISTS (SELECT 1 FROM request_tombstones r JOIN webhook_deliveries d ON d.request_id = r.request_id
                      WHERE r.chat_id = t.chat_id AND d.state = 'pending')
    ORDER BY t.deleted_at
    LIMIT @max_rows
);

-- name: SweepTryLock :one
-- One replica sweeps at a time: the retention and tombstone sweeps take
-- this lock for their transaction, and a replica that does not get it
-- skips its round. 18 is sql.LockSweep (sql/locks.go).
SELECT pg_try_advisory_xact_lock(18)::boolean AS locked;
