-- The structured-request ledger guard.
--
-- A request is born pending and moves once to succeeded, failed or
-- cancelled. A finished row needs its receipt (inserted earlier in the same
-- transaction) and never changes again. Its definition (name, description,
-- schema) never changes. Counters only grow.

CREATE OR REPLACE FUNCTION chatd_requests_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT 1 FROM chats WHERE id = OLD.chat_id) THEN
            RAISE EXCEPTION 'structured request % cannot be deleted while its chat exists', OLD.request_id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'structured_requests_no_delete';
        END IF;
        RETURN OLD;
    END IF;

    IF TG_OP = 'INSERT' THEN
        IF NEW.status <> 'pending' OR NEW.rejections <> 0 OR NEW.steps <> 0 OR NEW.candidate IS NOT NULL THEN
            RAISE EXCEPTION 'a structured request starts pending with no progress'
                USING ERRCODE = 'check_violation', CONSTRAINT = 'structured_requests_start_pending';
        END IF;
        PERFORM chatd_touch_chat(NEW.chat_id, false);
        RETURN NEW;
    END IF;

    IF OLD.status <> 'pending' THEN
        RAISE EXCEPTION 'structured request % is % and cannot change', OLD.request_id, OLD.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'structured_requests_finished_immutable';
    END IF;
    IF NEW.request_id <> OLD.request_id OR NEW.chat_id <> OLD.chat_id OR NEW.name <> OLD.name
       OR NEW.description <> OLD.description OR NEW.schema <> OLD.schema OR NEW.created_at <> OLD.created_at THEN
        RAISE EXCEPTION 'the definition of structured request % cannot change', OLD.request_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'structured_requests_definition_immutable';
    END IF;
    IF NEW.rejections < OLD.rejections OR NEW.validation_rejections < OLD.validation_rejections
       OR NEW.steps < OLD.steps THEN
        RAISE EXCEPTION 'structured request counters only grow'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'structured_requests_counters_grow';
    END IF;
    IF NEW.status <> 'pending' THEN
        PERFORM 1 FROM chat_messages m
         WHERE m.id = NEW.receipt_message_id AND m.kind = 'receipt'
           AND m.structured_request_id = NEW.request_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'structured request % cannot become % without its receipt', NEW.request_id, NEW.status
                USING ERRCODE = 'check_violation', CONSTRAINT = 'structured_requests_finish_with_receipt';
        END IF;
        -- An import (chatd import, which sets chatd.importing for its
        -- transaction) keeps the finish time of the receipt it restores.
        IF NEW.finished_at IS NULL OR current_setting('chatd.importing', true) IS DISTINCT FROM 'on' THEN
            NEW.finished_at := now();
        END IF;
        IF chatd_finish_announced(NEW) THEN
            PERFORM pg_notify('chatd_request', NEW.request_id::text); -- long polls (040_notify.sql)
        END IF;
    END IF;
    NEW.updated_at := now();
    PERFORM chatd_touch_chat(NEW.chat_id, false);
    RETURN NEW;
END
$$;

-- chatd_finish_announced says whether a request's finish must be announced
-- on chatd_request: unless the process that admitted it (admitted_by)
-- commits the finish itself (finished_by) and nobody follows the chat. That
-- process tells its own long polls and webhook deliverer after the commit
-- (store.Tell). A long poll on another process follows the chat
-- (chat_followers) before it waits: chatd_followed sees it, or the read it
-- makes after registering sees the finish (005_followers.sql).
CREATE OR REPLACE FUNCTION chatd_finish_announced(r structured_requests) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF r.admitted_by IS NULL OR r.finished_by IS DISTINCT FROM r.admitted_by THEN
        RETURN true;
    END IF;
    RETURN chatd_followed((SELECT c.owner_id FROM chats c WHERE c.id = r.chat_id), r.chat_id);
END
$$;

CREATE OR REPLACE TRIGGER chatd_requests_guard
    BEFORE INSERT OR UPDATE OR DELETE ON structured_requests
    FOR EACH ROW EXECUTE FUNCTION chatd_requests_guard();

-- Queue changes are chat changes; the queue holds at most 20 messages.
CREATE OR REPLACE FUNCTION chatd_queue_touch() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT 1 FROM chats WHERE id = OLD.chat_id) THEN
            PERFORM chatd_touch_chat(OLD.chat_id, false);
        END IF;
        RETURN OLD;
    END IF;
    IF TG_OP = 'UPDATE' AND (NEW.id <> OLD.id OR NEW.chat_id <> OLD.chat_id) THEN
        RAISE EXCEPTION 'queued message id and chat_id cannot change'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'chat_queued_messages_identity_immutable';
    END IF;
    PERFORM chatd_touch_chat(NEW.chat_id, false);
    IF TG_OP = 'INSERT' AND (SELECT count(*) FROM chat_queued_messages q WHERE q.chat_id = NEW.chat_id) >= 20 THEN
        RAISE EXCEPTION 'the queue of chat % is full (20 messages)', NEW.chat_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'chat_queued_messages_at_most_20';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER chatd_queue_touch
    BEFORE INSERT OR UPDATE OR DELETE ON chat_queued_messages
    FOR EACH ROW EXECUTE FUNCTION chatd_queue_touch();
