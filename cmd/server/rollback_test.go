package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/store"
)

// A rollback reverts migrations only once accepted structured work is done
// (docs/operations.md, "Rolling back"): `migrate down` refuses while a
// request is pending, naming how many and what to do, and reverts once it
// has its receipt; --force reverts anyway.
func TestMigrateDownWaitsForPendingRequests(t *testing.T) {
	t.Parallel()
	url := dbtest.EmptyURL(t)
	ctx := context.Background()
	if out, _, err := runCmd(ctx, "migrate", "up", "--database-url", url); err != nil {
		t.Fatalf("migrate up: %v %q", err, out)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := store.New(pool)
	token, err := st.CreateToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	user, err := st.Authenticate(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	// An ordinary turn runs (no worker here) with a structured request
	// queued behind it.
	chat, _, err := st.CreateChat(ctx, store.NewChat{OwnerID: user.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")}})
	if err != nil {
		t.Fatal(err)
	}
	sent, err := st.SendMessage(ctx, store.SendParams{OwnerID: user.ID, ChatID: chat.ID, Content: []jsonb.Part{jsonb.Text("report")},
		Request: &store.RequestSpec{Name: "r", Schema: json.RawMessage(`{"type":"object"}`)}})
	if err != nil || sent.Queued == nil {
		t.Fatalf("send: %+v %v", sent, err)
	}

	out, _, err := runCmd(ctx, "migrate", "down", "--database-url", url)
	if exitCode(err) != 3 || !strings.Contains(err.Error(), "1 structured requests are still pending") ||
		!strings.Contains(err.Error(), "Rolling back") || strings.Contains(out, "reverted") {
		t.Fatalf("migrate down with a pending request: exit %d, %v, %q", exitCode(err), err, out)
	}
	if _, _, err := runCmd(ctx, "migrate", "status", "--database-url", url); err != nil {
		t.Fatalf("a migration was reverted: %v", err)
	}
	// Deleting the queued message writes its cancelled receipt: nothing is
	// pending, and the migration is reverted.
	if _, _, err := st.DeleteQueued(ctx, user.ID, chat.ID, sent.Queued.ID); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCmd(ctx, "migrate", "down", "--database-url", url)
	if err != nil || !strings.Contains(out, "reverted ") {
		t.Fatalf("migrate down once drained: %v %q", err, out)
	}
	if out, _, err := runCmd(ctx, "migrate", "up", "--database-url", url); err != nil {
		t.Fatalf("migrate up: %v %q", err, out)
	}

	// --force reverts while a request is pending.
	if _, err := st.SendMessage(ctx, store.SendParams{OwnerID: user.ID, ChatID: chat.ID, Content: []jsonb.Part{jsonb.Text("again")},
		Request: &store.RequestSpec{Name: "r", Schema: json.RawMessage(`{"type":"object"}`)}}); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCmd(ctx, "migrate", "down", "--force", "--database-url", url)
	if err != nil || !strings.Contains(out, "reverted ") {
		t.Fatalf("migrate down --force: %v %q", err, out)
	}
}
