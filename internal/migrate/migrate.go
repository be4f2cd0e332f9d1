// Package migrate applies the embedded goose migrations and re-applies the
// idempotent trigger files after every `up`, in one transaction, recording a
// hash of them so a server can tell when the database is behind its binary.
package migrate

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	chatdsql "github.com/chatd/chatd/sql"
)

// Migrator runs migrations against one database.
type Migrator struct {
	pool *pgxpool.Pool
	db   *sql.DB
	p    *goose.Provider
}

// New returns a Migrator using pool. Close releases its database/sql handle.
func New(pool *pgxpool.Pool) (*Migrator, error) {
	db := stdlib.OpenDBFromPool(pool)
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, chatdsql.Migrations(),
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &Migrator{pool: pool, db: db, p: p}, nil
}

// Close releases the migrator's handle (not the pool).
func (m *Migrator) Close() error { return m.db.Close() }

// Result describes one applied or reverted migration.
type Result struct {
	Version   int64
	Name      string
	Direction string
}

// Up applies every pending migration, then the trigger files.
func (m *Migrator) Up(ctx context.Context) ([]Result, error) {
	res, err := m.p.Up(ctx)
	out := convert(res)
	if err != nil {
		return out, fmt.Errorf("migrate up: %w", err)
	}
	if err := ApplyTriggers(ctx, m.pool); err != nil {
		return out, err
	}
	return out, nil
}

// UpIfPending is Up when there is anything to apply (see Pending) and
// otherwise touches nothing. A server starting with --migrate uses it:
// re-applying trigger files that are already current would take table
// locks (DROP/CREATE TRIGGER) while replicas already running commit turns,
// deadlocking with their transactions and failing the start-up or their
// requests.
func (m *Migrator) UpIfPending(ctx context.Context) ([]Result, error) {
	pending, err := m.Pending(ctx)
	if err != nil || !pending {
		return nil, err
	}
	return m.Up(ctx)
}

// Down reverts the most recent migration.
func (m *Migrator) Down(ctx context.Context) (*Result, error) {
	r, err := m.p.Down(ctx)
	if err != nil {
		if errors.Is(err, goose.ErrNoNextVersion) {
			return nil, nil
		}
		return nil, fmt.Errorf("migrate down: %w", err)
	}
	out := convert([]*goose.MigrationResult{r})
	return &out[0], nil
}

// Status is one migration's state.
type Status struct {
	Version int64
	Name    string
	Applied bool
}

// Status lists every known migration and whether it is applied, plus whether
// the trigger files in the database match this binary's.
func (m *Migrator) Status(ctx context.Context) ([]Status, bool, error) {
	st, err := m.p.Status(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("migration status: %w", err)
	}
	out := make([]Status, 0, len(st))
	for _, s := range st {
		out = append(out, Status{Version: s.Source.Version, Name: s.Source.Path, Applied: s.State == goose.StateApplied})
	}
	current, err := triggersCurrent(ctx, m.pool)
	if err != nil {
		return out, false, err
	}
	return out, current, nil
}

// Pending reports whether `migrate up` has work to do: a migration not yet
// applied, or trigger files that differ from what the database last received.
func (m *Migrator) Pending(ctx context.Context) (bool, error) {
	pending, err := m.p.HasPending(ctx)
	if err != nil || pending {
		return pending, err
	}
	current, err := triggersCurrent(ctx, m.pool)
	return !current, err
}

func convert(rs []*goose.MigrationResult) []Result {
	out := make([]Result, 0, len(rs))
	for _, r := range rs {
		if r == nil {
			continue
		}
		out = append(out, Result{Version: r.Source.Version, Name: r.Source.Path, Direction: r.Direction})
	}
	return out
}

// ApplyTriggers runs every file in sql/triggers in lexical order inside one
// transaction and records their hash.
func ApplyTriggers(ctx context.Context, pool *pgxpool.Pool) error {
	files, hash, err := triggerFiles()
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, f := range files {
			if _, err := tx.Exec(ctx, f.body); err != nil {
				return fmt.Errorf("apply trigger file %s: %w", f.name, err)
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO chatd_trigger_state (files_hash) VALUES ($1)
			ON CONFLICT (singleton) DO UPDATE SET files_hash = EXCLUDED.files_hash, applied_at = now()`, hash)
		return err
	})
}

type triggerFile struct{ name, body string }

func triggerFiles() ([]triggerFile, string, error) {
	fsys := chatdsql.Triggers()
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, "", err
	}
	sort.Strings(names)
	h := sha256.New()
	out := make([]triggerFile, 0, len(names))
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
		out = append(out, triggerFile{name: n, body: string(b)})
	}
	return out, hex.EncodeToString(h.Sum(nil)), nil
}

func triggersCurrent(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	_, want, err := triggerFiles()
	if err != nil {
		return false, err
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('chatd_trigger_state') IS NOT NULL`).Scan(&exists); err != nil {
		return false, err
	}
	if !exists {
		return false, nil
	}
	var got string
	err = pool.QueryRow(ctx, `SELECT files_hash FROM chatd_trigger_state`).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return got == want, err
}
