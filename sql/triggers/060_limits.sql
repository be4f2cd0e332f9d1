-- chatd_runnable_within refuses an admission that leaves the owner with
-- more than p_max runnable chats (running or interrupting), counting at most
-- p_max + 1 of them (chats_owner_runnable). The limit is the server's
-- (--max-runnable-per-user), so the admission calls this after its writes;
-- the refusal is a check_violation named chats_runnable_per_user, mapped
-- once by the store. Concurrent admissions of one owner do not see each
-- other's uncommitted chats, so a burst can pass the limit by the number of
-- admissions in flight: it bounds work, it is not an exact quota.
CREATE OR REPLACE FUNCTION chatd_runnable_within(p_owner uuid, p_max integer) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT count(*) FROM (
            SELECT 1 FROM chats WHERE owner_id = p_owner AND status IN ('running', 'interrupting') LIMIT p_max + 1
        ) r) > p_max THEN
        RAISE EXCEPTION 'more than % runnable chats', p_max
            USING ERRCODE = 'check_violation', CONSTRAINT = 'chats_runnable_per_user';
    END IF;
    RETURN true;
END
$$;

-- chatd_runnable_count_within is chatd_runnable_within returning the count
-- (at most p_max of them), so that an admitting process can skip the check
-- for an owner it just counted far below the limit (store.runnableCounts).
-- chatd_runnable_within stays for the replicas of the release before.
CREATE OR REPLACE FUNCTION chatd_runnable_count_within(p_owner uuid, p_max integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    SELECT count(*) INTO n FROM (
        SELECT 1 FROM chats WHERE owner_id = p_owner AND status IN ('running', 'interrupting') LIMIT p_max + 1
    ) r;
    IF n > p_max THEN
        RAISE EXCEPTION 'more than % runnable chats', p_max
            USING ERRCODE = 'check_violation', CONSTRAINT = 'chats_runnable_per_user';
    END IF;
    RETURN n;
END
$$;
