-- Which process admitted a structured request (admitted_by) and which
-- committed its finish (finished_by): their notify hubs' ids, the hub_id of
-- chat_followers. A finish committed by the process that admitted the
-- request, while nobody follows the chat, is told to that process's long
-- polls and webhook deliverer in-process instead of being announced on
-- chatd_request, which every listening replica pays a transaction for
-- (chatd_finish_announced, sql/triggers/030_requests.sql). A long poll on
-- another process follows the chat (chat_followers) before it waits. NULL
-- (rows from before, or written by an older binary): always announced.

-- +goose Up
ALTER TABLE structured_requests ADD COLUMN admitted_by uuid, ADD COLUMN finished_by uuid;

-- +goose Down
-- Until the trigger files of an older binary replace it: announce every
-- finish, as before.
CREATE OR REPLACE FUNCTION chatd_finish_announced(r structured_requests) RETURNS boolean
LANGUAGE sql AS 'SELECT true';
ALTER TABLE structured_requests DROP COLUMN admitted_by, DROP COLUMN finished_by;
