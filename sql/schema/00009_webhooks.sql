-- Receipt webhooks (docs/operations.md#webhooks). The endpoints themselves
-- (URL, secret) live only in the server's config file; the database knows
-- their names and the events they take, so that the receipt's own
-- transaction can write the outbox.
--
-- webhook_subscriptions: one row per configured (endpoint, event), synced
-- by every server at start-up. since is set (database clock) once the
-- subscription is in force: receipts finished from then on get a delivery
-- row (chatd check verifies it). NULL while being installed.
--
-- webhook_deliveries: the outbox, one row per (receipt, endpoint), written
-- by the trigger in sql/triggers/050_webhooks.sql in the transaction that
-- finishes the request. Per endpoint rather than per receipt so that each
-- endpoint's state (attempts, backoff, dead) is a plain row an operator can
-- read and replay, and replicas claim endpoint deliveries independently.
-- A pending row is claimed by moving next_attempt_at past now() (the lease).

-- +goose Up
CREATE TABLE webhook_subscriptions (
    endpoint text NOT NULL,
    event    text NOT NULL,
    since    timestamptz,
    CONSTRAINT webhook_subscriptions_pkey PRIMARY KEY (endpoint, event),
    CONSTRAINT webhook_subscriptions_event_known CHECK (
        event IN ('structured_output.succeeded', 'structured_output.failed', 'structured_output.cancelled'))
);

CREATE TABLE webhook_deliveries (
    request_id      uuid NOT NULL,
    endpoint        text NOT NULL,
    event           text NOT NULL,
    state           text NOT NULL DEFAULT 'pending',
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_attempt_at timestamptz,
    last_status     integer,
    last_error      text,
    delivered_at    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (request_id, endpoint),
    CONSTRAINT webhook_deliveries_request_fk FOREIGN KEY (request_id)
        REFERENCES structured_requests (request_id) ON DELETE CASCADE,
    CONSTRAINT webhook_deliveries_state_known CHECK (state IN ('pending', 'delivered', 'dead')),
    CONSTRAINT webhook_deliveries_delivered_at CHECK ((state = 'delivered') = (delivered_at IS NOT NULL)),
    CONSTRAINT webhook_deliveries_attempts_not_negative CHECK (attempts >= 0)
);

-- The workers' claim and the pending gauge read only pending rows.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';

-- +goose Down
-- The outbox trigger (sql/triggers/050_webhooks.sql) writes these tables:
-- it goes with them, or every finishing request would fail.
DROP TRIGGER IF EXISTS chatd_webhook_outbox ON structured_requests;
DROP FUNCTION IF EXISTS chatd_webhook_outbox();
DROP TABLE webhook_deliveries;
DROP TABLE webhook_subscriptions;
