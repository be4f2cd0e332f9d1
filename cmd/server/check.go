package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/check"
	"github.com/chatd/chatd/internal/migrate"
)

// checkFlags defines the flags of chatd check.
func checkFlags(stderr io.Writer) (*flags, databaseFlags) {
	f := newFlags("check", "chatd check [flags]", stderr)
	return f, addToolDatabaseFlags(f, stderr)
}

// cmdCheck runs the invariant checks of sql/check.sql and prints every
// violation. Exit status: 0 clean, 1 violations (or the checks could not
// run), 2 usage errors.
func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, db := checkFlags(stderr)
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: 2, err: err}
	}
	if f.NArg() > 0 {
		return &exitError{code: 2, err: fmt.Errorf("check: unexpected argument %q", f.Arg(0))}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := openDatabase(ctx, db, 2, logger)
	if err != nil {
		return err
	}
	defer d.Close()
	err = d.sessions(ctx, func(pool *pgxpool.Pool) error {
		m, err := migrate.New(pool)
		if err != nil {
			return err
		}
		defer func() { _ = m.Close() }()
		pending, err := m.Pending(ctx)
		if err != nil {
			return fmt.Errorf("check migrations: %w", err)
		}
		if pending {
			return errors.New("the database has pending migrations: run `chatd migrate up` first; the checks expect the current schema")
		}
		return nil
	})
	if err != nil {
		return err
	}
	rep, err := check.Run(ctx, d.pool)
	if err != nil {
		return err
	}
	for _, c := range rep.Checks {
		vs := rep.Of(c.Name)
		if len(vs) == 0 {
			fmt.Fprintf(stdout, "ok    %s\n", c.Name)
			continue
		}
		fmt.Fprintf(stdout, "FAIL  %s (%d)\n", c.Name, len(vs))
		for _, v := range vs {
			fmt.Fprintf(stdout, "      %s\n", v)
		}
	}
	fmt.Fprintf(stdout, "%d checks, %d violations\n", len(rep.Checks), len(rep.Violations))
	if !rep.Clean() {
		return &exitError{code: 1, err: fmt.Errorf("%d invariant violations", len(rep.Violations))}
	}
	return nil
}
