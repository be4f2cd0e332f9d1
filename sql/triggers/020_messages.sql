-- Message revisions and the execution-history fence.
--
-- revision: every inserted or changed row takes the chat's snapshot_version of
-- the writing transaction. Callers cannot set it.
--
-- history_version / generation_attempt: inserting or changing a
-- model-relevant row moves history_version to the snapshot and resets the
-- attempt counter, which invalidates any generation in flight. Inserting a
-- receipt does not: a structured request's terminal outcome can be published
-- (for example when a queued request is cancelled) while an unrelated turn is
-- running, and that turn must not be disturbed. Receipts are recognised by
-- kind = 'receipt', whose shape (assistant, visibility user) the
-- chat_messages_receipt_shape constraint guarantees. Receipts are immutable.
-- Both happen row by row in chatd_touch_chat, in the one UPDATE of the chat
-- that bumps its snapshot.

CREATE OR REPLACE FUNCTION chatd_messages_before_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.revision IS NOT NULL THEN
            RAISE EXCEPTION 'chat_messages.revision is assigned by the database'
                USING ERRCODE = 'check_violation', CONSTRAINT = 'chat_messages_revision_by_database';
        END IF;
    ELSE
        IF OLD.kind = 'receipt' THEN
            RAISE EXCEPTION 'receipt message % is immutable', OLD.id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'chat_messages_receipt_immutable';
        END IF;
        IF NEW.revision IS DISTINCT FROM OLD.revision THEN
            RAISE EXCEPTION 'chat_messages.revision is assigned by the database'
                USING ERRCODE = 'check_violation', CONSTRAINT = 'chat_messages_revision_by_database';
        END IF;
        IF NEW.id <> OLD.id OR NEW.chat_id <> OLD.chat_id OR NEW.kind <> OLD.kind
           OR NEW.structured_request_id IS DISTINCT FROM OLD.structured_request_id THEN
            RAISE EXCEPTION 'chat_messages id, chat_id, kind and structured_request_id cannot change'
                USING ERRCODE = 'check_violation', CONSTRAINT = 'chat_messages_identity_immutable';
        END IF;
        IF OLD.deleted AND NOT NEW.deleted THEN
            RAISE EXCEPTION 'a deleted message cannot be restored'
                USING ERRCODE = 'check_violation', CONSTRAINT = 'chat_messages_no_undelete';
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
                    NEW.structured_request_id, NEW.chat_id
                    USING ERRCODE = 'check_violation', CONSTRAINT = 'chat_messages_receipt_needs_pending_request';
            END IF;
        ELSE
            PERFORM 1 FROM structured_requests r
             WHERE r.request_id = NEW.structured_request_id AND r.chat_id = NEW.chat_id;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'structured request % does not belong to chat %',
                    NEW.structured_request_id, NEW.chat_id
                    USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'chat_messages_request_in_chat';
            END IF;
        END IF;
    END IF;

    -- Every update fences: no-op updates were skipped above, and receipts
    -- cannot be updated.
    NEW.revision := chatd_touch_chat(NEW.chat_id, TG_OP = 'UPDATE' OR NEW.kind <> 'receipt');
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
            USING ERRCODE = 'check_violation', CONSTRAINT = 'chat_messages_no_delete';
    END IF;
    RETURN OLD;
END
$$;

CREATE OR REPLACE TRIGGER chatd_messages_before_delete
    BEFORE DELETE ON chat_messages
    FOR EACH ROW EXECUTE FUNCTION chatd_messages_before_delete();

-- Earlier versions fenced in statement-level triggers; chatd_touch_chat
-- does it now.
DROP TRIGGER IF EXISTS chatd_messages_fence_insert ON chat_messages;
DROP TRIGGER IF EXISTS chatd_messages_fence_update ON chat_messages;
DROP FUNCTION IF EXISTS chatd_messages_fence_insert();
DROP FUNCTION IF EXISTS chatd_messages_fence_update();

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
            NEW.id, NEW.structured_request_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'chat_messages_receipt_closes_request';
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

-- The tokens of every provider step a structured request governed, repairs
-- and steps an edit deleted included (they were spent), by kind: a kind no
-- step reported is null. The receipt keeps it. STABLE, so it sees the
-- calling statement's snapshot: the steps inserted earlier in the same
-- transaction count. plpgsql so that its plan is cached per session.
CREATE OR REPLACE FUNCTION chatd_request_usage(p_request uuid) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT jsonb_build_object(
        'input_tokens', sum((m.usage->>'input_tokens')::bigint),
        'output_tokens', sum((m.usage->>'output_tokens')::bigint),
        'cache_read_tokens', sum((m.usage->>'cache_read_tokens')::bigint),
        'cache_write_tokens', sum((m.usage->>'cache_write_tokens')::bigint),
        'reasoning_tokens', sum((m.usage->>'reasoning_tokens')::bigint))
    FROM chat_messages m
    WHERE m.structured_request_id = p_request AND m.kind = 'message' AND m.role = 'assistant' AND m.usage IS NOT NULL);
END
$$;
