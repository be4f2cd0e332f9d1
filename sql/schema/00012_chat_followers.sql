-- The follower registry: which processes have a stream of a chat, or a
-- watch of all of a user's chats (chat_id = the nil uuid), open. A change
-- of a chat is announced on chatd_chat only when something may need it:
-- the chat's worker, or a follower registered here (chatd_followed,
-- sql/triggers/005_followers.sql). Each listening replica pays a
-- transaction for every notifying commit, so a turn nobody follows is
-- announced once (its end), not twice.
--
-- A process registers a key before its first read of what it follows, and
-- refreshes seen_at while it follows it; rows not refreshed for two minutes
-- (their process stopped, or stopped following) are swept. A row that
-- outlives its follower costs announcements, never a missed one.

-- +goose Up
CREATE TABLE chat_followers (
    owner_id uuid NOT NULL,
    chat_id uuid NOT NULL,
    hub_id uuid NOT NULL,
    seen_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT chat_followers_pkey PRIMARY KEY (owner_id, chat_id, hub_id)
);

-- +goose Down
DROP TABLE chat_followers;
-- Until the trigger files of an older binary replace it: announce every
-- change, as before the registry.
CREATE OR REPLACE FUNCTION chatd_followed(p_owner uuid, p_chat uuid) RETURNS boolean
LANGUAGE sql AS 'SELECT true';
