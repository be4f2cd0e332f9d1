-- Deleting chats (docs/schema.md#deleting).
--
-- A chat is deleted with one DELETE of its row: its messages, queue,
-- structured requests, stream tickets, idempotency answers and child chats
-- go with it (ON DELETE CASCADE), whoever deletes it — the API, the
-- retention sweep, an erasure, an operator in psql. The delete trigger
-- makes that safe:
--   * it refuses a chat with a pending structured request: the request's
--     receipt is owed, so the deleter cancels it first (chat_deleted), in
--     the same transaction (store.DeleteChat);
--   * it refuses a spawned child its parent still awaits, unless the parent
--     goes in the same statement: the parent's tool call would wait for a
--     result that never comes (the store delivers one first);
--   * it leaves tombstones: the chat's id, owner and reason ('deleted'),
--     and each of its requests' outcome (no value, schema or attempts), so
--     that a late lookup learns what happened instead of nothing — unless
--     the transaction writes them itself, for all the chats it deletes in
--     one statement, with its reason, as the store does: it says so in
--     chatd.tombstones ('written', for the rest of the transaction).
--
-- A tombstoned id cannot be used for a chat again: a worker, an import or
-- an operator cannot bring a deleted chat back. Writes into a deleted chat
-- fail on their foreign key to chats; a worker's commit misses its fence
-- (ChatLockIfOwned finds no row).

CREATE OR REPLACE FUNCTION chatd_chats_before_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM structured_requests r WHERE r.chat_id = OLD.id AND r.status = 'pending';
    IF FOUND THEN
        RAISE EXCEPTION 'chat % has pending structured requests: cancel them first', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'chats_delete_requests_finished';
    END IF;
    IF OLD.spawn_state = 'awaited' AND EXISTS (SELECT 1 FROM chats p WHERE p.id = OLD.parent_chat_id) THEN
        RAISE EXCEPTION 'chat % is awaited by its parent %: deliver its result first', OLD.id, OLD.parent_chat_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'chats_delete_awaited_child';
    END IF;
    IF current_setting('chatd.tombstones', true) IS DISTINCT FROM 'written' THEN
        INSERT INTO chat_tombstones (chat_id, owner_id, parent_chat_id, reason)
        VALUES (OLD.id, OLD.owner_id, OLD.parent_chat_id, 'deleted');
        INSERT INTO request_tombstones (request_id, chat_id, status, error_code, error_message, usage, trace_parent,
                                        created_at, finished_at)
        SELECT r.request_id, r.chat_id, r.status, r.error_code, r.error_message, m.content #> '{1,outcome,usage}',
               r.trace_parent, r.created_at, r.finished_at
        FROM structured_requests r
        LEFT JOIN chat_messages m ON m.id = r.receipt_message_id
        WHERE r.chat_id = OLD.id;
    END IF;
    RETURN OLD;
END
$$;

CREATE OR REPLACE TRIGGER chatd_chats_before_delete
    BEFORE DELETE ON chats
    FOR EACH ROW EXECUTE FUNCTION chatd_chats_before_delete();

CREATE OR REPLACE FUNCTION chatd_chats_not_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM chat_tombstones t WHERE t.chat_id = NEW.id) THEN
        RAISE EXCEPTION 'chat % was deleted and cannot be created again', NEW.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'chats_not_deleted';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER chatd_chats_not_deleted
    BEFORE INSERT ON chats
    FOR EACH ROW EXECUTE FUNCTION chatd_chats_not_deleted();

-- A request's webhook deliveries go with its tombstone (swept after
-- --retain-tombstones, or with the erased user): they have no foreign key,
-- since they outlive the request row when its chat is deleted.
CREATE OR REPLACE FUNCTION chatd_request_tombstones_after_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM webhook_deliveries d USING old_rows o WHERE d.request_id = o.request_id;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER chatd_request_tombstones_after_delete
    AFTER DELETE ON request_tombstones
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chatd_request_tombstones_after_delete();
