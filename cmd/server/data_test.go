package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/bench"
	"github.com/chatd/chatd/internal/dbtest"
)

// TestDataCommands: chatd export writes a user's chats, chatd import reads
// them into another database (for another user), chatd user erase deletes
// the first user and reports what went; usage errors exit 2.
func TestDataCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	from, to := dbtest.NewURL(t), dbtest.NewURL(t)
	cfg, err := pgxpool.ParseConfig(from)
	if err != nil {
		t.Fatal(err)
	}
	pool := dbtest.NewPool(t, cfg)
	seedChats(t, pool, "alice", 3, time.Hour, "hello")
	file := filepath.Join(t.TempDir(), "alice.jsonl")
	_, errOut, err := runCmd(ctx, "export", "--user", "alice", "--output", file, "--database-url", from)
	if err != nil || !strings.Contains(errOut, "exported 3 chats, 9 messages") {
		t.Fatalf("export: %v %s", err, errOut)
	}
	out, _, err := runCmd(ctx, "import", file, "--user", "bob", "--database-url", to)
	if err != nil || !strings.Contains(out, "imported 3 chats, 9 messages, 3 structured requests") {
		t.Fatalf("import: %v %s", err, out)
	}
	conn, err := pgx.Connect(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var chats int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM chats c JOIN users u ON u.id = c.owner_id WHERE u.name = 'bob'`).Scan(&chats); err != nil || chats != 3 {
		t.Fatalf("bob has %d chats (%v)", chats, err)
	}

	out, _, err = runCmd(ctx, "user", "erase", "alice", "--database-url", from)
	var rep client.ErasureReport
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.User != "alice" || rep.Chats != 3 || rep.Messages != 9 || rep.Tombstones != 3 {
		t.Fatalf("erase: %v %s", err, out)
	}
	if _, _, err := runCmd(ctx, "user", "erase", "alice", "--database-url", from); exitCode(err) != 1 || !strings.Contains(err.Error(), `no user "alice"`) {
		t.Fatalf("second erase: %v", err)
	}
	if _, errOut, err := runCmd(ctx, "export", "--user", "alice", "--database-url", from); exitCode(err) != 1 {
		t.Fatalf("export of an erased user: %v %s", err, errOut)
	}
	for _, args := range [][]string{{"user"}, {"user", "forget", "x"}, {"user", "erase"}, {"user", "erase", "a", "b"},
		{"export"}, {"export", "--user", "a", "extra"}, {"import"}, {"import", "a", "b"}} {
		if _, _, err := runCmd(ctx, args...); exitCode(err) != 2 {
			t.Errorf("chatd %v: exit %d (%v), want 2", args, exitCode(err), err)
		}
	}
	if _, _, err := runCmd(ctx, "import", filepath.Join(t.TempDir(), "missing"), "--database-url", to); exitCode(err) != 1 {
		t.Errorf("import of a missing file: %v", err)
	}
}

// seedChats writes n chats of the user name at rest (bench.SeedChats).
func seedChats(t *testing.T, pool *pgxpool.Pool, name string, n int, age time.Duration, text string) uuid.UUID {
	t.Helper()
	owner, err := bench.SeedChatsIn(t.Context(), pool, name, n, age, text)
	if err != nil {
		t.Fatalf("seed %d chats: %v", n, err)
	}
	return owner
}
