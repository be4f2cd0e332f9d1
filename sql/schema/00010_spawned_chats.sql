-- Child chats spawned by the agent (the spawn_agent server tool, see
-- docs/tools.md). A chat created with "spawn_agents": true may spawn; its
-- children inherit the opt-in, one level deeper. A spawned child names the
-- assistant step and the tool call that spawned it; while its parent waits
-- for it (spawn_state 'awaited'), the transaction that ends the child's
-- first turn writes its result into the parent as that call's tool result
-- ('delivered'). A parent whose turn ends first (interrupt, edit) detaches
-- the children it still awaits and interrupts them ('detached').

-- +goose Up
ALTER TABLE chats
    ADD COLUMN spawn_agents boolean NOT NULL DEFAULT false,
    ADD COLUMN spawn_depth integer NOT NULL DEFAULT 0,
    ADD COLUMN spawn_message_id bigint,
    ADD COLUMN spawn_tool_call_id text,
    ADD COLUMN spawn_state text,
    ADD CONSTRAINT chats_spawn_depth_nonnegative CHECK (spawn_depth >= 0),
    ADD CONSTRAINT chats_spawn_state_known CHECK (spawn_state IN ('awaited', 'delivered', 'detached')),
    ADD CONSTRAINT chats_spawn_shape CHECK (
        (spawn_tool_call_id IS NULL) = (spawn_state IS NULL)
        AND (spawn_tool_call_id IS NULL) = (spawn_message_id IS NULL)
        AND (spawn_tool_call_id IS NULL OR (parent_chat_id IS NOT NULL AND spawn_depth > 0))),
    ADD CONSTRAINT chats_spawn_message_fk FOREIGN KEY (spawn_message_id) REFERENCES chat_messages (id) ON DELETE CASCADE;

-- One child per tool call.
CREATE UNIQUE INDEX chats_spawn_call_unique ON chats (spawn_message_id, spawn_tool_call_id) WHERE spawn_tool_call_id IS NOT NULL;
-- Children by parent: the list filter, the caps, detaching.
CREATE INDEX chats_parent ON chats (parent_chat_id, updated_at DESC, id) WHERE parent_chat_id IS NOT NULL;

-- +goose Down
DROP INDEX chats_parent;
DROP INDEX chats_spawn_call_unique;
ALTER TABLE chats
    DROP COLUMN spawn_state,
    DROP COLUMN spawn_tool_call_id,
    DROP COLUMN spawn_message_id,
    DROP COLUMN spawn_depth,
    DROP COLUMN spawn_agents;
