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
--
-- The functions are on every write's path, so they do the least work that
-- keeps the rule: a transaction that already bumped the chat skips the
-- comparison, and "anything but the lease changed" compares the rows as
-- records, not as JSON.

-- chatd_touch_chat bumps the chat once per transaction and returns the
-- transaction's snapshot_version. With p_fence it also moves history_version
-- to that snapshot and resets generation_attempt (model-relevant history
-- changed: generations in flight are void), in the same UPDATE.
DROP FUNCTION IF EXISTS chatd_touch_chat(uuid); -- the form before p_fence

CREATE OR REPLACE FUNCTION chatd_touch_chat(p_chat_id uuid, p_fence boolean) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    cur xid8 := pg_current_xact_id();
    c record;
    v bigint;
BEGIN
    -- snapshot_xact = cur can only have been written by this transaction,
    -- which then holds the row lock: reading it without a lock is safe.
    SELECT snapshot_version, snapshot_xact, history_version, generation_attempt INTO c
      FROM chats WHERE id = p_chat_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'chat % does not exist', p_chat_id
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'chats_touch_requires_chat';
    END IF;
    IF c.snapshot_xact = cur
       AND (NOT p_fence OR (c.history_version = c.snapshot_version AND c.generation_attempt = 0)) THEN
        RETURN c.snapshot_version; -- bumped (and fenced, if asked) already
    END IF;
    -- The expressions read the row as it is once locked, so a concurrent
    -- bump that committed meanwhile is taken into account.
    UPDATE chats
       SET snapshot_version = snapshot_version + 1, -- once per transaction: see chatd_chats_before_update
           history_version = CASE WHEN NOT p_fence THEN history_version
                                  WHEN snapshot_xact = cur THEN snapshot_version
                                  ELSE snapshot_version + 1 END,
           generation_attempt = CASE WHEN p_fence THEN 0 ELSE generation_attempt END
     WHERE id = p_chat_id
    RETURNING snapshot_version INTO v;
    IF v IS NULL THEN
        RAISE EXCEPTION 'chat % does not exist', p_chat_id
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'chats_touch_requires_chat';
    END IF;
    RETURN v;
END
$$;

CREATE OR REPLACE FUNCTION chatd_chats_before_update() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    cur xid8 := pg_current_xact_id();
    probe chats;
    visible boolean;
BEGIN
    IF NEW.id <> OLD.id OR NEW.owner_id <> OLD.owner_id THEN
        RAISE EXCEPTION 'chats.id and chats.owner_id cannot change'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'chats_identity_immutable';
    END IF;

    IF NEW.status <> OLD.status AND NOT ((OLD.status, NEW.status) IN (
        ('waiting', 'running'),
        ('running', 'waiting'), ('running', 'requires_action'), ('running', 'interrupting'), ('running', 'error'),
        ('requires_action', 'running'), ('requires_action', 'interrupting'),
        ('interrupting', 'waiting'), ('interrupting', 'running'),
        ('error', 'running')))
    THEN
        RAISE EXCEPTION 'illegal chat status transition % -> %', OLD.status, NEW.status
            USING ERRCODE = 'check_violation', CONSTRAINT = 'chats_status_transition';
    END IF;

    IF NEW.history_version < OLD.history_version THEN
        RAISE EXCEPTION 'chats.history_version cannot go backwards'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'chats_history_version_forward';
    END IF;

    -- A provider retry is waited out within one step: once the history
    -- moves (the step was committed) or the status does (the turn ended,
    -- failed or is interrupted), it is over.
    IF NEW.history_version <> OLD.history_version OR NEW.status <> OLD.status THEN
        NEW.provider_retry := NULL;
    END IF;

    -- What changed: anything but the lease (and the columns this trigger
    -- owns) is a change; a change of anything but a worker's bookkeeping
    -- (owner, lease, attempt counter) is one a client can see. Setting
    -- snapshot_version is how chatd_touch_chat says that the chat's
    -- messages, queue or ledger changed: visible too.
    probe := NEW;
    probe.lease_expires_at := OLD.lease_expires_at;
    probe.snapshot_version := OLD.snapshot_version;
    probe.snapshot_xact := OLD.snapshot_xact;
    probe.updated_at := OLD.updated_at;
    probe.worker_id := OLD.worker_id;
    probe.generation_attempt := OLD.generation_attempt;
    visible := NEW.snapshot_version <> OLD.snapshot_version OR probe IS DISTINCT FROM OLD;

    IF OLD.snapshot_xact = cur THEN
        -- Already bumped by this transaction: the version stays.
        NEW.snapshot_version := OLD.snapshot_version;
        NEW.snapshot_xact := cur;
        NEW.updated_at := OLD.updated_at;
    ELSIF visible OR NEW.worker_id IS DISTINCT FROM OLD.worker_id
          OR NEW.generation_attempt <> OLD.generation_attempt THEN
        NEW.snapshot_version := OLD.snapshot_version + 1;
        NEW.snapshot_xact := cur;
        -- updated_at (the order of a user's chat list) moves for what the
        -- user sees, not for a claim, a release or an attempt counted, so
        -- those updates can stay HOT.
        IF visible THEN
            NEW.updated_at := now();
        ELSE
            NEW.updated_at := OLD.updated_at;
        END IF;
    ELSE
        -- A lease renewal: not a change anyone streams.
        NEW.snapshot_xact := OLD.snapshot_xact;
        NEW.updated_at := OLD.updated_at;
    END IF;

    -- Announced at commit (see 040_notify.sql) to whoever may need it: the
    -- worker that owned the chat (an interrupt, an edit, a queued message
    -- must reach it), unless this transaction made it the owner (an
    -- admission that hands the chat to a worker: chatd_note_claim), and the
    -- registered followers (005_followers.sql). A worker's bookkeeping is
    -- not announced: no reader needs it, and streams learn a new attempt
    -- from its preview. pg_notify drops a payload repeated in one
    -- transaction, so a transaction announces its snapshot once however
    -- many rows it writes.
    IF OLD.worker_id IS NULL AND NEW.worker_id IS NOT NULL THEN
        PERFORM chatd_note_claim(NEW.id);
    END IF;
    IF visible THEN
        IF OLD.worker_id IS NOT NULL AND current_setting('chatd.claimed_chat', true) IS DISTINCT FROM NEW.id::text THEN
            PERFORM pg_notify('chatd_chat', NEW.id::text || ' ' || NEW.snapshot_version || ' ' || NEW.owner_id::text);
        ELSIF chatd_followed(NEW.owner_id, NEW.id) THEN
            PERFORM pg_notify('chatd_chat', NEW.id::text || ' ' || NEW.snapshot_version || ' ' || NEW.owner_id::text);
        END IF;
    END IF;
    IF NEW.status IN ('running', 'interrupting') AND NEW.worker_id IS NULL THEN
        PERFORM pg_notify('chatd_work', NEW.id::text);
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
    IF NEW.worker_id IS NOT NULL THEN
        PERFORM chatd_note_claim(NEW.id);
    END IF;
    -- Only a watch of the owner can follow a chat that did not exist.
    IF chatd_followed(NEW.owner_id, NEW.id) THEN
        PERFORM pg_notify('chatd_chat', NEW.id::text || ' 1 ' || NEW.owner_id::text);
    END IF;
    IF NEW.status IN ('running', 'interrupting') AND NEW.worker_id IS NULL THEN
        PERFORM pg_notify('chatd_work', NEW.id::text);
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER chatd_chats_before_insert
    BEFORE INSERT ON chats
    FOR EACH ROW EXECUTE FUNCTION chatd_chats_before_insert();
