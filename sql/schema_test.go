package sql_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/store"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type counters struct {
	Snapshot, History int64
	Attempt           int32
}

type fixture struct {
	t    *testing.T
	pool *pgxpool.Pool
	chat uuid.UUID
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := dbtest.New(t)
	f := &fixture{t: t, pool: pool}
	var owner uuid.UUID
	f.scan(`INSERT INTO users (name) VALUES ('alice') RETURNING id`, nil, &owner)
	f.scan(`INSERT INTO chats (owner_id, model, status) VALUES ($1, 'm', 'running') RETURNING id`, []any{owner}, &f.chat)
	f.exec(`INSERT INTO chat_messages (chat_id, role, content) VALUES ($1, 'user', '[{"type":"text","text":"hi"}]')`, f.chat)
	return f
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.pool.Exec(context.Background(), sql, args...); err != nil {
		f.t.Fatalf("%s: %v", firstLine(sql), err)
	}
}

func (f *fixture) scan(sql string, args []any, dst ...any) {
	f.t.Helper()
	if err := f.pool.QueryRow(context.Background(), sql, args...).Scan(dst...); err != nil {
		f.t.Fatalf("%s: %v", firstLine(sql), err)
	}
}

func (f *fixture) counters() counters {
	f.t.Helper()
	var c counters
	f.scan(`SELECT snapshot_version, history_version, generation_attempt FROM chats WHERE id = $1`,
		[]any{f.chat}, &c.Snapshot, &c.History, &c.Attempt)
	return c
}

// pendingRequest inserts a pending structured request for the chat.
func (f *fixture) pendingRequest() uuid.UUID {
	f.t.Helper()
	id := uuid.New()
	f.exec(`INSERT INTO structured_requests (request_id, chat_id, name, schema) VALUES ($1, $2, 'r', '{"type":"object"}')`, id, f.chat)
	return id
}

// tx runs fn in a transaction and returns its error (commit or fn's).
func (f *fixture) tx(fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(context.Background(), f.pool, fn)
}

const receiptSQL = `INSERT INTO chat_messages (chat_id, role, kind, visibility, content, structured_request_id)
VALUES ($1, 'assistant', 'receipt', 'user', '[{"type":"text","text":"done"}]', $2) RETURNING id, revision`

func finish(ctx context.Context, tx pgx.Tx, req uuid.UUID, receipt int64) error {
	_, err := tx.Exec(ctx, `UPDATE structured_requests SET status = 'succeeded', receipt_message_id = $2 WHERE request_id = $1`, req, receipt)
	return err
}

