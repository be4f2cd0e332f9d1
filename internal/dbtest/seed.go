package dbtest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/bench"
)

// SeedChats creates the user named name (if needed) and n chats of theirs
// at rest, the newest last changed age ago, each with a structured request
// that succeeded and text in its user message, in one statement
// (bench.SeedChats): for tests that need many chats fast, which the store
// makes at a few transactions each. It returns the user's id.
func SeedChats(tb testing.TB, pool *pgxpool.Pool, name string, n int, age time.Duration, text string) uuid.UUID {
	tb.Helper()
	var owner uuid.UUID
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		owner, err = bench.SeedChats(context.Background(), tx, name, n, age, text)
		return err
	})
	if err != nil {
		tb.Fatalf("dbtest: seed %d chats: %v", n, err)
	}
	return owner
}
