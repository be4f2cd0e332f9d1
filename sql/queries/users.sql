-- name: UserUpsertByName :one
-- A named user (chatd token create --user, the token API, X-Chatd-User
-- without an identity provider), created on first use; an identity
-- provider's user is found by its idp: name too, never created by it (its
-- name fails users_name_check without an issuer).
INSERT INTO users (name) VALUES (@name)
ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
RETURNING *;

-- name: UserUpsertBySubject :one
-- An identity provider's user, created on first use, keyed by (issuer,
-- subject): the same subject at another issuer is another user.
INSERT INTO users (name, issuer, subject) VALUES (@name, @issuer, @subject)
ON CONFLICT ON CONSTRAINT users_issuer_subject_key DO UPDATE SET subject = EXCLUDED.subject
RETURNING *;

-- name: UserGetByID :one
SELECT * FROM users WHERE id = @id;

-- name: UserList :many
-- A page of users by name, after the cursor (a name) when there is one.
SELECT * FROM users
WHERE sqlc.narg(after)::text IS NULL OR users.name > sqlc.narg(after)::text
ORDER BY users.name
LIMIT @max_rows;
