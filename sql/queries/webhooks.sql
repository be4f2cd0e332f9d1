-- name: WebhookSubscriptionsReplace :exec
-- Makes the subscriptions those of this server's config: drops the others,
-- adds the new ones not yet in force (since NULL). The first step of
-- store.SyncWebhooks.
WITH wanted AS (
    SELECT unnest(@endpoints::text[]) AS endpoint, unnest(@events::text[]) AS event -- zipped: equal lengths
), gone AS (
    DELETE FROM webhook_subscriptions s
    WHERE NOT EXISTS (SELECT 1 FROM wanted w WHERE w.endpoint = s.endpoint AND w.event = s.event)
)
INSERT INTO webhook_subscriptions (endpoint, event)
SELECT w.endpoint, w.event FROM wanted w
ON CONFLICT ON CONSTRAINT webhook_subscriptions_pkey DO NOTHING;

-- name: WebhookSubscriptionsLock :exec
-- Waits for the receipts being written (the outbox trigger holds the rows
-- FOR SHARE) and holds new ones back until the subscriptions are stamped.
LOCK TABLE webhook_subscriptions IN EXCLUSIVE MODE;

-- name: WebhookSubscriptionsStampIfInstalling :exec
-- Puts the new subscriptions in force, on the database clock, after the
-- lock: receipts that finished earlier are not owed to them.
UPDATE webhook_subscriptions SET since = clock_timestamp() WHERE since IS NULL;

-- name: WebhookDeliveriesClaim :many
-- Claims due deliveries of the named endpoints: the attempt is counted and
-- next_attempt_at moves a lease ahead, so no other replica takes the row
-- until this one records the outcome or dies and the lease runs out.
UPDATE webhook_deliveries d
SET attempts = d.attempts + 1, last_attempt_at = now(),
    next_attempt_at = now() + make_interval(secs => @lease_seconds::float8)
FROM (
    SELECT w.request_id, w.endpoint FROM webhook_deliveries w
    WHERE w.state = 'pending' AND w.next_attempt_at <= now() AND w.endpoint = ANY(@endpoints::text[])
    ORDER BY w.next_attempt_at
    LIMIT @max_rows
    FOR UPDATE SKIP LOCKED
) c
WHERE d.request_id = c.request_id AND d.endpoint = c.endpoint
RETURNING d.request_id, d.endpoint, d.event, d.attempts, d.created_at;

-- name: WebhookDeliveryDoneIfClaimed :execrows
-- Records a 2xx answer, if the claim (counted by attempts) is still this
-- worker's. No row: the lease ran out and another worker took the row.
UPDATE webhook_deliveries
SET state = 'delivered', delivered_at = now(), last_status = @status, last_error = NULL
WHERE request_id = @request_id AND endpoint = @endpoint AND state = 'pending' AND attempts = @attempts;

-- name: WebhookDeliveryFailedIfClaimed :many
-- Records a failed attempt: retried after the backoff, or dead once the
-- endpoint's retry bound since the receipt has passed. At most one row.
UPDATE webhook_deliveries
SET state = CASE WHEN now() >= created_at + make_interval(secs => @retry_for_seconds::float8) THEN 'dead' ELSE 'pending' END,
    next_attempt_at = now() + make_interval(secs => @backoff_seconds::float8),
    last_status = sqlc.narg(status), last_error = @error
WHERE request_id = @request_id AND endpoint = @endpoint AND state = 'pending' AND attempts = @attempts
RETURNING state;

-- name: RequestGetWithReceipt :one
-- A request and its receipt, whoever owns it (the webhook payload; a
-- finished request has no provider retry, the column is there for the
-- lookup's row type).
SELECT r.*, m.id AS receipt_id, coalesce(m.role, '')::text AS receipt_role, coalesce(m.kind, '')::text AS receipt_kind,
       m.content AS receipt_content, m.created_at AS receipt_created_at, NULL::jsonb AS provider_retry
FROM structured_requests r
LEFT JOIN chat_messages m ON m.id = r.receipt_message_id
WHERE r.request_id = @request_id;
