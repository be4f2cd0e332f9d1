package dbtest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// seedChats writes n chats at rest in one statement, with the triggers off
// (they would cost a transaction per chat): each is what one structured
// turn leaves, as the triggers would have left it — the user's message, an
// assistant step with its usage, a succeeded request and its receipt —
// its last change age ago (spread over a second per chat). chatd check
// finds them clean.
const seedChats = `
WITH c AS (
    INSERT INTO chats (owner_id, title, model, status, snapshot_version, history_version, created_at, updated_at)
    SELECT $1, 'seeded ' || i, 'm', 'waiting', 2, 2,
           now() - make_interval(secs => $3 + i), now() - make_interval(secs => $3 + i)
    FROM generate_series(1, $2::int) i
    RETURNING id, created_at
), ids AS (
    -- The request's three rows in id order: input, step, receipt.
    SELECT c.id AS chat_id, c.created_at, gen_random_uuid() AS request_id,
           nextval('chat_messages_id_seq') AS input_id, nextval('chat_messages_id_seq') AS step_id,
           nextval('chat_messages_id_seq') AS receipt_id
    FROM c
), r AS (
    INSERT INTO structured_requests (request_id, chat_id, name, schema, status, steps, receipt_message_id, created_at, updated_at, finished_at)
    SELECT request_id, chat_id, 'report', '{"type":"object"}', 'succeeded', 1, receipt_id, created_at, created_at, created_at
    FROM ids
)
INSERT INTO chat_messages (id, chat_id, role, kind, visibility, content, structured_request_id, finish_reason, usage, revision, created_at)
SELECT x.id, ids.chat_id, x.role, x.kind, x.visibility, x.content, ids.request_id, x.finish_reason, x.usage, x.revision, ids.created_at
FROM ids CROSS JOIN LATERAL (VALUES
    (ids.input_id, 'user', 'message', 'both', jsonb_build_array(jsonb_build_object('type', 'text', 'text', $4 || ' ' || ids.chat_id)),
     NULL, NULL::jsonb, 1),
    (ids.step_id, 'assistant', 'message', 'both', jsonb_build_array(jsonb_build_object('type', 'text', 'text', 'the answer: {"ok": true}')),
     'stop', '{"input_tokens": 12, "output_tokens": 5, "cache_read_tokens": null, "cache_write_tokens": null, "reasoning_tokens": null}'::jsonb, 2),
    (ids.receipt_id, 'assistant', 'receipt', 'user', jsonb_build_array(jsonb_build_object('type', 'text', 'text', '{"ok": true}'),
        jsonb_build_object('type', 'structured-output-outcome', 'outcome', jsonb_build_object('request_id', ids.request_id,
            'status', 'succeeded', 'value', '{"ok": true}'::jsonb, 'usage', '{"input_tokens": 12, "output_tokens": 5,
            "cache_read_tokens": null, "cache_write_tokens": null, "reasoning_tokens": null}'::jsonb))), NULL, NULL, 2)
) AS x(id, role, kind, visibility, content, finish_reason, usage, revision)`

// SeedChats creates the user named name (if needed) and n chats of theirs
// at rest, the oldest last changed age plus n seconds ago, each with a
// structured request that succeeded; their user messages contain text.
// It returns the user's id. For tests and benchmarks that need many chats
// fast: chats made through the store cost a few transactions each.
func SeedChats(tb testing.TB, pool *pgxpool.Pool, name string, n int, age time.Duration, text string) uuid.UUID {
	tb.Helper()
	ctx := context.Background()
	var owner uuid.UUID
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO users (name) VALUES ($1) ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id`,
			name).Scan(&owner); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, seedChats, owner, n, age.Seconds(), text)
		return err
	})
	if err != nil {
		tb.Fatalf("dbtest: seed %d chats: %v", n, err)
	}
	return owner
}