// wantSQLError: err is the database refusing by the named constraint.
func wantSQLError(t *testing.T, err error, name store.Constraint) {
	t.Helper()
	if !store.IsConstraint(err, name) {
		t.Fatalf("want a violation of %s, got %v", name, err)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func TestReceiptOnlyInsertDoesNotFence(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.pendingRequest()
	f.exec(`UPDATE chats SET generation_attempt = 2 WHERE id = $1`, f.chat)
	before := f.counters()
	if before.Attempt != 2 {
		t.Fatalf("setup: attempt = %d", before.Attempt)
	}

	var receipt, revision int64
	err := f.tx(func(tx pgx.Tx) error {
		ctx := context.Background()
		if err := tx.QueryRow(ctx, receiptSQL, f.chat, req).Scan(&receipt, &revision); err != nil {
			return err
		}
		return finish(ctx, tx, req, receipt)
	})
	if err != nil {
		t.Fatal(err)
	}
	after := f.counters()
	if after.Snapshot != before.Snapshot+1 {
		t.Errorf("snapshot_version = %d, want %d (bumped once)", after.Snapshot, before.Snapshot+1)
	}
	if revision != after.Snapshot {
		t.Errorf("receipt revision = %d, want the new snapshot %d", revision, after.Snapshot)
	}
	if after.History != before.History {
		t.Errorf("history_version moved %d -> %d on a receipt-only insert", before.History, after.History)
	}
	if after.Attempt != 2 {
		t.Errorf("generation_attempt reset to %d on a receipt-only insert", after.Attempt)
	}
}

func TestMixedReceiptAndMessageStatementFences(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.pendingRequest()
	f.exec(`UPDATE chats SET generation_attempt = 3 WHERE id = $1`, f.chat)
	before := f.counters()

	err := f.tx(func(tx pgx.Tx) error {
		ctx := context.Background()
		var receipt int64
		err := tx.QueryRow(ctx, `INSERT INTO chat_messages (chat_id, role, kind, visibility, content, structured_request_id)
			VALUES ($1, 'assistant', 'receipt', 'user', '[]', $2),
			       ($1, 'assistant', 'message', 'both', '[{"type":"text","text":"x"}]', NULL)
			RETURNING id`, f.chat, req).Scan(&receipt)
		if err != nil {
			return err
		}
		return finish(ctx, tx, req, receipt)
	})
	if err != nil {
		t.Fatal(err)
	}
	after := f.counters()
	if after.History != after.Snapshot || after.History == before.History {
		t.Errorf("history_version = %d (snapshot %d, before %d): a mixed batch must fence", after.History, after.Snapshot, before.History)
	}
	if after.Attempt != 0 {
		t.Errorf("generation_attempt = %d, want reset to 0", after.Attempt)
	}
}

func TestControlAndModelOnlyInsertsFence(t *testing.T) {
	t.Parallel()
	for _, row := range []string{
		`INSERT INTO chat_messages (chat_id, role, kind, visibility, content) VALUES ($1, 'user', 'control', 'user', '[]')`,
		`INSERT INTO chat_messages (chat_id, role, kind, visibility, content) VALUES ($1, 'user', 'message', 'model', '[]')`,
		`INSERT INTO chat_messages (chat_id, role, kind, visibility, content) VALUES ($1, 'assistant', 'message', 'user', '[]')`,
	} {
		f := newFixture(t)
		f.exec(`UPDATE chats SET generation_attempt = 1 WHERE id = $1`, f.chat)
		before := f.counters()
		f.exec(row, f.chat)
		after := f.counters()
		if after.History == before.History || after.Attempt != 0 {
			t.Errorf("%s: history %d -> %d, attempt %d: only receipts are exempt", row, before.History, after.History, after.Attempt)
		}
	}
}

func TestUpdateAndSoftDeleteFence(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, stmt := range []string{
		`UPDATE chat_messages SET content = '[{"type":"text","text":"edited"}]' WHERE chat_id = $1`,
		`UPDATE chat_messages SET compressed = true WHERE chat_id = $1`,
		`UPDATE chat_messages SET deleted = true WHERE chat_id = $1`,
	} {
		f.exec(`UPDATE chats SET generation_attempt = 4 WHERE id = $1`, f.chat)
		before := f.counters()
		f.exec(stmt, f.chat)
		after := f.counters()
		if after.History != after.Snapshot || after.History == before.History || after.Attempt != 0 {
			t.Errorf("%s: history %d -> %d (snapshot %d), attempt %d: must fence", stmt, before.History, after.History, after.Snapshot, after.Attempt)
		}
	}

	// A no-op update changes nothing, so it neither bumps nor fences.
	before := f.counters()
	f.exec(`UPDATE chat_messages SET deleted = deleted WHERE chat_id = $1`, f.chat)
	if after := f.counters(); after != before {
		t.Errorf("no-op update moved counters %+v -> %+v", before, after)
	}
}

func TestReceiptsAreImmutable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.pendingRequest()
	var receipt, rev int64
	if err := f.tx(func(tx pgx.Tx) error {
		if err := tx.QueryRow(context.Background(), receiptSQL, f.chat, req).Scan(&receipt, &rev); err != nil {
			return err
		}
		return finish(context.Background(), tx, req, receipt)
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err := f.pool.Exec(ctx, `UPDATE chat_messages SET content = '[]' WHERE id = $1`, receipt)
	wantSQLError(t, err, store.MessagesReceiptImmutable)
	_, err = f.pool.Exec(ctx, `UPDATE chat_messages SET deleted = true WHERE id = $1`, receipt)
	wantSQLError(t, err, store.MessagesReceiptImmutable)
	_, err = f.pool.Exec(ctx, `DELETE FROM chat_messages WHERE id = $1`, receipt)
	wantSQLError(t, err, store.MessagesNoDelete)

	// Whole-chat deletion still removes everything.
	f.exec(`DELETE FROM chats WHERE id = $1`, f.chat)
	var left int
	f.scan(`SELECT (SELECT count(*) FROM chat_messages) + (SELECT count(*) FROM structured_requests)`, nil, &left)
	if left != 0 {
		t.Errorf("%d rows survived the chat's deletion", left)
	}
}

func TestReceiptShapeIsEnforced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.pendingRequest()
	for _, shape := range []struct{ role, visibility string }{
		{"user", "user"}, {"assistant", "both"}, {"assistant", "model"}, {"tool", "user"},
	} {
		_, err := f.pool.Exec(context.Background(), `INSERT INTO chat_messages (chat_id, role, kind, visibility, content, structured_request_id)
			VALUES ($1, $2, 'receipt', $3, '[]', $4)`, f.chat, shape.role, shape.visibility, req)
		wantSQLError(t, err, store.MessagesReceiptShape)
	}
	_, err := f.pool.Exec(context.Background(), `INSERT INTO chat_messages (chat_id, role, kind, visibility, content)
		VALUES ($1, 'assistant', 'receipt', 'user', '[]')`, f.chat)
	wantSQLError(t, err, store.MessagesReceiptShape)
}

func TestOneReceiptPerRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.pendingRequest()
	// Two receipts in one transaction hit the unique index directly.
	err := f.tx(func(tx pgx.Tx) error {
		ctx := context.Background()
		var id, rev int64
		if err := tx.QueryRow(ctx, receiptSQL, f.chat, req).Scan(&id, &rev); err != nil {
			return err
		}
		return tx.QueryRow(ctx, receiptSQL, f.chat, req).Scan(&id, &rev)
	})
	wantSQLError(t, err, store.MessagesOneReceiptPerRequest)

	// After a committed receipt, another one is refused too.
	if err := f.tx(func(tx pgx.Tx) error {
		var id, rev int64
		if err := tx.QueryRow(context.Background(), receiptSQL, f.chat, req).Scan(&id, &rev); err != nil {
			return err
		}
		return finish(context.Background(), tx, req, id)
	}); err != nil {
		t.Fatal(err)
	}
	var id, rev int64
	err = f.pool.QueryRow(context.Background(), receiptSQL, f.chat, req).Scan(&id, &rev)
	wantSQLError(t, err, store.MessagesReceiptNeedsPending)
}

func TestReceiptMustCloseItsRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.pendingRequest()
	// A receipt committed without finishing the ledger row fails at commit.
	err := f.tx(func(tx pgx.Tx) error {
		var id, rev int64
		return tx.QueryRow(context.Background(), receiptSQL, f.chat, req).Scan(&id, &rev)
	})
	wantSQLError(t, err, store.MessagesReceiptClosesRequest)
	var n int
	f.scan(`SELECT count(*) FROM chat_messages WHERE kind = 'receipt'`, nil, &n)
	if n != 0 {
		t.Fatalf("%d receipts survived a failed commit", n)
	}
}

