package store_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/store"
)

// TestTxCounter checks the counter against what PostgreSQL counts as
// transactions: explicit ones, autocommit statements, and batches; and the
// round trips they took.
func TestTxCounter(t *testing.T) {
	t.Parallel()
	cfg := dbtest.Config(t)
	cfg.MaxConns = 1
	txs := store.Trace(cfg)
	pool := dbtest.NewPool(t, cfg)
	ctx := t.Context()

	// Two statements in an explicit transaction: one, named after the first.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "-- name: First :exec\nSELECT 1"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "SELECT 2")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A named purpose wins; a statement alone is a transaction.
	if _, err := pool.Exec(store.WithPurpose(ctx, "probe"), "SELECT 3"); err != nil {
		t.Fatal(err)
	}
	// A failed statement rolls back.
	if _, err := pool.Exec(ctx, "SELECT 1/0"); err == nil {
		t.Fatal("division by zero succeeded")
	}
	// A batch outside a transaction is one implicit transaction.
	b := &pgx.Batch{}
	b.Queue("-- name: Batched :one\nSELECT 4")
	b.Queue("SELECT 5")
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	// A batch inside a transaction: one round trip for its statements.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "-- name: Piped :exec\nSELECT 7"); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue("SELECT 8")
		b.Queue("SELECT 9")
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	// A transaction begun in the round trip of its first statements.
	b = &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue("-- name: Begun :one\nSELECT 10")
	b.Queue("SELECT 11")
	br := pool.SendBatch(ctx, b)
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := br.Tx().Exec(ctx, "SELECT 12"); err != nil {
		t.Fatal(err)
	}
	if err := br.Tx().Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A rolled back transaction.
	errStop := errors.New("stop")
	err = pgx.BeginFunc(store.WithPurpose(ctx, "undone"), pool, func(tx pgx.Tx) error {
		_, _ = tx.Exec(ctx, "SELECT 6")
		return errStop
	})
	if !errors.Is(err, errStop) {
		t.Fatal(err)
	}

	got := txs.Snapshot()
	want := map[string]store.TxStat{
		"First":   {Commits: 1, Statements: 2, RoundTrips: 4},
		"probe":   {Commits: 1, Statements: 1, RoundTrips: 1},
		"select":  {Rollbacks: 1, Statements: 1, RoundTrips: 1},
		"Batched": {Commits: 1, Statements: 2, RoundTrips: 1},
		"undone":  {Rollbacks: 1, Statements: 1, RoundTrips: 3},
		"Piped":   {Commits: 1, Statements: 3, RoundTrips: 4},
		"Begun":   {Commits: 1, Statements: 3, RoundTrips: 3},
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %+v, want %+v", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("purposes %v, want %v", got, want)
	}
	if txs.Opened() != 1 {
		t.Errorf("%d connections opened, want 1", txs.Opened())
	}
}

// A token is looked up in the database once per TokenCacheTTL; an unknown
// one every time.
func TestTokenLookupsAreCached(t *testing.T) {
	t.Parallel()
	cfg := dbtest.Config(t)
	txs := store.Trace(cfg)
	st := store.New(dbtest.NewPool(t, cfg))
	ctx := t.Context()
	token, err := st.CreateToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if u, err := st.Authenticate(ctx, token); err != nil || u.Name != "alice" {
			t.Fatalf("authenticate: %+v, %v", u, err)
		}
	}
	for range 2 {
		if _, err := st.Authenticate(ctx, token+"x"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown token: %v", err)
		}
	}
	if n := txs.Snapshot()["TokenAuthenticate"]; n.Commits != 3 {
		t.Fatalf("%d token lookups reached the database, want 1 + 2 for the unknown token", n.Commits)
	}
}

// TestTokenLookupsCoalesce: requests that miss the cache on one token at
// once share a single database lookup, so that the expiry of a token many
// clients share does not send the pool one lookup per request.
func TestTokenLookupsCoalesce(t *testing.T) {
	t.Parallel()
	cfg := dbtest.Config(t)
	txs := store.Trace(cfg)
	st := store.New(dbtest.NewPool(t, cfg))
	ctx := t.Context()
	token, err := st.CreateToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	const requests = 50
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, requests)
	for range requests {
		wg.Go(func() {
			<-start
			if u, err := st.Authenticate(ctx, token); err != nil || u.Name != "alice" {
				errs <- fmt.Errorf("authenticate: %+v, %v", u, err)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := txs.Snapshot()["TokenAuthenticate"]; n.Commits >= requests/2 {
		t.Fatalf("%d lookups reached the database for %d concurrent requests on one token, want few", n.Commits, requests)
	}
}
