package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/prom"
)

// seedChatsSQL writes $2 chats of user $1 at rest in one statement, with
// the triggers off (they would cost a transaction per chat): each is what
// one structured turn leaves, as the triggers would have left it — the
// user's message (text $4 and the chat's id), an assistant step with its
// usage, a succeeded request and its receipt — last changed $3 seconds
// plus one second per chat ago. chatd check finds them clean.
const seedChatsSQL = `
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

// SeedChats creates the user named name in tx (if needed) and n chats of
// theirs at rest, the newest last changed age ago, one second apart, each
// with a structured request that succeeded and text in its user message.
// It returns the user's id. The triggers are off for the rest of tx.
func SeedChats(ctx context.Context, tx pgx.Tx, name string, n int, age time.Duration, text string) (uuid.UUID, error) {
	var owner uuid.UUID
	if err := tx.QueryRow(ctx, `INSERT INTO users (name) VALUES ($1) ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id`,
		name).Scan(&owner); err != nil {
		return owner, err
	}
	if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		return owner, err
	}
	_, err := tx.Exec(ctx, seedChatsSQL, owner, n, age.Seconds(), text)
	return owner, err
}

// seed writes Options.SeedChats chats at rest, SeedAge old, into the
// round's database (user "seeded") and analyzes the tables.
func seed(ctx context.Context, o Options, dbURL string) (time.Duration, error) {
	start := time.Now()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := SeedChats(ctx, tx, "seeded", o.SeedChats, o.SeedAge, "a seeded chat")
		return err
	})
	if err == nil {
		_, err = conn.Exec(ctx, `ANALYZE chats, chat_messages, structured_requests`)
	}
	return time.Since(start), err
}

// Sweep is what the retention sweep did in a round with seeded chats.
type Sweep struct {
	Seeded  int           // chats seeded before the window
	SeedFor time.Duration // how long the seeding took
	// Deleted chats and Batches, with the batches' mean and p99 duration
	// (chatd's histogram), from chatd's /metrics at the end of the round.
	Deleted, Batches   float64
	BatchMean, Batch99 float64 // seconds
	// Left is how many seeded chats were still there after the window.
	Left int
	// LongestXact is the longest open transaction of a chatd backend seen
	// (pg_stat_activity every 100 ms): no lock was held longer.
	LongestXact time.Duration
	// LockWaits counts PostgreSQL's "still waiting" log lines of the round:
	// lock waits longer than deadlock_timeout (100 ms, log_lock_waits on).
	LockWaits int
}

// sweepMetrics reads the sweep's counters from the replicas' /metrics.
func sweepMetrics(ctx context.Context, scrapeOne func(ctx context.Context, i int) ([]byte, error), replicas int, s *Sweep) {
	for i := range replicas {
		body, err := scrapeOne(ctx, i)
		if err != nil {
			continue
		}
		m, err := prom.Parse(strings.NewReader(string(body)))
		if err != nil {
			continue
		}
		n, _ := m.Get("chatd_retention_deleted_total", "kind", "chats")
		s.Deleted += n
		b, _ := m.Get("chatd_retention_batch_duration_seconds_count")
		sum, _ := m.Get("chatd_retention_batch_duration_seconds_sum")
		s.Batches += b
		if b > 0 {
			s.BatchMean = sum / b
			s.Batch99, _ = m.Quantile("chatd_retention_batch_duration_seconds", 0.99)
		}
	}
}

// lockWaitLines counts PostgreSQL's lock-wait log lines in the log past
// offset, and returns the log's new end.
func lockWaitLines(path string, offset int64) (int, int64) {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return 0, offset
	}
	return strings.Count(string(b[offset:]), "still waiting for"), int64(len(b))
}

// seededLeft counts the seeded user's chats.
func seededLeft(ctx context.Context, dbURL string) int {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return -1
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM chats c JOIN users u ON u.id = c.owner_id WHERE u.name = 'seeded'`).Scan(&n); err != nil {
		return -1
	}
	return n
}

// longestXact is the age of the oldest open transaction of a client
// backend on db (0: none).
func longestXact(ctx context.Context, conn *pgx.Conn, db string) (time.Duration, error) {
	var secs float64
	err := conn.QueryRow(ctx, `SELECT coalesce(max(extract(epoch FROM clock_timestamp() - xact_start)), 0)::float8 FROM pg_stat_activity
		WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`, db).Scan(&secs)
	return time.Duration(secs * float64(time.Second)), err
}

// reportSweeps writes the rounds' sweeps, when the run seeded chats.
func reportSweeps(w io.Writer, name string, rounds []Round) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s round\tseeded\tseeding s\tdeleted\tleft\tbatches\tbatch mean ms\tbatch p99 ms\tlongest xact ms\tlock waits >100ms\t\n", name)
	for i, rd := range rounds {
		s := rd.Sweep
		if s == nil {
			continue
		}
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.0f\t%d\t%.0f\t%.1f\t%.1f\t%.0f\t%d\t\n", i+1, s.Seeded, s.SeedFor.Seconds(), s.Deleted, s.Left,
			s.Batches, s.BatchMean*1000, s.Batch99*1000, float64(s.LongestXact.Microseconds())/1000, s.LockWaits)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// SeedChatsIn runs SeedChats in a transaction of its own on pool.
func SeedChatsIn(ctx context.Context, pool *pgxpool.Pool, name string, n int, age time.Duration, text string) (uuid.UUID, error) {
	var owner uuid.UUID
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		owner, err = SeedChats(ctx, tx, name, n, age, text)
		return err
	})
	return owner, err
}
