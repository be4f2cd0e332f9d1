-- Snapshot versioning for chats.
--
-- Every transaction that changes a chat, its messages, its queue or its
-- structured requests advances chats.snapshot_version exactly once. Streams
-- use it as their watermark and message revisions copy it, so a transaction
-- that forgot the bump would publish rows a stream has already passed. The
-- database enforces the rule instead of every caller remembering it:
--   * any UPDATE of a chat other than a lease renewal bumps the version, once
--     per transaction (snapshot_xact remembers which transaction bumped);
--   * writes to messages, queue and ledger call chatd_touch_chat first.

CREATE OR REPLACE FUNCTION chatd_touch_chat(p_chat_id uuid) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v bigint;
BEGIN
    UPDATE chats SET snapshot_version = snapshot_version + 1
     WHERE id = p_chat_id AND snapshot_xact IS DISTINCT FROM pg_current_xact_id()
    RETURNING snapshot_version INTO v;
    IF v IS NULL THEN
        SELECT snapshot_version INTO v FROM chats WHERE id = p_chat_id;
        IF v IS NULL THEN
            RAISE EXCEPTION 'chat % does not exist', p_chat_id USING ERRCODE = 'foreign_key_violation';
        END IF;
    END IF;
    RETURN v;
END
$$;

CREATE OR REPLACE FUNCTION chatd_chats_before_update() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    cur xid8 := pg_current_xact_id();
    ignored text[] := ARRAY['lease_expires_at', 'snapshot_version', 'snapshot_xact', 'updated_at'];
BEGIN
    IF NEW.id <> OLD.id OR NEW.owner_id <> OLD.owner_id THEN
        RAISE EXCEPTION 'chats.id and chats.owner_id cannot change' USING ERRCODE = 'check_violation';
    END IF;

    IF NEW.status <> OLD.status AND NOT ((OLD.status, NEW.status) IN (
        ('waiting', 'running'),
        ('running', 'waiting'), ('running', 'requires_action'), ('running', 'interrupting'), ('running', 'error'),
        ('requires_action', 'running'), ('requires_action', 'interrupting'),
        ('interrupting', 'waiting'), ('interrupting', 'running'),
        ('error', 'running')))
    THEN
        RAISE EXCEPTION 'illegal chat status transition % -> %', OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;

    IF NEW.history_version <> OLD.history_version AND NEW.history_version < OLD.history_version THEN
        RAISE EXCEPTION 'chats.history_version cannot go backwards' USING ERRCODE = 'check_violation';
    END IF;

    IF NEW.snapshot_version <> OLD.snapshot_version
       OR (to_jsonb(NEW) - ignored) IS DISTINCT FROM (to_jsonb(OLD) - ignored)
    THEN
        IF OLD.snapshot_xact IS NOT DISTINCT FROM cur THEN
            -- Already bumped by this transaction.
            NEW.snapshot_version := OLD.snapshot_version;
        ELSE
            NEW.snapshot_version := OLD.snapshot_version + 1;
            NEW.snapshot_xact := cur;
            NEW.updated_at := now();
        END IF;
    ELSE
        -- A lease renewal: not a change anyone streams.
        NEW.snapshot_xact := OLD.snapshot_xact;
        NEW.updated_at := OLD.updated_at;
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER chatd_chats_before_update
    BEFORE UPDATE ON chats
    FOR EACH ROW EXECUTE FUNCTION chatd_chats_before_update();

-- New chats start at snapshot 1 and cannot be created with other counters.
CREATE OR REPLACE FUNCTION chatd_chats_before_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.snapshot_version := 1;
    NEW.snapshot_xact := pg_current_xact_id();
    NEW.history_version := 0;
    NEW.generation_attempt := 0;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER chatd_chats_before_insert
    BEFORE INSERT ON chats
    FOR EACH ROW EXECUTE FUNCTION chatd_chats_before_insert();