func TestLedgerGuard(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()

	// pending -> succeeded without a receipt.
	req := f.pendingRequest()
	_, err := f.pool.Exec(ctx, `UPDATE structured_requests SET status = 'succeeded' WHERE request_id = $1`, req)
	wantSQLError(t, err, store.RequestsFinishWithReceipt)
	_, err = f.pool.Exec(ctx, `UPDATE structured_requests SET status = 'succeeded', receipt_message_id = (SELECT min(id) FROM chat_messages) WHERE request_id = $1`, req)
	wantSQLError(t, err, store.RequestsFinishWithReceipt)

	// Born finished.
	_, err = f.pool.Exec(ctx, `INSERT INTO structured_requests (request_id, chat_id, name, schema, rejections) VALUES ($1, $2, 'r', '{}', 1)`, uuid.New(), f.chat)
	wantSQLError(t, err, store.RequestsStartPending)

	// Counters only grow; the definition never changes.
	f.exec(`UPDATE structured_requests SET rejections = 2 WHERE request_id = $1`, req)
	_, err = f.pool.Exec(ctx, `UPDATE structured_requests SET rejections = 1 WHERE request_id = $1`, req)
	wantSQLError(t, err, store.RequestsCountersGrow)
	_, err = f.pool.Exec(ctx, `UPDATE structured_requests SET schema = '{"type":"string"}' WHERE request_id = $1`, req)
	wantSQLError(t, err, store.RequestsDefinitionImmutable)

	// Finish properly, then nothing changes any more.
	if err := f.tx(func(tx pgx.Tx) error {
		var id, rev int64
		if err := tx.QueryRow(ctx, receiptSQL, f.chat, req).Scan(&id, &rev); err != nil {
			return err
		}
		return finish(ctx, tx, req, id)
	}); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`UPDATE structured_requests SET status = 'failed', error_code = 'not_produced' WHERE request_id = $1`,
		`UPDATE structured_requests SET steps = steps + 1 WHERE request_id = $1`,
		`UPDATE structured_requests SET candidate = '1', candidate_tool_call_id = 'c' WHERE request_id = $1`,
		`UPDATE structured_requests SET updated_at = now() WHERE request_id = $1`,
		`DELETE FROM structured_requests WHERE request_id = $1`,
	} {
		_, err := f.pool.Exec(ctx, stmt, req)
		if err == nil {
			t.Errorf("%s: a finished request changed", stmt)
		}
	}
	var status string
	var finished *time.Time
	f.scan(`SELECT status, finished_at FROM structured_requests WHERE request_id = $1`, []any{req}, &status, &finished)
	if status != "succeeded" || finished == nil {
		t.Errorf("status %q finished_at %v", status, finished)
	}
}

