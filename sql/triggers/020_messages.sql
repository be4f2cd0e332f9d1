-- Message revisions and the execution-history fence.
--
-- revision: every inserted or changed row takes the chat's snapshot_version of
-- the writing transaction. Callers cannot set it.
--
-- history_version / generation_attempt: a statement that inserts or changes
-- model-relevant rows moves history_version to the snapshot and resets the
-- attempt counter, which invalidates any generation in flight. A statement that
-- inserts only receipts does not: a structured request's terminal outcome can
-- be published (for example when a queued request is cancelled) while an
-- unrelated turn is running, and that turn must not be disturbed. Receipts are
-- recognised by kind = 'receipt', whose shape (assistant, visibility user) the
-- chat_messages_receipt_shape constraint guarantees. Receipts are immutable.

CREATE OR REPLACE FUNCTION chatd_messages_before_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.revision IS NOT NULL THEN
            RAISE EXCEPTION 'chat_messages.revision is assigned by the database'
                USING ERRCODE = 'check_violation';
        END IF;
    ELSE
        IF OLD.kind = 'receipt' THEN
            RAISE EXCEPTION 'receipt message % is immutable', OLD.id USING ERRCODE = 'check_violation';
        END IF;
        IF NEW.revision IS DISTINCT FROM OLD.revision THEN
            RAISE EXCEPTION 'chat_messages.revision is assigned by the database'
                USING ERRCODE = 'check_violation';
        END IF;
        IF NEW.id <> OLD.id OR NEW.chat_id <> OLD.chat_id OR NEW.kind <> OLD.kind
           OR NEW.structured_request_id IS DISTINCT FROM OLD.structured_request_id THEN
            RAISE EXCEPTION 'chat_messages id, chat_id, kind and structured_request_id cannot change'
                USING ERRCODE = 'check_violation';
        END IF;
        IF OLD.deleted AND NOT NEW.deleted THEN
            RAISE EXCEPTION 'a deleted message cannot be restored' USING ERRCODE = 'check_violation';
        END IF;
        IF NEW IS NOT DISTINCT FROM OLD THEN
            RETURN NULL; -- a no-op update changes nothing and must not fence
        END IF;
    END IF;

    IF NEW.structured_request_id IS NOT NULL AND TG_OP = 'INSERT' THEN
        IF NEW.kind = 'receipt' THEN
            PERFORM 1 FROM structured_requests r
             WHERE r.request_id = NEW.structured_request_id AND r.chat_id = NEW.chat_id AND r.status = 'pending';
            IF NOT FOUND THEN
                RAISE EXCEPTION 'receipt for structured request % needs that request pending in chat %',
                    NEW.structured_request_id, NEW.chat_id USING ERRCODE = 'check_violation';
            END IF;
        ELSE
            PERFORM 1 FROM structured_requests r
             WHERE r.request_id = NEW.structured_request_id AND r.chat_id = NEW.chat_id;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'structured request % does not belong to chat %',
                    NEW.structured_request_id, NEW.chat_id USING ERRCODE = 'foreign_key_violation';
            END IF;
        END IF;
    END IF;

    NEW.revision := chatd_touch_chat(NEW.chat_id);
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER chatd_messages_before_write
    BEFORE INSERT OR UPDATE ON chat_messages
    FOR EACH ROW EXECUTE FUNCTION chatd_messages_before_write();

-- History is soft-deleted; rows go away only with their chat (ON DELETE
-- CASCADE runs after the chat row is gone, so the check below lets it through).
CREATE OR REPLACE FUNCTION chatd_messages_before_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM chats WHERE id = OLD.chat_id) THEN
        RAISE EXCEPTION 'chat message % cannot be deleted while its chat exists (set deleted = true)', OLD.id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN OLD;
END
$$;

CREATE OR REPLACE TRIGGER chatd_messages_before_delete
    BEFORE DELETE ON chat_messages
    FOR EACH ROW EXECUTE FUNCTION chatd_messages_before_delete();

CREATE OR REPLACE FUNCTION chatd_messages_fence_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE chats c
       SET history_version = c.snapshot_version, generation_attempt = 0
     WHERE c.id IN (SELECT n.chat_id FROM new_rows n WHERE n.kind <> 'receipt')
       AND (c.history_version <> c.snapshot_version OR c.generation_attempt <> 0);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER chatd_messages_fence_insert
    AFTER INSERT ON chat_messages
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chatd_messages_fence_insert();

-- Every row that reaches the transition table really changed (no-op updates
-- are skipped above), and receipts cannot be updated, so every update fences.
CREATE OR REPLACE FUNCTION chatd_messages_fence_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE chats c
       SET history_version = c.snapshot_version, generation_attempt = 0
     WHERE c.id IN (SELECT n.chat_id FROM new_rows n)
       AND (c.history_version <> c.snapshot_version OR c.generation_attempt <> 0);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER chatd_messages_fence_update
    AFTER UPDATE ON chat_messages
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chatd_messages_fence_update();

-- At commit, every receipt must be the one its ledger row points at, and that
-- row must be finished: receipts and terminal ledger rows come in pairs.
CREATE OR REPLACE FUNCTION chatd_receipt_closes_request() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM structured_requests r
     WHERE r.request_id = NEW.structured_request_id
       AND r.status <> 'pending' AND r.receipt_message_id = NEW.id;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM chats WHERE id = NEW.chat_id) THEN
        RAISE EXCEPTION 'receipt % was committed without finishing structured request %',
            NEW.id, NEW.structured_request_id USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS chatd_receipt_closes_request ON chat_messages;
CREATE CONSTRAINT TRIGGER chatd_receipt_closes_request
    AFTER INSERT ON chat_messages
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.kind = 'receipt')
    EXECUTE FUNCTION chatd_receipt_closes_request();
