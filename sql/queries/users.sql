-- name: UserUpsertByName :one
INSERT INTO users (name) VALUES (@name)
ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
RETURNING *;

-- name: UserGetByID :one
SELECT * FROM users WHERE id = @id;
