-- A chat row is updated several times per turn (claim, commits, end of
-- turn). Leave room in its page so that updates which change no indexed
-- column (a claim, an attempt counted, a fence moved) can be HOT: no new
-- index entries, and the old version is pruned in place.

-- +goose Up
ALTER TABLE chats SET (fillfactor = 50);

-- +goose Down
ALTER TABLE chats RESET (fillfactor);
