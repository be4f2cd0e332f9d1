package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/store"
)

// The classification runs on errors produced by real failures, not on
// hand-made ones, except for server codes no test can provoke cheaply.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.New(t)

	// Nothing listens on port 1: the pool cannot connect.
	dead, err := pgxpool.New(ctx, "postgres://chatd@127.0.0.1:1/chatd?connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	_, refused := store.New(dead).CreateToken(ctx, "alice")

	// A database that does not accept connections (SQLSTATE 55000 inside
	// the connect error).
	closedURL := dbtest.NewURL(t)
	closedCfg, err := pgx.ParseConfig(closedURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{closedCfg.Database}.Sanitize()+" ALLOW_CONNECTIONS false"); err != nil {
		t.Fatal(err)
	}
	_, shut := pgx.Connect(ctx, closedURL)

	// A connection the server terminated (as on a restart or failover).
	conn, err := pgx.Connect(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var terminated bool
	if err := pool.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, conn.PgConn().PID()).Scan(&terminated); err != nil || !terminated {
		t.Fatalf("terminate: %v %v", terminated, err)
	}
	_, dropped := conn.Exec(ctx, `SELECT 1`)

	_, syntax := pool.Exec(ctx, `SELEC 1`)
	_, unique := pool.Exec(ctx, `INSERT INTO users (name) VALUES ('u'), ('u')`)
	noRows := pool.QueryRow(ctx, `SELECT 1 WHERE false`).Scan(new(int))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, gone := pool.Exec(cancelled, `SELECT 1`)

	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"connection terminated", dropped, true},
		{"database not accepting connections", shut, true},
		{"server shutting down (57P01)", &pgconn.PgError{Code: "57P01"}, true},
		{"server starting (57P03)", &pgconn.PgError{Code: "57P03"}, true},
		{"too many connections (53300)", &pgconn.PgError{Code: "53300"}, true},
		{"connection failure (08006)", &pgconn.PgError{Code: "08006"}, true},
		{"syntax error", syntax, false},
		{"unique violation", unique, false},
		{"no rows", noRows, false},
		{"caller cancelled", gone, false},
		{"nil", nil, false},
		{"other", errors.New("boom"), false},
	} {
		if tc.err == nil && tc.name != "nil" {
			t.Fatalf("%s: the failure did not happen", tc.name)
		}
		if got := store.Unavailable(tc.err); got != tc.want {
			t.Errorf("%s: Unavailable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
