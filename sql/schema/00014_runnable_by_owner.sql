-- A user's runnable chats, counted by every admission against
-- --max-runnable-per-user (chatd_runnable_within) and by the claims that
-- bound an owner's running chats (ChatClaimByID, ChatClaimNext). Without
-- it each count would read every chat the user ever had.

-- +goose Up
CREATE INDEX chats_owner_runnable ON chats (owner_id) WHERE status IN ('running', 'interrupting');

-- +goose Down
DROP INDEX chats_owner_runnable;
