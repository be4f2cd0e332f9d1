package main

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/dbtest"
)

func TestCheckCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)

	out, _, err := runCmd(ctx, "check", "--database-url", url)
	if err != nil || !strings.Contains(out, "ok    stranded_request\n") || !strings.HasSuffix(out, "13 checks, 0 violations\n") {
		t.Fatalf("check on a clean database: exit %d %v\n%s", exitCode(err), err, out)
	}

	// A structured request left in history of an idle chat: stranded.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var chat, req uuid.UUID
	req = uuid.New()
	if err := conn.QueryRow(ctx, `WITH u AS (INSERT INTO users (name) VALUES ('alice') RETURNING id)
		INSERT INTO chats (owner_id, model, status) SELECT id, 'm', 'running' FROM u RETURNING id`).Scan(&chat); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO structured_requests (request_id, chat_id, name, schema) VALUES ($2, $1, 'a', '{}')`,
		`INSERT INTO chat_messages (chat_id, role, content, structured_request_id) VALUES ($1, 'user', '[]', $2)`,
		`UPDATE chats SET status = 'waiting' WHERE id = $1 AND $2::uuid IS NOT NULL`,
	} {
		if _, err := conn.Exec(ctx, q, chat, req); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	out, _, err = runCmd(ctx, "check", "--database-url", url)
	if exitCode(err) != 1 || !strings.Contains(out, "FAIL  stranded_request (1)\n") ||
		!strings.Contains(out, "stranded_request: chat="+chat.String()+" request="+req.String()+" message=") ||
		!strings.Contains(out, "while its chat is waiting") || !strings.HasSuffix(out, "13 checks, 1 violations\n") {
		t.Fatalf("check with a stranded request: exit %d %v\n%s", exitCode(err), err, out)
	}

	// Usage errors exit 2; help exits 0.
	for _, args := range [][]string{{"check", "extra"}, {"check", "--bogus"}} {
		if _, _, err := runCmd(ctx, args...); exitCode(err) != 2 {
			t.Errorf("chatd %v: exit %d (%v), want 2", args, exitCode(err), err)
		}
	}
	if _, _, err := runCmd(ctx, "check", "--help"); exitCode(err) != 0 {
		t.Errorf("chatd check --help: exit %d", exitCode(err))
	}
	// An unmigrated database is named as such, not reported as clean.
	_, _, err = runCmd(ctx, "check", "--database-url", dbtest.EmptyURL(t))
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "pending migrations") {
		t.Fatalf("check on an empty database: exit %d %v", exitCode(err), err)
	}
}
