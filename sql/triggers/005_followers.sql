-- chatd_followed says whether a change of a chat must be announced to its
-- followers: whether a stream of the chat or a watch of its owner is
-- registered in chat_followers, on any replica.
--
-- Exactness: a follower registers under the owner's follow lock held
-- exclusively (ChatFollowerRegister, sql/queries/chat_followers.sql),
-- then reads.
-- This function takes the same lock shared, then checks with a snapshot
-- taken after the lock (VOLATILE, READ COMMITTED: every writer of chats).
-- Either the registration committed first and the check sees it, or the
-- registration waits for this transaction to end and the follower's first
-- read sees its change. Writers do not wait for one another (shared).
-- Class 17 is sql.LockClassFollow (sql/locks.go).
CREATE OR REPLACE FUNCTION chatd_followed(p_owner uuid, p_chat uuid) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(17, hashtext(p_owner::text));
    RETURN EXISTS (SELECT 1 FROM chat_followers f
                   WHERE f.owner_id = p_owner
                     AND f.chat_id IN (p_chat, '00000000-0000-0000-0000-000000000000'));
END
$$;

-- chatd_note_claim records, for the rest of the transaction, that it made
-- a worker the chat's owner, or that it is the owner's own commit
-- (ChatLockIfOwned): the worker starts from what this transaction wrote,
-- so this transaction's changes need not be announced to it. One
-- chat per transaction is enough (an admission claims one); a transaction
-- that claims more announces the others' changes, which costs only that.
CREATE OR REPLACE FUNCTION chatd_note_claim(p_chat uuid) RETURNS void
LANGUAGE sql VOLATILE AS $$
    SELECT set_config('chatd.claimed_chat', p_chat::text, true);
$$;
