-- name: ChatInsert :one
-- With a worker_id, the chat is born claimed by a worker of the admitting
-- process (local hand-off: no chatd_work notification, no claim).
-- The id is the caller's, so that the admission's statements can be sent
-- together (store.CreateChat).
INSERT INTO chats (id, owner_id, parent_chat_id, title, model, system_prompt, mode, dynamic_tools, mcp_servers, spawn_agents, status,
                   worker_id, lease_expires_at)
VALUES (@id, @owner_id, sqlc.narg(parent_chat_id), @title, @model, @system_prompt, @mode, @dynamic_tools, @mcp_servers::text[], @spawn_agents, @status,
        sqlc.narg(worker_id),
        CASE WHEN sqlc.narg(worker_id)::uuid IS NOT NULL THEN now() + make_interval(secs => @lease_seconds::float8) END)
RETURNING *;

-- name: ChatInsertSpawn :one
-- A child chat spawned by the parent's tool call: same owner, the parent's
-- MCP servers and spawn opt-in, one level deeper, awaited by the parent.
INSERT INTO chats (owner_id, parent_chat_id, title, model, mode, mcp_servers, spawn_agents, spawn_depth,
                   spawn_message_id, spawn_tool_call_id, spawn_state, status)
SELECT p.owner_id, p.id, @title, @model, 'child', p.mcp_servers, p.spawn_agents, p.spawn_depth + 1,
       @spawn_message_id, @spawn_tool_call_id, 'awaited', 'running'
FROM chats p WHERE p.id = @parent_id
RETURNING *;

-- name: ChatLockByID :one
-- A spawned child's ending commit locks its parent first: every transaction
-- that touches a parent and its children locks the parent before them, so
-- they cannot deadlock.
SELECT * FROM chats WHERE id = @id FOR UPDATE;

-- name: ChatSetSpawnDelivered :one
UPDATE chats SET spawn_state = 'delivered' WHERE id = @id AND spawn_state = 'awaited'
RETURNING *;

-- name: ChatDetachChildren :many
-- The parent's turn ended before these children did (interrupt, edit): it
-- no longer awaits them, and each is interrupted (a running one by its
-- worker, which keeps it; one waiting for its own children is claimed).
UPDATE chats
SET spawn_state = 'detached',
    status = CASE WHEN status IN ('running', 'requires_action') THEN 'interrupting' ELSE status END,
    requires_action_deadline = NULL
WHERE parent_chat_id = @parent_id AND spawn_state = 'awaited'
RETURNING id;

-- name: ChatListAwaitedCalls :many
-- The tool calls of a parent that wait for a spawned child.
SELECT spawn_tool_call_id::text AS tool_call_id FROM chats
WHERE parent_chat_id = @parent_id AND spawn_state = 'awaited';

-- name: ChatSpawnCounts :one
-- The children a chat spawned, in all and since a message (its turn), and
-- the states of those spawned by one step's calls.
SELECT count(*)::integer AS total,
       (count(*) FILTER (WHERE spawn_message_id > @since_message_id))::integer AS this_turn,
       coalesce(jsonb_object_agg(spawn_tool_call_id, spawn_state) FILTER (WHERE spawn_message_id = @step_message_id), '{}')::jsonb AS step_calls
FROM chats
WHERE parent_chat_id = @parent_id AND spawn_tool_call_id IS NOT NULL;

-- name: ChatGetForOwner :one
SELECT * FROM chats WHERE id = @id AND owner_id = @owner_id;

-- name: ChatGet :one
SELECT * FROM chats WHERE id = @id;

-- name: ChatListForOwner :many
-- Newest activity first; keyset pagination on (updated_at, id).
SELECT * FROM chats
WHERE owner_id = @owner_id
  AND (sqlc.narg(parent_chat_id)::uuid IS NULL OR parent_chat_id = sqlc.narg(parent_chat_id)::uuid)
  AND (sqlc.narg(before_updated_at)::timestamptz IS NULL
       OR (updated_at, id) < (sqlc.narg(before_updated_at)::timestamptz, sqlc.narg(before_id)::uuid))
