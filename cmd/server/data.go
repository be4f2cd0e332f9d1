package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/chatd/chatd/internal/export"
	"github.com/chatd/chatd/internal/store"
)

// The operator's data commands: chatd user erase, chatd export, chatd
// import. They work on the database directly, like chatd token.

func userFlags(stderr io.Writer) *flags {
	return newFlags("user", "chatd user erase NAME [flags]", stderr)
}

func exportFlags(stderr io.Writer) (*flags, *string, *string) {
	f := newFlags("export", "chatd export --user NAME [--output FILE] [flags]", stderr)
	return f, f.String("user", "CHATD_USER", "", "the user whose chats to export"),
		f.String("output", "CHATD_EXPORT_OUTPUT", "", "write the export to this file (default: standard output)")
}

func importFlags(stderr io.Writer) (*flags, *string) {
	f := newFlags("import", "chatd import [--user NAME] FILE|- [flags]", stderr)
	return f, f.String("user", "CHATD_USER", "", "import the chats for this user (created if needed; default: the export's user)")
}

// openStore opens the database of a data command, checked migrated.
func openStore(ctx context.Context, db databaseFlags, stderr io.Writer) (*store.Store, func(), error) {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := openDatabase(ctx, db, 4, logger)
	if err != nil {
		return nil, nil, err
	}
	if err := ensureMigrated(ctx, d, false, logger); err != nil {
		d.Close()
		return nil, nil, err
	}
	return store.New(d.pool), d.Close, nil
}

// usageError is a command line the command cannot run (exit 2).
func usageError(f *flags, err error) error {
	f.Usage()
	return &exitError{code: 2, err: err}
}

func cmdUser(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := userFlags(stderr)
	if len(args) == 0 || args[0] != "erase" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			f.Usage()
			return flag.ErrHelp
		}
		return usageError(f, errors.New("user: say erase"))
	}
	db := addToolDatabaseFlags(f, stderr)
	rest := args[1:]
	var name []string
	if len(rest) > 0 && len(rest[0]) > 0 && rest[0][0] != '-' {
		name, rest = rest[:1], rest[1:]
	}
	if err := f.Parse(rest); err != nil {
		return err
	}
	if name = append(name, f.Args()...); len(name) != 1 {
		return usageError(f, errors.New("user erase: name one user"))
	}
	st, closeDB, err := openStore(ctx, db, stderr)
	if err != nil {
		return err
	}
	defer closeDB()
	e, err := st.EraseUser(ctx, name[0])
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("user erase: no user %q", name[0])
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(e.Report())
}

func cmdExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, user, output := exportFlags(stderr)
	db := addToolDatabaseFlags(f, stderr)
	if err := f.Parse(args); err != nil {
		return err
	}
	switch {
	case *user == "":
		return usageError(f, errors.New("export: --user is required"))
	case f.NArg() > 0:
		return usageError(f, fmt.Errorf("export: unexpected argument %q", f.Arg(0)))
	}
	st, closeDB, err := openStore(ctx, db, stderr)
	if err != nil {
		return err
	}
	defer closeDB()
	u, err := st.FindUser(ctx, *user)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("export: no user %q", *user)
	}
	if err != nil {
		return err
	}
	w := stdout
	if *output != "" {
		file, err := os.Create(*output)
		if err != nil {
			return err
		}
		defer file.Close()
		w = file
	}
	n, err := export.User(ctx, st, u.ID, u.Name, w)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "chatd: exported %d chats, %d messages, %d structured requests, %d queued messages of %s\n",
		n.Chats, n.Messages, n.Requests, n.Queued, u.Name)
	return nil
}

func cmdImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, user := importFlags(stderr)
	db := addToolDatabaseFlags(f, stderr)
	var file []string
	if len(args) > 0 && (args[0] == "-" || len(args[0]) > 0 && args[0][0] != '-') {
		file, args = args[:1], args[1:]
	}
	if err := f.Parse(args); err != nil {
		return err
	}
	if file = append(file, f.Args()...); len(file) != 1 {
		return usageError(f, errors.New("import: name one file (- for standard input)"))
	}
	in := io.Reader(os.Stdin)
	if file[0] != "-" {
		r, err := os.Open(file[0])
		if err != nil {
			return err
		}
		defer r.Close()
		in = r
	}
	st, closeDB, err := openStore(ctx, db, stderr)
	if err != nil {
		return err
	}
	defer closeDB()
	n, err := export.Import(ctx, st, in, *user)
	fmt.Fprintf(stdout, "imported %d chats, %d messages, %d structured requests\n", n.Chats, n.Messages, n.Requests)
	if errors.Is(err, store.ErrInvalidUserName) {
		return fmt.Errorf("import: %w", err)
	}
	return err
}