func TestRevisionIsAssignedByTheDatabase(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.pool.Exec(ctx, `INSERT INTO chat_messages (chat_id, role, content, revision) VALUES ($1, 'user', '[]', 99)`, f.chat)
	wantSQLError(t, err, store.MessagesRevisionByDatabase)
	_, err = f.pool.Exec(ctx, `UPDATE chat_messages SET revision = 99 WHERE chat_id = $1`, f.chat)
	wantSQLError(t, err, store.MessagesRevisionByDatabase)

	// snapshot_version cannot be set either: any write advances it by one.
	before := f.counters()
	f.exec(`UPDATE chats SET snapshot_version = 1000, title = 't' WHERE id = $1`, f.chat)
	if after := f.counters(); after.Snapshot != before.Snapshot+1 {
		t.Errorf("snapshot_version = %d, want %d", after.Snapshot, before.Snapshot+1)
	}
}

func TestOneSnapshotPerTransaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	before := f.counters()
	var revs []int64
	err := f.tx(func(tx pgx.Tx) error {
		ctx := context.Background()
		for i := 0; i < 3; i++ {
			var rev int64
			if err := tx.QueryRow(ctx, `INSERT INTO chat_messages (chat_id, role, content) VALUES ($1, 'assistant', '[]') RETURNING revision`, f.chat).Scan(&rev); err != nil {
				return err
			}
			revs = append(revs, rev)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO chat_queued_messages (chat_id, content) VALUES ($1, '[]')`, f.chat); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE chats SET title = 'x' WHERE id = $1`, f.chat)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	after := f.counters()
	if after.Snapshot != before.Snapshot+1 {
		t.Fatalf("snapshot %d -> %d, want one bump", before.Snapshot, after.Snapshot)
	}
	for _, r := range revs {
		if r != after.Snapshot {
			t.Errorf("revision %d, want %d", r, after.Snapshot)
		}
	}

	// A lease renewal is not a change.
	f.exec(`UPDATE chats SET worker_id = gen_random_uuid(), lease_expires_at = now() WHERE id = $1`, f.chat)
	owned := f.counters()
	f.exec(`UPDATE chats SET lease_expires_at = now() + interval '1 minute' WHERE id = $1`, f.chat)
	if renewed := f.counters(); renewed != owned {
		t.Errorf("lease renewal moved counters %+v -> %+v", owned, renewed)
	}
}

func TestRolledBackTransactionLeavesNoTrace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.pendingRequest()
	before := f.counters()
	var n0 int
	f.scan(`SELECT count(*) FROM chat_messages`, nil, &n0)
	errRollback := errors.New("rollback")
	err := f.tx(func(tx pgx.Tx) error {
		ctx := context.Background()
		var id, rev int64
		if err := tx.QueryRow(ctx, receiptSQL, f.chat, req).Scan(&id, &rev); err != nil {
			return err
		}
		if err := finish(ctx, tx, req, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO chat_messages (chat_id, role, content) VALUES ($1, 'user', '[]')`, f.chat); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if after := f.counters(); after != before {
		t.Errorf("counters %+v -> %+v after rollback", before, after)
	}
	var n int
	var status string
	f.scan(`SELECT count(*) FROM chat_messages`, nil, &n)
	f.scan(`SELECT status FROM structured_requests WHERE request_id = $1`, []any{req}, &status)
	if n != n0 || status != "pending" {
		t.Errorf("messages %d -> %d, request %s after rollback", n0, n, status)
	}
}

func TestChatStatusTransitionsAndOwnership(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.pool.Exec(ctx, `UPDATE chats SET status = 'requires_action', worker_id = gen_random_uuid(), lease_expires_at = now() WHERE id = $1`, f.chat)
	wantSQLError(t, err, store.ChatsOwnedOnlyWhileRunnable)
	f.exec(`UPDATE chats SET status = 'waiting' WHERE id = $1`, f.chat)
	_, err = f.pool.Exec(ctx, `UPDATE chats SET status = 'requires_action' WHERE id = $1`, f.chat)
	wantSQLError(t, err, store.ChatsStatusTransition)
	_, err = f.pool.Exec(ctx, `UPDATE chats SET history_version = 0 WHERE id = $1`, f.chat)
	wantSQLError(t, err, store.ChatsHistoryVersionForward)
}

func TestQueueIsCapped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i := 0; i < 20; i++ {
		f.exec(`INSERT INTO chat_queued_messages (chat_id, content) VALUES ($1, '[]')`, f.chat)
	}
	_, err := f.pool.Exec(context.Background(), `INSERT INTO chat_queued_messages (chat_id, content) VALUES ($1, '[]')`, f.chat)
	if !store.IsConstraint(err, store.QueueAtMost20) {
		t.Fatalf("21st queued message: %v, want %s", err, store.QueueAtMost20)
	}
}

func TestNotificationsFollowCommits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `LISTEN chatd_chat`); err != nil {
		t.Fatal(err)
	}
	// A stream follows the chat (changes nobody follows are not announced:
	// internal/notify's registry tests).
	if _, err := conn.Exec(ctx, `INSERT INTO chat_followers (owner_id, chat_id, hub_id)
		SELECT owner_id, id, gen_random_uuid() FROM chats WHERE id = $1`, f.chat); err != nil {
		t.Fatal(err)
	}

	// A rolled-back change notifies nobody; a committed one notifies once
	// with the snapshot it produced.
	_ = f.tx(func(tx pgx.Tx) error {
		_, _ = tx.Exec(ctx, `UPDATE chats SET title = 'rolled back' WHERE id = $1`, f.chat)
		return errors.New("rollback")
	})
	err = f.tx(func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE chats SET title = 'a' WHERE id = $1`, f.chat); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO chat_messages (chat_id, role, content) VALUES ($1, 'assistant', '[]')`, f.chat)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := conn.Conn().WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := f.counters()
	fields := strings.Fields(n.Payload)
	if len(fields) != 3 || fields[0] != f.chat.String() || fields[1] != strconv.FormatInt(c.Snapshot, 10) {
		t.Fatalf("payload %q, want chat %s snapshot %d", n.Payload, f.chat, c.Snapshot)
	}
	// Nothing else is pending: a second wait times out quickly.
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if n2, err := conn.Conn().WaitForNotification(short); err == nil {
		t.Fatalf("unexpected second notification %q", n2.Payload)
	}
}

// TestVocabularyMatchesChecks: the CHECK constraints on the state and code
// columns allow exactly the values of the Go types that carry them.
func TestVocabularyMatchesChecks(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	for _, tc := range []struct {
		constraint string
		want       []string
	}{
		{"chats_status_check", strs(client.ChatStatuses())},
		{"chats_mode_check", strs(client.ChatModes())},
		{"chat_messages_role_check", strs(client.Roles())},
		{"structured_requests_status_check", strs(client.RequestStatuses())},
		{"structured_requests_error_code_check", strs(client.ErrorCodes())},
	} {
		var def string
		if err := pool.QueryRow(t.Context(), `SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = $1`, tc.constraint).
			Scan(&def); err != nil {
			t.Fatalf("%s: %v", tc.constraint, err)
		}
		var got []string
		for _, m := range regexp.MustCompile(`'([^']*)'::text`).FindAllStringSubmatch(def, -1) {
			got = append(got, m[1])
		}
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s allows %v; the Go type has %v", tc.constraint, got, tc.want)
		}
	}
}

func strs[S ~string](vs []S) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
