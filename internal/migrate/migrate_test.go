package migrate_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/migrate"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestUpIfPendingLeavesCurrentTriggersAlone: a server started with
// --migrate next to running replicas must not re-apply current trigger
// files. Re-applying takes table locks (DROP TRIGGER takes ACCESS
// EXCLUSIVE), which queue behind the replicas' open transactions and
// deadlock with them (found by the crash test: restarted servers failed to
// start, and the other replica's commits failed, with "deadlock detected").
func TestUpIfPendingLeavesCurrentTriggersAlone(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m, err := migrate.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	// A replica's transaction is open on chat_messages.
	replica, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close(ctx)
	tx, err := replica.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE chat_messages IN ROW EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var appliedBefore time.Time
	if err := pool.QueryRow(ctx, "SELECT applied_at FROM chatd_trigger_state").Scan(&appliedBefore); err != nil {
		t.Fatal(err)
	}
	// Up would wait for that transaction; UpIfPending has nothing to do.
	upCtx, upCancel := context.WithTimeout(ctx, 10*time.Second)
	res, err := m.UpIfPending(upCtx)
	upCancel()
	if err != nil || len(res) != 0 {
		t.Fatalf("UpIfPending on a current database: %v %v", res, err)
	}
	var appliedAfter time.Time
	if err := pool.QueryRow(ctx, "SELECT applied_at FROM chatd_trigger_state").Scan(&appliedAfter); err != nil {
		t.Fatal(err)
	}
	if !appliedAfter.Equal(appliedBefore) {
		t.Fatalf("trigger files re-applied at %s", appliedAfter)
	}
	lockCtx, lockCancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = m.Up(lockCtx)
	lockCancel()
	if err == nil {
		t.Fatal("Up re-applied the trigger files while a transaction held chat_messages: the test no longer shows the lock")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// Stale trigger files are pending: UpIfPending applies them.
	if _, err := pool.Exec(ctx, "UPDATE chatd_trigger_state SET files_hash = 'stale'"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.UpIfPending(ctx); err != nil {
		t.Fatal(err)
	}
	if pending, err := m.Pending(ctx); err != nil || pending {
		t.Fatalf("after UpIfPending: pending %v %v", pending, err)
	}
}
