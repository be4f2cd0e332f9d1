-- Wake-ups. pg_notify is transactional: listeners hear about a change only
-- after it commits, and never about one that rolled back (nor about the
-- work of a rolled back savepoint).
--
--   chatd_chat     payload "<chat_id> <snapshot_version> <owner_id>", once per
--                  transaction that changed the chat in a way a client can see,
--                  when the chat's worker or a registered follower (a stream,
--                  a watch: chat_followers, 005_followers.sql) may need it;
--                  snapshot_version 0 means the chat was deleted (sent when
--                  a worker owned it or someone follows it). Sent by chatd_chats_before_insert/_update
--                  (010_snapshot.sql), which know what changed; read by
--                  internal/notify/payload.go, the one codec of it.
--   chatd_work     payload "<chat_id>", when a chat is runnable and has no
--                  owner (workers); sent by the same triggers.
--   chatd_request  payload "<request_id>", when a structured request
--                  finished and a long poll of another process may wait
--                  for it; sent by chatd_requests_guard (030_requests.sql,
--                  chatd_finish_announced).
--   chatd_delta    preview fragments, sent by the workers themselves.

-- Earlier versions announced changes in statement-level triggers with
-- transition tables, which every UPDATE of a chat paid for.
DROP TRIGGER IF EXISTS chatd_chats_notify_insert ON chats;
DROP TRIGGER IF EXISTS chatd_chats_notify_update ON chats;
DROP FUNCTION IF EXISTS chatd_chats_notify();

-- A deletion is announced to whoever may need it, as other changes are: the
-- worker that owned the chat (its turn stops) and the chat's followers
-- (streams end, long polls answer). The retention sweep's chats, idle and
-- unfollowed, are deleted without a word.
CREATE OR REPLACE FUNCTION chatd_chats_notify_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('chatd_chat', o.id::text || ' 0 ' || o.owner_id::text) FROM old_rows o
     WHERE o.worker_id IS NOT NULL OR chatd_followed(o.owner_id, o.id);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER chatd_chats_notify_delete
    AFTER DELETE ON chats
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chatd_chats_notify_delete();
