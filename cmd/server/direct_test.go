package main

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/dbtest"
)

// readOnly is url whose sessions cannot write: a stand-in for a pooler
// that cannot hold what a migration needs, to tell which URL a command used.
func readOnly(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("options", "-c default_transaction_read_only=on")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads + as itself
	return u.String()
}

// TestDirectDatabaseURL, on a plain PostgreSQL: with --direct-database-url
// the pool uses no prepared statements, the listener connects to the
// direct URL, and migrations run there, not through --database-url; a
// direct URL on another database, or one that does not connect, stops the
// command at start-up saying which.
func TestDirectDatabaseURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.EmptyURL(t)
	pooled := readOnly(t, db)
	// Without the direct URL, the read-only sessions cannot migrate.
	if _, _, err := runCmd(ctx, "migrate", "up", "--database-url", pooled); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("migrate up on read-only sessions: %v, want a read-only error", err)
	}
	out, _, err := runCmd(ctx, "migrate", "up", "--database-url", pooled, "--direct-database-url", db)
	if err != nil || !strings.Contains(out, "trigger files applied") {
		t.Fatalf("migrate up with --direct-database-url: %v %q", err, out)
	}
	if _, _, err := runCmd(ctx, "migrate", "status", "--database-url", pooled, "--direct-database-url", db); err != nil {
		t.Fatalf("migrate status with --direct-database-url: %v", err)
	}

	logger := slog.New(slog.DiscardHandler)
	named := db + "&default_query_exec_mode=exec"
	for _, tc := range []struct {
		url, direct string
		mode        pgx.QueryExecMode
	}{
		{db, "", pgx.QueryExecModeCacheStatement},
		{db, db, pgx.QueryExecModeCacheDescribe},
		{named, db, pgx.QueryExecModeExec}, // the operator's choice
	} {
		d, err := openDatabase(ctx, databaseFlags{url: &tc.url, direct: &tc.direct}, 2, logger)
		if err != nil {
			t.Fatalf("direct %q: %v", tc.direct, err)
		}
		if got := d.pool.Config().ConnConfig.DefaultQueryExecMode; got != tc.mode {
			t.Errorf("direct %q: the pool's exec mode is %v, want %v", tc.direct, got, tc.mode)
		}
		if got := d.listen.RuntimeParams["options"]; got != "" {
			t.Errorf("direct %q: the listener connects with the pool's options %q", tc.direct, got)
		}
		d.Close()
	}
	d, err := openDatabase(ctx, databaseFlags{url: &pooled, direct: &db}, 2, logger)
	if err != nil {
		t.Fatal(err)
	}
	if d.listen.RuntimeParams["options"] != "" || d.pool.Config().ConnConfig.RuntimeParams["options"] == "" {
		t.Errorf("the listener's options %q, the pool's %q: want the direct URL's for the listener only",
			d.listen.RuntimeParams["options"], d.pool.Config().ConnConfig.RuntimeParams["options"])
	}
	d.Close()

	other := dbtest.NewURL(t)
	_, _, err = runCmd(ctx, "server", "--database-url", db, "--direct-database-url", other, "--listen", freeAddr(t))
	if err == nil || !strings.Contains(err.Error(), "--direct-database-url must reach the database of --database-url") {
		t.Errorf("server with the direct URL on another database: %v", err)
	}
	u, _ := url.Parse(db)
	u.Path = "/chatd_no_such_database"
	_, _, err = runCmd(ctx, "token", "create", "--user", "alice", "--database-url", db, "--direct-database-url", u.String())
	if err == nil || !strings.Contains(err.Error(), "notification listener on --direct-database-url") {
		t.Errorf("token create with a direct URL that does not connect: %v", err)
	}
}