ORDER BY updated_at DESC, id DESC
LIMIT @max_rows;

-- name: ChatLockForOwner :one
-- Takes the chat's row lock for an API transition. Writes that follow bump
-- snapshot_version once (trigger), so this lock does not bump it itself.
SELECT * FROM chats WHERE id = @id AND owner_id = @owner_id FOR UPDATE;

-- name: ChatLock :one
-- Takes the chat's row lock, whatever its state: a worker commit's first
-- statement, before its fence (ChatLockIfOwned). The writes sent with the
-- fence run before the fence's answer is judged (store.lazyTx) and must
-- find the chat locked first, as every commit takes it, even when the fence
-- missed and they are to be rolled back.
SELECT id FROM chats WHERE id = @id FOR UPDATE;

-- name: ChatLockIfOwned :one
-- Takes the chat's row lock for a worker commit, checking the fence inside the
-- statement: the worker still owns the chat, history has not moved, the status
-- is one the commit expects and, for commits that end a generation, the
-- attempt is the one that generated. No row: the fence failed (an expected exit).
-- The commit is the owner's own: what it writes is not announced to the
-- owner (chatd_note_claim), only to the chat's followers.
SELECT * FROM chats
WHERE id = @id
  AND worker_id = @worker_id
  AND history_version = @history_version
  AND status = ANY (@statuses::text[])
  AND (sqlc.narg(generation_attempt)::integer IS NULL OR generation_attempt = sqlc.narg(generation_attempt)::integer)
  AND chatd_note_claim(@id) IS NULL
FOR UPDATE;

-- name: ChatClaimLock :exec
-- Taken first by a claim of a named chat (ChatClaimByID), until the end of
-- its transaction. A wake-up reaches a worker of every replica, and all of
-- them claim the chat: the others wait here for the first one's claim to
-- commit and then find the chat taken without touching its row (an UPDATE
-- that waits for a row lock is assigned a transaction id first: a writing
-- rollback). An advisory lock needs no transaction id. Class 16 is
-- sql.LockClassClaim (sql/locks.go).
SELECT pg_advisory_xact_lock(16, hashtext(sqlc.arg(id)::uuid::text));

-- name: ChatClaimByID :one
-- Claims the chat a wake-up named, if it is runnable and has no live owner
-- and, with owner_below (0: no bound), its owner has fewer chats running
-- (a slot of the headroom: none; a per-user cap).
-- It waits for a transaction holding the row (they are short: a stream's
-- read, a commit), so a busy row is not mistaken for a taken one; other
-- claims of the chat were serialized by ChatClaimLock. With count_attempt,
-- a running chat's next provider attempt is counted here, before it is made
-- (see ChatRecordAttemptIfOwned).
UPDATE chats
SET worker_id = @worker_id, lease_expires_at = now() + make_interval(secs => @lease_seconds::float8),
    generation_attempt = CASE WHEN @count_attempt::boolean AND status = 'running' THEN generation_attempt + 1 ELSE generation_attempt END
WHERE chats.id = @id AND chats.status IN ('running', 'interrupting')
  AND (chats.worker_id IS NULL OR chats.lease_expires_at < now())
  AND (@owner_below::int = 0 OR (
    SELECT count(*) FROM chats o
    WHERE o.owner_id = chats.owner_id AND o.status IN ('running', 'interrupting')
      AND o.worker_id IS NOT NULL AND o.lease_expires_at >= now()
  ) < @owner_below::int)
RETURNING *;

-- name: ChatClaimNext :one
-- Claims a runnable chat without a live owner, fairly: the chats of the
-- owner with the fewest chats running come first, then the one that waited
-- longest; with owner_below (0: no bound), only chats whose owner has fewer
-- running. SKIP LOCKED lets claims run concurrently; ChatRunnableExists
-- tells a skipped row from none.
WITH running AS (
    SELECT o.owner_id, count(*) AS n FROM chats o
    WHERE o.status IN ('running', 'interrupting') AND o.worker_id IS NOT NULL AND o.lease_expires_at >= now()
    GROUP BY o.owner_id
)
UPDATE chats
SET worker_id = @worker_id, lease_expires_at = now() + make_interval(secs => @lease_seconds::float8),
    generation_attempt = CASE WHEN @count_attempt::boolean AND status = 'running' THEN generation_attempt + 1 ELSE generation_attempt END
