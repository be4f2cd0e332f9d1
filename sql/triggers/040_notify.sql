-- Wake-ups. pg_notify is transactional: listeners hear about a change only
-- after it commits, and never about one that rolled back.
--
--   chatd_chat  payload "<chat_id> <snapshot_version> <owner_id>", once per
--               transaction that changed the chat (streams, long polls);
--               snapshot_version 0 means the chat was deleted.
--   chatd_work  payload "", when a chat is runnable and has no owner (workers).
--
-- Statement-level with transition tables: one pass per statement, not per row.

CREATE OR REPLACE FUNCTION chatd_chats_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM pg_notify('chatd_chat', n.id::text || ' ' || n.snapshot_version || ' ' || n.owner_id::text)
           FROM new_rows n;
    ELSE
        PERFORM pg_notify('chatd_chat', n.id::text || ' ' || n.snapshot_version || ' ' || n.owner_id::text)
           FROM new_rows n JOIN old_rows o ON o.id = n.id
          WHERE n.snapshot_version <> o.snapshot_version;
    END IF;
    IF EXISTS (SELECT 1 FROM new_rows n WHERE n.status IN ('running', 'interrupting') AND n.worker_id IS NULL) THEN
        PERFORM pg_notify('chatd_work', '');
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER chatd_chats_notify_insert
    AFTER INSERT ON chats
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chatd_chats_notify();

CREATE OR REPLACE TRIGGER chatd_chats_notify_update
    AFTER UPDATE ON chats
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chatd_chats_notify();

CREATE OR REPLACE FUNCTION chatd_chats_notify_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('chatd_chat', o.id::text || ' 0 ' || o.owner_id::text) FROM old_rows o;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER chatd_chats_notify_delete
    AFTER DELETE ON chats
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chatd_chats_notify_delete();
