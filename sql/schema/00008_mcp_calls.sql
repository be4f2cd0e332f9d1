-- The journal of MCP tool calls: a row is written, behind the worker's
-- fence, before a call is sent to its server, and attempts counts the sends.
-- The call itself is the tool-call part of its committed assistant step;
-- the result is the tool row that answers it. A call that finds its row
-- already there was sent by a worker that died or stopped before the result
-- was committed: the runner makes it again only for a server configured
-- idempotent, and otherwise answers it with an error result (docs/tools.md).

-- +goose Up
CREATE TABLE mcp_calls (
    message_id   bigint NOT NULL,
    tool_call_id text NOT NULL,
    server       text NOT NULL,
    tool         text NOT NULL,
    attempts     integer NOT NULL DEFAULT 1,
    started_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT mcp_calls_pkey PRIMARY KEY (message_id, tool_call_id),
    CONSTRAINT mcp_calls_message_fk FOREIGN KEY (message_id) REFERENCES chat_messages (id) ON DELETE CASCADE,
    CONSTRAINT mcp_calls_attempts_positive CHECK (attempts >= 1)
);

-- +goose Down
DROP TABLE mcp_calls;
