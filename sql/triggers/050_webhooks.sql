-- The receipt webhooks' outbox (docs/operations.md#webhooks).
--
-- When a structured request finishes (its receipt is written in the same
-- transaction, 030_requests.sql), one webhook_deliveries row is inserted per
-- subscription in force for the event: in the receipt's own transaction, so a
-- receipt is never committed without its deliveries nor a delivery without
-- its receipt. The process that commits the finish wakes its delivery
-- workers after the commit (store.Tell); every replica has the same
-- webhooks, and the others poll.
--
-- The subscriptions are read FOR SHARE: a server installing a subscription
-- (store.SyncWebhooks) takes the table in EXCLUSIVE mode before stamping
-- since, so a receipt either commits before since or sees the subscription.
--
-- A receipt restored by an import keeps its finish time (030_requests.sql):
-- it is owed only to subscriptions in force when it finished.
CREATE OR REPLACE FUNCTION chatd_webhook_outbox() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_deliveries (request_id, endpoint, event)
    SELECT NEW.request_id, s.endpoint, s.event
    FROM (SELECT w.endpoint, w.event, w.since FROM webhook_subscriptions w
          WHERE w.event = 'structured_output.' || NEW.status FOR SHARE) s
    WHERE s.since IS NOT NULL
      AND (current_setting('chatd.importing', true) IS DISTINCT FROM 'on' OR s.since <= NEW.finished_at)
    ON CONFLICT ON CONSTRAINT webhook_deliveries_pkey DO NOTHING;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER chatd_webhook_outbox
    AFTER UPDATE OF status ON structured_requests
    FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status <> 'pending')
    EXECUTE FUNCTION chatd_webhook_outbox();
