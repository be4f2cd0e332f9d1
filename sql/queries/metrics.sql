-- name: MetricsDepths :one
-- The depths /metrics reports, read once per scrape. Each count is over a
-- partial index (running chats, pending requests, pending webhook deliveries) or over the queue, which
-- holds at most 20 rows per chat and is drained as turns end.
SELECT
    (SELECT count(*) FROM chat_queued_messages)::bigint AS queued_messages,
    (SELECT count(*) FROM chats
     WHERE status IN ('running', 'interrupting'))::bigint AS runnable_chats,
    (SELECT count(*) FROM chats
     WHERE status IN ('running', 'interrupting')
       AND (worker_id IS NULL OR lease_expires_at < now()))::bigint AS unclaimed_chats,
    (SELECT count(*) FROM structured_requests WHERE status = 'pending')::bigint AS pending_requests,
    (SELECT count(*) FROM webhook_deliveries WHERE state = 'pending')::bigint AS webhook_deliveries_pending;
