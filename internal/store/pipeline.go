package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/chatd/chatd/internal/dbgen"
)

// pipeline sends sqlc queries whose results do not decide what follows in
// one round trip (a pgx.Batch): they run in order, each seeing the ones
// before, and the first that fails skips the rest and fails the batch. A
// generated function runs twice: against a recorder, which learns its SQL
// and arguments when queued, and against its result when the batch is read,
// so the queries and their scans stay sqlc's.
type pipeline struct{ b pgx.Batch }

// pipeOne queues call (a :one query); done gets its result, in queue order,
// and its error fails the batch. pgx.ErrNoRows reaches done like any result.
func pipeOne[T any](p *pipeline, call func(dbgen.DBTX) (T, error), done func(T, error) error) {
	var r recorder
	_, _ = call(&r)
	p.b.Queue(r.sql, r.args...).QueryRow(func(row pgx.Row) error {
		return done(call(resultDB{row: row}))
	})
}

// pipeMany queues call (a :many query); done gets its result.
func pipeMany[T any](p *pipeline, call func(dbgen.DBTX) ([]T, error), done func([]T, error) error) {
	var r recorder
	_, _ = call(&r)
	p.b.Queue(r.sql, r.args...).Query(func(rows pgx.Rows) error {
		return done(call(resultDB{rows: rows}))
	})
}

// pipeExec queues call (an :exec or :execrows query); done gets its
// error, nil unless the statement ran and its result could not be read.
func pipeExec(p *pipeline, call func(dbgen.DBTX) error, done func(error) error) {
	var r recorder
	_ = call(&r)
	p.b.Queue(r.sql, r.args...).Exec(func(tag pgconn.CommandTag) error {
		return done(call(resultDB{tag: tag}))
	})
}

// send runs the queued queries in tx, in one round trip.
func (p *pipeline) send(ctx context.Context, tx pgx.Tx) error {
	if p.b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, &p.b).Close()
}

// errRecorded stops a generated function at its recorder: the query was
// queued, not run.
var errRecorded = errors.New("query recorded for a pipeline")

// recorder is a dbgen.DBTX that keeps the one query it is given.
type recorder struct {
	sql  string
	args []any
}

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.sql, r.args = sql, args
	return pgconn.CommandTag{}, errRecorded
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.sql, r.args = sql, args
	return nil, errRecorded
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.sql, r.args = sql, args
	return errRow{}
}

type errRow struct{}

func (errRow) Scan(...any) error { return errRecorded }

// resultDB is a dbgen.DBTX that answers with a batch's result.
type resultDB struct {
	row  pgx.Row
	rows pgx.Rows
	tag  pgconn.CommandTag
}

func (d resultDB) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) { return d.tag, nil }

func (d resultDB) Query(context.Context, string, ...any) (pgx.Rows, error) { return d.rows, nil }

func (d resultDB) QueryRow(context.Context, string, ...any) pgx.Row { return d.row }
