package store

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lazyTx is a transaction that begins with the first statement or batch run
// in it: BEGIN and the statements queued in head go out with that batch, in
// one round trip. head's statements run first, and the first callback to
// fail fails the batch, so a guard queued there (a fenced lock) is judged
// before anything sent with it is used; what ran behind a guard that failed
// is rolled back with it, never committed.
type lazyTx struct {
	pgx.Tx  // nil until begun
	pool    *pgxpool.Pool
	purpose string // for the transaction counter (withPurpose)
	head    pipeline
	begun   bool
	err     error // of a begin that ran head alone
}

func newLazyTx(pool *pgxpool.Pool, purpose string) *lazyTx {
	t := &lazyTx{pool: pool, purpose: purpose}
	t.head.b.BeginTx(pgx.TxOptions{})
	return t
}

// begin sends head with more's queries behind it.
func (t *lazyTx) begin(ctx context.Context, more *pgx.Batch) pgx.BatchResults {
	t.begun = true
	b := &t.head.b
	if more != nil {
		b.QueuedQueries = append(b.QueuedQueries, more.QueuedQueries...)
	}
	br := t.pool.SendBatch(withPurpose(ctx, t.purpose), b)
	t.Tx = br.Tx()
	return br
}

// started begins the transaction with head alone, if nothing did yet.
func (t *lazyTx) started(ctx context.Context) error {
	if !t.begun {
		t.err = t.begin(ctx, nil).Close()
	}
	if t.err == nil && t.Tx == nil {
		t.err = pgx.ErrTxClosed
	}
	return t.err
}

func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if !t.begun {
		return t.begin(ctx, b)
	}
	if err := t.started(ctx); err != nil {
		return failedBatch{err}
	}
	return t.Tx.SendBatch(ctx, b)
}

func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.started(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.Tx.Exec(ctx, sql, args...)
}

func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.started(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Query(ctx, sql, args...)
}

func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.started(ctx); err != nil {
		return failedRow{err}
	}
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t *lazyTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.started(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Begin(ctx)
}

func (t *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.started(ctx); err != nil {
		return 0, err
	}
	return t.Tx.CopyFrom(ctx, table, columns, src)
}

func (t *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.started(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Prepare(ctx, name, sql)
}

// Commit begins (head's guard still decides) and commits.
func (t *lazyTx) Commit(ctx context.Context) error {
	if err := t.started(ctx); err != nil {
		return err
	}
	return t.Tx.Commit(ctx)
}

// Rollback ends the transaction, if it began, and hands its connection
// back.
func (t *lazyTx) Rollback(ctx context.Context) error {
	if t.Tx == nil {
		return nil
	}
	return t.Tx.Rollback(ctx)
}

func (t *lazyTx) Conn() *pgx.Conn {
	if t.started(context.Background()) != nil {
		return nil
	}
	return t.Tx.Conn()
}

func (t *lazyTx) LargeObjects() pgx.LargeObjects {
	if t.started(context.Background()) != nil {
		return pgx.LargeObjects{}
	}
	return t.Tx.LargeObjects()
}

// failedRow and failedBatch answer with the error that kept a statement
// from being sent.
type failedRow struct{ err error }

func (r failedRow) Scan(...any) error { return r.err }

type failedBatch struct{ err error }

func (b failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b failedBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b failedBatch) QueryRow() pgx.Row                { return failedRow(b) }
func (b failedBatch) Close() error                     { return b.err }
func (b failedBatch) Tx() pgx.Tx                       { return nil }
