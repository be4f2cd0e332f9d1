-- The MCP servers a chat opted into at creation (POST /api/v1/chats
-- "mcp_servers"). Names only: what a name means (command, URL, tools) is
-- the operator's configuration, read when the chat runs. A server
-- configured for all chats needs no entry here.

-- +goose Up
ALTER TABLE chats ADD COLUMN mcp_servers text[] NOT NULL DEFAULT '{}',
    ADD CONSTRAINT chats_mcp_servers_bounded CHECK (cardinality(mcp_servers) <= 16);

-- +goose Down
ALTER TABLE chats DROP COLUMN mcp_servers;
