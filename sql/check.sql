-- chatd invariant checks (run by `chatd check`; see docs/check.md).
--
-- Each check is one query, introduced by a `-- name:` line and the comment
-- lines that explain it. It returns the rows that break its invariant, with
-- the same five columns everywhere:
--
--   check_name  the check's name
--   chat_id     the chat concerned
--   request_id  the structured request concerned, if any
--   message_id  the chat_messages row concerned, if any
--   detail      a short reason
--
-- No rows means the invariant holds. The queries only read. `chatd check`
-- runs them all in one REPEATABLE READ, read-only transaction, so they see
-- one consistent snapshot of a live database; an operator can also paste
-- any single query into psql.
--
-- "Input message" below means a request's user message in history: kind
-- 'message', role 'user', not model-only, not deleted.

-- name: finished_request_receipt
-- A finished request (succeeded, failed, cancelled) has exactly one receipt
-- row, and receipt_message_id points at it.
SELECT 'finished_request_receipt' AS check_name, r.chat_id, r.request_id,
       r.receipt_message_id AS message_id,
       CASE WHEN n.receipts = 0 THEN format('%s request has no receipt', r.status)
            WHEN n.receipts > 1 THEN format('%s request has %s receipts', r.status, n.receipts)
            ELSE format('receipt_message_id is %s, but the receipt is message %s',
                        coalesce(r.receipt_message_id::text, 'NULL'), n.receipt_id)
       END AS detail
FROM structured_requests r
CROSS JOIN LATERAL (
    SELECT count(*) AS receipts, min(m.id) AS receipt_id
    FROM chat_messages m
    WHERE m.structured_request_id = r.request_id AND m.kind = 'receipt'
) n
WHERE r.status <> 'pending'
  AND (n.receipts <> 1 OR r.receipt_message_id IS DISTINCT FROM n.receipt_id);

-- name: receipt_without_finished_request
-- Every receipt closes a finished request of its own chat, which points back
-- at it. Receipts are never deleted and have the receipt shape (assistant,
-- visibility user).
SELECT 'receipt_without_finished_request' AS check_name, m.chat_id,
       m.structured_request_id AS request_id, m.id AS message_id,
       CASE WHEN m.structured_request_id IS NULL THEN 'receipt names no structured request'
            WHEN r.request_id IS NULL THEN 'receipt names a structured request that does not exist'
            WHEN r.chat_id <> m.chat_id THEN format('receipt is in another chat than its request (%s)', r.chat_id)
            WHEN r.status = 'pending' THEN 'receipt for a request that is still pending'
            WHEN r.receipt_message_id IS DISTINCT FROM m.id THEN
                format('the request points at message %s instead', coalesce(r.receipt_message_id::text, 'NULL'))
            WHEN m.deleted THEN 'receipt is marked deleted'
            ELSE format('receipt has role %s and visibility %s', m.role, m.visibility)
       END AS detail
FROM chat_messages m
LEFT JOIN structured_requests r ON r.request_id = m.structured_request_id
WHERE m.kind = 'receipt'
  AND (r.request_id IS NULL OR r.chat_id <> m.chat_id OR r.status = 'pending'
       OR r.receipt_message_id IS DISTINCT FROM m.id OR m.deleted
       OR m.role <> 'assistant' OR m.visibility <> 'user');

