-- name: MCPCallStartIfOwned :one
-- Journals an MCP call before it is sent, behind the worker's fence (the
-- chat is running, owned by the worker, at the history the call belongs
-- to). A row already there was an earlier send whose result never
-- committed: attempts counts the sends. No row: the fence failed.
INSERT INTO mcp_calls (message_id, tool_call_id, server, tool)
SELECT @message_id, @tool_call_id, @server, @tool
FROM chats c
WHERE c.id = @chat_id AND c.worker_id = @worker_id AND c.history_version = @history_version AND c.status = 'running'
ON CONFLICT ON CONSTRAINT mcp_calls_pkey DO UPDATE SET attempts = mcp_calls.attempts + 1, started_at = now()
RETURNING attempts;