WHERE id = (
    SELECT c.id FROM chats c LEFT JOIN running r ON r.owner_id = c.owner_id
    WHERE c.status IN ('running', 'interrupting')
      AND (c.worker_id IS NULL OR c.lease_expires_at < now())
      AND (@owner_below::int = 0 OR coalesce(r.n, 0) < @owner_below::int)
    ORDER BY coalesce(r.n, 0), c.updated_at
    LIMIT 1
    FOR UPDATE OF c SKIP LOCKED
)
RETURNING *;

-- name: ChatRunnableExists :one
-- Whether a runnable chat without a live owner exists (locked or not).
SELECT EXISTS (
    SELECT 1 FROM chats
    WHERE status IN ('running', 'interrupting') AND (worker_id IS NULL OR lease_expires_at < now())
)::boolean;

-- name: ChatAnotherOwnerWaits :one
-- Whether a runnable chat without a live owner waits whose owner has fewer
-- turns running than the owner of chat @id: the worker of @id then hands it
-- back at its step boundary and claims fairly (ChatClaimNext), so that
-- users share busy workers step by step (see docs/runtime.md).
WITH running AS (
    SELECT o.owner_id, count(*) AS n FROM chats o
    WHERE o.status IN ('running', 'interrupting') AND o.worker_id IS NOT NULL AND o.lease_expires_at >= now()
    GROUP BY o.owner_id
), mine AS (
    SELECT coalesce((SELECT r.n FROM running r JOIN chats m ON m.owner_id = r.owner_id WHERE m.id = @id), 0) AS n,
           (SELECT m.owner_id FROM chats m WHERE m.id = @id) AS owner_id
)
SELECT EXISTS (
    SELECT 1 FROM chats c CROSS JOIN mine LEFT JOIN running r ON r.owner_id = c.owner_id
    WHERE c.status IN ('running', 'interrupting') AND (c.worker_id IS NULL OR c.lease_expires_at < now())
      AND c.owner_id <> mine.owner_id
      AND coalesce(r.n, 0) < mine.n
)::boolean;

-- name: ChatRenewLeaseIfOwned :one
UPDATE chats SET lease_expires_at = now() + make_interval(secs => @lease_seconds::float8)
WHERE id = @id AND worker_id = @worker_id
RETURNING lease_expires_at;