-- name: stranded_request
-- A pending request can still finish only while a turn will take it up: its
-- input message is in history as the latest user message and its chat is not
-- idle (waiting or error), or it is queued. Otherwise it would stay pending
-- forever: no worker looks at an idle chat, an edit or a queue deletion that
-- removed its input must have cancelled it, and a later user message means a
-- later turn governs the chat.
WITH pending AS (
    SELECT r.request_id, r.chat_id, c.status AS chat_status,
           (SELECT max(m.id) FROM chat_messages m
             WHERE m.structured_request_id = r.request_id AND m.kind = 'message' AND m.role = 'user'
               AND m.visibility <> 'model' AND NOT m.deleted) AS input_id,
           EXISTS (SELECT 1 FROM chat_queued_messages q WHERE q.structured_request_id = r.request_id) AS queued
    FROM structured_requests r
    JOIN chats c ON c.id = r.chat_id
    WHERE r.status = 'pending'
), judged AS (
    SELECT p.*,
           CASE WHEN p.input_id IS NULL AND NOT p.queued THEN
                    'pending request is neither in history nor queued'
                WHEN p.input_id IS NOT NULL AND p.queued THEN
                    'pending request is both in history and queued'
                WHEN p.input_id IS NOT NULL AND p.chat_status IN ('waiting', 'error') THEN
                    format('pending request is in history while its chat is %s', p.chat_status)
                WHEN p.input_id IS NOT NULL AND EXISTS (
                    SELECT 1 FROM chat_messages later
                     WHERE later.chat_id = p.chat_id AND later.id > p.input_id AND later.kind = 'message'
                       AND later.role = 'user' AND later.visibility <> 'model' AND NOT later.deleted) THEN
                    'a later user message in history supersedes the pending request'
           END AS detail
    FROM pending p
)
SELECT 'stranded_request' AS check_name, chat_id, request_id, input_id AS message_id, detail
FROM judged
WHERE detail IS NOT NULL;

-- name: queued_in_idle_chat
-- Queued messages are promoted when the running turn ends; an idle chat
-- (waiting or error) with a queue would never promote them.
SELECT 'queued_in_idle_chat' AS check_name, q.chat_id, q.structured_request_id AS request_id,
       NULL::bigint AS message_id,
       format('queued message %s waits in a chat that is %s', q.id, c.status) AS detail
FROM chat_queued_messages q
JOIN chats c ON c.id = q.chat_id
WHERE c.status IN ('waiting', 'error');

-- name: two_pending_in_history
-- At most one pending request per chat has its input message in history:
-- the one governing the current turn.
SELECT 'two_pending_in_history' AS check_name, x.chat_id, x.request_id, x.message_id,
       format('%s pending requests have their input in this chat''s history', x.n) AS detail
FROM (
    SELECT m.chat_id, r.request_id, m.id AS message_id,
           count(*) OVER (PARTITION BY m.chat_id) AS n
    FROM chat_messages m
    JOIN structured_requests r ON r.request_id = m.structured_request_id
    WHERE r.status = 'pending' AND m.kind = 'message' AND m.role = 'user'
      AND m.visibility <> 'model' AND NOT m.deleted
) x
WHERE x.n > 1;

-- name: candidate_on_finished_request
-- A candidate is a pending request's current validated value; finishing the
-- request clears it.
SELECT 'candidate_on_finished_request' AS check_name, r.chat_id, r.request_id,
       r.receipt_message_id AS message_id,
       format('%s request still holds a candidate (tool call %s)', r.status,
              coalesce(r.candidate_tool_call_id, 'NULL')) AS detail
FROM structured_requests r
WHERE r.status <> 'pending' AND (r.candidate IS NOT NULL OR r.candidate_tool_call_id IS NOT NULL);

-- name: request_in_other_chat
-- A message or queued message names a structured request of its own chat.
SELECT 'request_in_other_chat' AS check_name, m.chat_id, m.structured_request_id AS request_id,
       m.id AS message_id, format('%s row names a request of chat %s', m.kind, r.chat_id) AS detail
FROM chat_messages m
JOIN structured_requests r ON r.request_id = m.structured_request_id
WHERE r.chat_id <> m.chat_id
UNION ALL
SELECT 'request_in_other_chat', q.chat_id, q.structured_request_id, NULL,
       format('queued message %s names a request of chat %s', q.id, r.chat_id)
FROM chat_queued_messages q
JOIN structured_requests r ON r.request_id = q.structured_request_id
WHERE r.chat_id <> q.chat_id;

