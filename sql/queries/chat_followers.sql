-- The follower registry (internal/notify/registry.go, table
-- chat_followers). Keys are (owner_id, chat_id); chat_id is the nil uuid
-- for a watch of all of the owner's chats.

-- name: ChatFollowerDeleteByHub :exec
-- A stopping process forgets its rows.
DELETE FROM chat_followers WHERE hub_id = @hub_id;

-- name: ChatFollowerRegister :exec
-- Registers a follower under the owner's follow lock (class 17: sql.LockClassFollow),
-- taken exclusively: it waits for the writers that checked for followers
-- (chatd_followed, which takes it shared) without seeing this one to
-- commit. One statement, so one transaction holds the lock until the row
-- is committed.
WITH follow_lock AS (SELECT pg_advisory_xact_lock(17, hashtext(sqlc.arg(owner_id)::uuid::text)))
INSERT INTO chat_followers (owner_id, chat_id, hub_id)
SELECT sqlc.arg(owner_id), sqlc.arg(chat_id), sqlc.arg(hub_id) FROM follow_lock
ON CONFLICT (owner_id, chat_id, hub_id) DO UPDATE SET seen_at = now();

-- name: ChatFollowerRefreshMany :many
-- Keeps the rows of what a process follows (parallel arrays of keys) and
-- returns those it still had: a key missing from the answer was swept.
UPDATE chat_followers f SET seen_at = now()
FROM (SELECT unnest(@owner_ids::uuid[]) AS owner_id, unnest(@chat_ids::uuid[]) AS chat_id) k -- zipped: equal lengths
WHERE f.hub_id = @hub_id AND f.owner_id = k.owner_id AND f.chat_id = k.chat_id
RETURNING f.owner_id, f.chat_id;

-- name: ChatFollowerSweep :exec
-- Drops the rows nobody refreshed for ttl_seconds.
DELETE FROM chat_followers WHERE seen_at < now() - make_interval(secs => @ttl_seconds::float8);
