-- The W3C trace context (traceparent) of the API request that admitted a
-- structured request, when tracing is on: the turn that runs it later,
-- maybe on another replica, its webhook deliveries and a spawned child's
-- turns continue that trace (docs/operations.md#traces). NULL: admitted
-- with tracing off, or by an older binary. Written once, at the insert.

-- +goose Up
ALTER TABLE structured_requests ADD COLUMN trace_parent text
    CONSTRAINT structured_requests_trace_parent_form CHECK (trace_parent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');

-- +goose Down
ALTER TABLE structured_requests DROP COLUMN trace_parent;