-- name: counters_out_of_order
-- Versions and counters move in step:
--   * history_version <= snapshot_version, generation_attempt >= 0;
--   * a message's revision (the snapshot of its last change) is at most its
--     chat's snapshot_version;
--   * every change of a model-relevant row (anything but a receipt) moved the
--     chat's history_version to that snapshot, so such a row's revision is at
--     most history_version (otherwise a running turn's fence missed it);
--   * a request's receipt is its last row: no row of the request has a
--     larger id, and the request was not finished before it was created;
--   * ledger counters: validation_rejections <= rejections <= 3, steps >= 0;
--     receipt_message_id and finished_at are set exactly when finished.
SELECT 'counters_out_of_order' AS check_name, v.chat_id, v.request_id, v.message_id, v.detail
FROM (
    SELECT c.id AS chat_id, NULL::uuid AS request_id, NULL::bigint AS message_id,
           format('history_version %s is above snapshot_version %s', c.history_version, c.snapshot_version) AS detail
    FROM chats c WHERE c.history_version > c.snapshot_version
    UNION ALL
    SELECT c.id, NULL, NULL, format('generation_attempt is %s', c.generation_attempt)
    FROM chats c WHERE c.generation_attempt < 0
    UNION ALL
    SELECT m.chat_id, m.structured_request_id, m.id,
           format('revision %s is above the chat''s snapshot_version %s', m.revision, c.snapshot_version)
    FROM chat_messages m JOIN chats c ON c.id = m.chat_id
    WHERE m.revision > c.snapshot_version
    UNION ALL
    SELECT m.chat_id, m.structured_request_id, m.id,
           format('%s row has revision %s, above the chat''s history_version %s', m.kind, m.revision, c.history_version)
    FROM chat_messages m JOIN chats c ON c.id = m.chat_id
    WHERE m.kind <> 'receipt' AND m.revision > c.history_version
    UNION ALL
    SELECT m.chat_id, m.structured_request_id, m.id,
           format('%s row of the request comes after its receipt %s', m.kind, rc.id)
    FROM chat_messages rc
    JOIN chat_messages m ON m.structured_request_id = rc.structured_request_id AND m.id > rc.id
    WHERE rc.kind = 'receipt'
    UNION ALL
    SELECT r.chat_id, r.request_id, r.receipt_message_id,
           format('finished at %s, before it was created at %s', r.finished_at, r.created_at)
    FROM structured_requests r WHERE r.finished_at < r.created_at
    UNION ALL
    SELECT r.chat_id, r.request_id, r.receipt_message_id,
           format('rejections %s, validation_rejections %s, steps %s', r.rejections, r.validation_rejections, r.steps)
    FROM structured_requests r
    WHERE r.validation_rejections > r.rejections OR r.rejections > 3 OR r.validation_rejections < 0 OR r.steps < 0
    UNION ALL
    SELECT r.chat_id, r.request_id, r.receipt_message_id,
           format('%s request has receipt_message_id %s and finished_at %s', r.status,
                  coalesce(r.receipt_message_id::text, 'NULL'), coalesce(r.finished_at::text, 'NULL'))
    FROM structured_requests r
    WHERE (r.status = 'pending') <> (r.receipt_message_id IS NULL)
       OR (r.status = 'pending') <> (r.finished_at IS NULL)
) v;

-- name: stuck_chat
-- A turn in progress keeps moving within known bounds: the worker running a
-- chat (running or interrupting) renews its lease, any server's
-- maintenance loop answers client tool calls left unanswered past the
-- chat's tool-result deadline (--tool-result-timeout), and a spawned child
-- chat (spawn_agent) answers the call that spawned it when its turn ends. A
-- chat more than 5 minutes past those bounds is stuck: its owner's lease
-- expired and no server took the chat over, or its tool-result deadline
-- passed and no server answered the calls (no server is running, or none
-- can claim). A chat waiting for client tool results with no deadline, with
-- no call of its last assistant step left unanswered, or waiting on a
-- spawn_agent call that no awaited child chat will answer (the child does
-- not exist or already ended), is stuck at once: nothing would ever resume
-- it. A runnable chat without an owner is not reported: it waits for a free
-- worker (a backlog is not a fault). The request is the pending structured
-- request of the turn, if any.
WITH waiting AS (
    SELECT c.id, c.requires_action_deadline, c.spawn_agents,
           (SELECT max(m.id) FROM chat_messages m
             WHERE m.chat_id = c.id AND m.kind = 'message' AND m.role = 'assistant'
               AND m.visibility IN ('model', 'both') AND NOT m.deleted AND NOT m.compressed) AS step_id
    FROM chats c
    WHERE c.status = 'requires_action'
), open_calls AS (
    SELECT w.id, call->>'tool_name' AS tool_name,
           EXISTS (SELECT 1 FROM chats k
                    WHERE k.parent_chat_id = w.id AND k.spawn_message_id = a.id
                      AND k.spawn_tool_call_id = call->>'tool_call_id' AND k.spawn_state = 'awaited') AS awaited
    FROM waiting w
    JOIN chat_messages a ON a.id = w.step_id
    CROSS JOIN LATERAL jsonb_array_elements(a.content) call
    WHERE call->>'type' = 'tool-call'
      AND coalesce(call->>'provider_executed', 'false') <> 'true'
      AND NOT EXISTS (
          SELECT 1 FROM chat_messages r CROSS JOIN LATERAL jsonb_array_elements(r.content) res
          WHERE r.chat_id = a.chat_id AND r.id >= a.id AND r.kind = 'message'
            AND r.visibility IN ('model', 'both') AND NOT r.deleted AND NOT r.compressed
            AND res->>'type' = 'tool-result' AND res->>'tool_call_id' = call->>'tool_call_id')
), unanswered AS (
    SELECT w.*,
           (SELECT count(*) FROM open_calls o WHERE o.id = w.id AND NOT o.awaited
              AND NOT (w.spawn_agents AND o.tool_name = 'spawn_agent')) AS calls,
           (SELECT count(*) FROM open_calls o WHERE o.id = w.id AND o.awaited) AS children,
           (SELECT count(*) FROM open_calls o WHERE o.id = w.id AND NOT o.awaited
              AND w.spawn_agents AND o.tool_name = 'spawn_agent') AS orphans
    FROM waiting w
)
SELECT 'stuck_chat' AS check_name, u.id AS chat_id,
       (SELECT m.structured_request_id FROM chat_messages m
         JOIN structured_requests r ON r.request_id = m.structured_request_id
         WHERE m.chat_id = u.id AND m.kind = 'message' AND m.role = 'user' AND NOT m.deleted AND r.status = 'pending'
         ORDER BY m.id DESC LIMIT 1) AS request_id,
       u.step_id AS message_id,
       CASE WHEN u.orphans > 0 THEN format('chat waits on %s spawn_agent calls that no child chat will answer '
                                           '(the child does not exist or already ended)', u.orphans)
            WHEN u.calls = 0 AND u.children = 0 THEN 'chat waits for client tool results, but no tool call of its last assistant step is unanswered'
            WHEN u.requires_action_deadline IS NULL THEN 'chat waits for client tool results without a deadline'
            ELSE format('chat has %s unanswered client tool calls %s past their deadline (%s), and no server answered them',
                        u.calls, date_trunc('second', now() - u.requires_action_deadline), u.requires_action_deadline)
       END AS detail
FROM unanswered u
WHERE u.orphans > 0
   OR (u.calls = 0 AND u.children = 0)
   OR (u.calls > 0 AND (u.requires_action_deadline IS NULL
                        OR u.requires_action_deadline < now() - interval '5 minutes'))
UNION ALL
SELECT 'stuck_chat', c.id,
       (SELECT m.structured_request_id FROM chat_messages m
         JOIN structured_requests r ON r.request_id = m.structured_request_id
         WHERE m.chat_id = c.id AND m.kind = 'message' AND m.role = 'user' AND NOT m.deleted AND r.status = 'pending'
         ORDER BY m.id DESC LIMIT 1),
       NULL,
       format('chat is %s, but the lease of its worker %s expired %s ago (at %s) and no server took it over',
              c.status, c.worker_id, date_trunc('second', now() - c.lease_expires_at), c.lease_expires_at)
FROM chats c
WHERE c.status IN ('running', 'interrupting') AND c.lease_expires_at < now() - interval '5 minutes';

-- name: webhook_outbox
-- Receipt webhooks (docs/operations.md#webhooks): a request that finished
-- once a subscription was in force (webhook_subscriptions.since), with the
-- subscription's event, has its delivery row, written in the transaction of
-- the receipt; a delivery row is for a finished request and carries its
-- event. Receipts finished before the subscription owe it nothing.
SELECT 'webhook_outbox' AS check_name, r.chat_id, r.request_id, r.receipt_message_id AS message_id,
       format('%s request has no delivery for webhook %s (subscribed to %s since %s)', r.status, s.endpoint, s.event, s.since) AS detail
FROM webhook_subscriptions s
JOIN structured_requests r ON r.status <> 'pending' AND s.event = 'structured_output.' || r.status AND r.finished_at >= s.since
WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.request_id = r.request_id AND d.endpoint = s.endpoint)
UNION ALL
SELECT 'webhook_outbox' AS check_name, r.chat_id, d.request_id, r.receipt_message_id AS message_id,
       CASE WHEN r.status = 'pending' THEN format('delivery for webhook %s of a request still pending', d.endpoint)
            ELSE format('delivery for webhook %s carries %s, but the request %s', d.endpoint, d.event, r.status)
       END AS detail
FROM webhook_deliveries d
JOIN structured_requests r ON r.request_id = d.request_id
WHERE r.status = 'pending' OR d.event <> 'structured_output.' || r.status;
-- name: spawned_child_undelivered
-- A spawned child chat that its parent awaits (spawn_state 'awaited') is
-- in its first turn: the transaction that ends that turn writes the
-- child's result into the parent ('delivered'), and a parent whose turn
-- ends first detaches it ('detached'). An awaited child that is idle or
-- failed ended without its result reaching the parent; an awaited child
-- whose parent is idle or failed was never detached. The message is the
-- parent's step that spawned it.
SELECT 'spawned_child_undelivered' AS check_name, k.id AS chat_id,
       (SELECT r.request_id FROM structured_requests r WHERE r.chat_id = k.id ORDER BY r.created_at DESC LIMIT 1) AS request_id,
       k.spawn_message_id AS message_id,
       CASE WHEN k.status IN ('waiting', 'error')
            THEN format('child is %s, but its result never reached parent %s (call %s)', k.status, k.parent_chat_id, k.spawn_tool_call_id)
            ELSE format('parent %s is %s, but still awaits this child (call %s)', p.id, p.status, k.spawn_tool_call_id)
       END AS detail
FROM chats k
JOIN chats p ON p.id = k.parent_chat_id
WHERE k.spawn_state = 'awaited'
  AND (k.status IN ('waiting', 'error') OR p.status IN ('waiting', 'error'));

-- name: deleted_chat_remains
-- A deleted chat leaves only its tombstones (chat_tombstones,
-- request_tombstones): no chat row under its id, and no structured request
-- that is both tombstoned and still in the ledger. A request tombstone
-- belongs to a chat tombstone (its foreign key).
SELECT 'deleted_chat_remains' AS check_name, t.chat_id, NULL::uuid AS request_id, NULL::bigint AS message_id,
       format('chat was %s at %s, but its row is still there', t.reason, t.deleted_at) AS detail
FROM chat_tombstones t
JOIN chats c ON c.id = t.chat_id
UNION ALL
SELECT 'deleted_chat_remains', r.chat_id, r.request_id, r.receipt_message_id,
       format('request has a tombstone (chat %s) but is still in the ledger', t.chat_id)
FROM request_tombstones t
JOIN structured_requests r ON r.request_id = t.request_id;

-- name: webhook_delivery_orphan
-- A webhook delivery is owed for a finished request: one in the ledger, or,
-- once its chat was deleted, one with a tombstone, whose outcome is the
-- delivery's event. A delivery for neither would be claimed and never
-- rendered.
SELECT 'webhook_delivery_orphan' AS check_name, t.chat_id, d.request_id, NULL::bigint AS message_id,
       CASE WHEN t.request_id IS NULL THEN format('delivery for webhook %s names no request, live or deleted', d.endpoint)
            ELSE format('delivery for webhook %s carries %s, but the deleted request was %s', d.endpoint, d.event, t.status)
       END AS detail
FROM webhook_deliveries d
LEFT JOIN request_tombstones t ON t.request_id = d.request_id
WHERE NOT EXISTS (SELECT 1 FROM structured_requests r WHERE r.request_id = d.request_id)
  AND (t.request_id IS NULL OR d.event <> 'structured_output.' || t.status);