-- name: ChatRenewLeasesIfOwned :many
-- Renews in one statement the leases of the chats a process's workers
-- hold: each (id, worker_id) pair still owned. A row another transaction
-- holds (the worker's own commit, most often) is skipped, not waited for:
-- the caller renews it alone, since waiting here, with other rows locked,
-- could deadlock with a commit that locks a parent and then its child.
WITH held AS (
    SELECT c.id FROM chats c
    JOIN ROWS FROM (unnest(@ids::uuid[]), unnest(@worker_ids::uuid[])) AS h(id, worker_id) ON c.id = h.id AND c.worker_id = h.worker_id
    FOR UPDATE OF c SKIP LOCKED
)
UPDATE chats SET lease_expires_at = now() + make_interval(secs => @lease_seconds::float8)
FROM held WHERE chats.id = held.id
RETURNING chats.id;

-- name: ChatReleaseIfOwned :execrows
-- A worker that stops (shutdown) gives the chat back so another can claim it.
UPDATE chats SET worker_id = NULL, lease_expires_at = NULL
WHERE id = @id AND worker_id = @worker_id;

-- name: ChatRecordAttemptIfOwned :one
-- Counts one provider attempt for the current history before calling it
-- (a claim, and a commit that keeps the turn going, count one themselves).
UPDATE chats SET generation_attempt = generation_attempt + 1
WHERE id = @id AND worker_id = @worker_id AND history_version = @history_version AND status = 'running'
RETURNING generation_attempt, snapshot_version, history_version;

-- name: ChatCountAttempt :one
-- The end of a commit that keeps a turn going: the next provider attempt
-- is counted in the same transaction (the chat is locked by the commit).
UPDATE chats SET generation_attempt = generation_attempt + 1
WHERE id = @id
RETURNING *;

-- name: ChatEndTurnIfQueueEmpty :one
-- Ends a turn after a lock taken earlier in the same transaction, when the
-- queue is empty: the chat goes to @status (waiting, or error with its
-- last error) without an owner. No row: a message is queued, and the caller
-- promotes it instead. The statement's snapshot is taken after the lock, so
-- a message queued before it is seen; one queued later waits for the lock.
UPDATE chats
SET status = @status,
    worker_id = NULL,
    lease_expires_at = NULL,
    last_error = sqlc.narg(last_error),
    requires_action_deadline = NULL
WHERE chats.id = @id AND NOT EXISTS (SELECT 1 FROM chat_queued_messages q WHERE q.chat_id = @id)
RETURNING *;

-- name: ChatSetState :one
-- Sets the status after a lock taken in the same transaction. The owner is
-- kept only while the chat stays runnable and the caller asks for it.
UPDATE chats
SET status = @status,
    worker_id = CASE WHEN @keep_owner::boolean THEN worker_id END,
    lease_expires_at = CASE WHEN @keep_owner::boolean THEN lease_expires_at END,
    last_error = sqlc.narg(last_error),
    requires_action_deadline = CASE WHEN @status = 'requires_action' AND @action_timeout_seconds::float8 > 0
        THEN now() + make_interval(secs => @action_timeout_seconds::float8) END
WHERE id = @id
RETURNING *;

-- name: ChatStartTurnFor :one
-- An idle chat's new turn, claimed in the admission for a worker of the
-- admitting process (local hand-off): running, owned, its first provider
-- attempt counted (the message just inserted reset the counter). Otherwise
-- as ChatSetState to running.
UPDATE chats
SET status = 'running', worker_id = @worker_id,
    lease_expires_at = now() + make_interval(secs => @lease_seconds::float8),
    generation_attempt = generation_attempt + 1,
    last_error = NULL, requires_action_deadline = NULL
WHERE id = @id
RETURNING *;

-- name: ChatCountByStatus :many
SELECT status, count(*)::bigint AS chats FROM chats GROUP BY status;

-- name: ChatSetSettings :one
UPDATE chats SET mode = @mode, title = @title
WHERE id = @id
RETURNING *;

-- name: ChatListExpiredActions :many
-- Chats whose client tool results are overdue.
SELECT id FROM chats
WHERE status = 'requires_action' AND requires_action_deadline < now()
ORDER BY requires_action_deadline
LIMIT @max_rows;

-- name: ChatLockIfActionExpired :one
SELECT * FROM chats
WHERE id = @id AND status = 'requires_action' AND requires_action_deadline < now()
FOR UPDATE SKIP LOCKED;

-- name: ChatRequestCompaction :one
UPDATE chats SET compaction_requested_at = now()
WHERE id = @id AND owner_id = @owner_id
RETURNING *;

-- name: ChatClearCompactionRequest :exec
UPDATE chats SET compaction_requested_at = NULL WHERE id = @id;

-- name: ChatRunnableCountWithin :one
-- The end of an admission that made a chat runnable: refuses it when the
-- owner has more than max runnable chats, else counts them
-- (sql/triggers/060_limits.sql).
SELECT chatd_runnable_count_within(@owner_id::uuid, @max::int)::integer;

-- name: ChatSetProviderRetryIfOwned :execrows
-- Records the provider retry the owning worker waits out (00015); the
-- trigger clears it when the history or status moves.
UPDATE chats SET provider_retry = @provider_retry
WHERE id = @id AND worker_id = @worker_id AND history_version = @history_version AND status = 'running';

-- name: ChatLockManyForOwner :many
-- Takes the row locks of the owner's chats a delete starts from, in id
-- order (ChatLockChildren then locks their descendants, level by level:
-- parents before children, the order every transaction keeps).
SELECT * FROM chats WHERE id = ANY (@ids::uuid[]) AND owner_id = @owner_id ORDER BY id FOR UPDATE;

-- name: ChatLockChildren :many
-- Takes the row locks of the children of chats this transaction holds. A
-- chat gets a child only in a transaction that locks it (a spawn commits
-- behind its parent's fence; a child created through the API takes its
-- parent's key share lock, for its foreign key), so once the parents are
-- locked their children are all here.
SELECT * FROM chats WHERE parent_chat_id = ANY (@parent_ids::uuid[]) ORDER BY id FOR UPDATE;

-- name: ChatDeleteMany :many
-- Deletes chats locked by this transaction, their children with them (ON
-- DELETE CASCADE), after TombstonesInsert. The delete trigger
-- (sql/triggers/070_deletion.sql) refuses a chat with a pending request or
-- awaited by its parent.
DELETE FROM chats WHERE id = ANY (@ids::uuid[])
RETURNING id;

-- name: ChatContentCounts :one
-- The rows that go with chats when they are deleted, for the report.
SELECT (SELECT count(*) FROM chat_messages m WHERE m.chat_id = ANY (@ids::uuid[]))::bigint AS messages,
       (SELECT count(*) FROM chat_queued_messages q WHERE q.chat_id = ANY (@ids::uuid[]))::bigint AS queued,
       (SELECT count(*) FROM structured_requests r WHERE r.chat_id = ANY (@ids::uuid[]))::bigint AS requests;

-- name: ChatListExpiredLock :many
-- The retention sweep's batch of chats with children (ChatExpireMany takes
-- the others): chats without a parent (a child goes with its tree) whose
-- last visible change is older than @older_than_seconds,
-- idle, with no pending request, oldest first; locked, skipping rows
-- another transaction holds (they are busy: not expired). Only in the
-- transaction that got the sweep's lock (18 is sql.LockSweep, tried once):
-- one replica sweeps at a time.
WITH sweep AS (SELECT pg_try_advisory_xact_lock(18) AS locked)
SELECT c.* FROM chats c, sweep
WHERE sweep.locked
  AND c.updated_at < now() - make_interval(secs => @older_than_seconds::float8)
  AND c.parent_chat_id IS NULL
  AND EXISTS (SELECT 1 FROM chats k WHERE k.parent_chat_id = c.id)
  AND c.status IN ('waiting', 'error')
  AND NOT EXISTS (SELECT 1 FROM structured_requests r WHERE r.chat_id = c.id AND r.status = 'pending')
ORDER BY c.updated_at
LIMIT @max_rows
FOR UPDATE OF c SKIP LOCKED;

-- name: ChatExpireMany :one
-- The retention sweep's batch of chats without children, in one statement
-- (one round trip, no transaction around it): up to @max_rows chats without
-- a parent or children whose last visible change is older than
-- @older_than_seconds, idle, with no pending request, oldest first, skipping
-- rows another transaction holds (they are busy); their tombstones
-- (reason expired), then the rows. Only in the transaction that got the
-- sweep's lock (18 is sql.LockSweep): one replica sweeps at a time. Chats
-- with children go through ChatListExpiredLock.
WITH sweep AS (
    SELECT pg_try_advisory_xact_lock(18) AS locked, set_config('chatd.tombstones', 'written', true) AS flag
), expired AS (
    SELECT c.id, c.owner_id FROM chats c, sweep
    WHERE sweep.locked AND sweep.flag IS NOT NULL
      AND c.updated_at < now() - make_interval(secs => @older_than_seconds::float8)
      AND c.parent_chat_id IS NULL
      AND c.status IN ('waiting', 'error')
      AND NOT EXISTS (SELECT 1 FROM structured_requests r WHERE r.chat_id = c.id AND r.status = 'pending')
      AND NOT EXISTS (SELECT 1 FROM chats k WHERE k.parent_chat_id = c.id)
    ORDER BY c.updated_at
    LIMIT @max_rows
    FOR UPDATE OF c SKIP LOCKED
), chat_tombstones_written AS (
    INSERT INTO chat_tombstones (chat_id, owner_id, reason)
    SELECT e.id, e.owner_id, 'expired' FROM expired e
), request_tombstones_written AS (
    INSERT INTO request_tombstones (request_id, chat_id, status, error_code, error_message, usage, trace_parent, created_at, finished_at)
    SELECT r.request_id, r.chat_id, r.status, r.error_code, r.error_message, m.content #> '{1,outcome,usage}',
           r.trace_parent, r.created_at, r.finished_at
    FROM expired e
    JOIN structured_requests r ON r.chat_id = e.id
    LEFT JOIN chat_messages m ON m.id = r.receipt_message_id
), gone AS (
    DELETE FROM chats c USING expired e WHERE c.id = e.id
    RETURNING c.id
)
SELECT coalesce((SELECT array_agg(g.id) FROM gone g), '{}')::uuid[] AS ids,
       (SELECT count(*) FROM chat_messages m JOIN expired e ON m.chat_id = e.id)::bigint AS messages,
       (SELECT locked FROM sweep)::boolean AS locked;

-- name: ChatListBusy :many
-- Of chats this transaction locked, those the retention sweep must keep: not
-- idle, changed within @older_than_seconds, or with a pending request.
SELECT c.id FROM chats c
WHERE c.id = ANY (@ids::uuid[])
  AND (c.status NOT IN ('waiting', 'error')
       OR c.updated_at >= now() - make_interval(secs => @older_than_seconds::float8)
       OR EXISTS (SELECT 1 FROM structured_requests r WHERE r.chat_id = c.id AND r.status = 'pending'));

-- name: ChatOldestAge :one
-- How long ago, on the database clock, the least recently changed chat at
-- rest without a parent (a candidate of the retention sweep) last changed
-- visibly: the sweep's gauge; 0 without such chats.
SELECT coalesce(extract(epoch FROM now() - min(updated_at)), 0)::float8 AS age_seconds FROM chats
WHERE parent_chat_id IS NULL AND status IN ('waiting', 'error');

-- name: ChatListRootsForOwner :many
-- An erasure's batch: the owner's chats without a parent (children go with
-- their tree).
SELECT id FROM chats WHERE owner_id = @owner_id AND parent_chat_id IS NULL ORDER BY id LIMIT @max_rows;

-- name: ChatListRootsAfter :many
-- An export's page: the owner's chats without a parent, in id order after
-- @after_id (their descendants follow with ChatListChildren).
SELECT * FROM chats WHERE owner_id = @owner_id AND parent_chat_id IS NULL AND id > @after_id ORDER BY id LIMIT @max_rows;

-- name: ChatListChildren :many
SELECT * FROM chats WHERE parent_chat_id = ANY (@parent_ids::uuid[]) ORDER BY id;

-- name: ChatImport :one
-- An imported chat (chatd import), at rest, with its own times: the
-- statements that follow in its transaction keep updated_at (the chat
-- was bumped by this transaction already).
INSERT INTO chats (id, owner_id, parent_chat_id, title, model, system_prompt, mode, dynamic_tools, mcp_servers, spawn_agents,
                   spawn_depth, spawn_message_id, spawn_tool_call_id, spawn_state, status, last_error, created_at, updated_at)
VALUES (@id, @owner_id, sqlc.narg(parent_chat_id), @title, @model, @system_prompt, @mode, @dynamic_tools, @mcp_servers::text[],
        @spawn_agents, @spawn_depth, sqlc.narg(spawn_message_id), sqlc.narg(spawn_tool_call_id), sqlc.narg(spawn_state), @status,
        sqlc.narg(last_error), @created_at, @updated_at)
RETURNING id;

-- name: ImportBegin :exec
-- Marks the transaction as an import: finished requests keep the finish
-- time they are given (sql/triggers/030_requests.sql, 050_webhooks.sql).
SELECT set_config('chatd.importing', 'on', true);
