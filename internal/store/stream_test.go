package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/store"
)

// TestStreamReadTakesNoLock: a stream's read is one snapshot and waits for
// no writer: while a transaction that bumped the chat is open, the read
// returns at once with the committed state (no row of the open one), and
// the next read after its commit has it. Under the chat's share lock the
// read used to wait for the writer (and a feed's read for every stream of
// the chat with it).
func TestStreamReadTakesNoLock(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	st := store.New(pool)
	ctx := t.Context()
	user := newUser(t, st, "alice")
	chat, _, err := st.CreateChat(ctx, store.NewChat{OwnerID: user.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")}})
	if err != nil {
		t.Fatal(err)
	}
	before, err := st.ReadStream(ctx, user.ID, chat.ID, 0, 0, true)
	if err != nil {
		t.Fatal(err)
	}

	writer, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // committed below
	if _, err := writer.Exec(ctx, `SELECT chatd_touch_chat($1, false)`, chat.ID); err != nil {
		t.Fatal(err)
	}
	// Bounded so that a read that waits fails the test instead of hanging it.
	readCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	during, err := st.ReadStream(readCtx, user.ID, chat.ID, 0, 0, true)
	if err != nil {
		t.Fatalf("read while a writer holds the chat: %v", err)
	}
	if during.Chat.SnapshotVersion != before.Chat.SnapshotVersion {
		t.Fatalf("read %d while the writer's bump was uncommitted, want %d", during.Chat.SnapshotVersion, before.Chat.SnapshotVersion)
	}
	if err := writer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := st.ReadStream(ctx, user.ID, chat.ID, during.Chat.SnapshotVersion, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if after.Chat.SnapshotVersion != before.Chat.SnapshotVersion+1 {
		t.Fatalf("read %d after the commit, want %d", after.Chat.SnapshotVersion, before.Chat.SnapshotVersion+1)
	}
}

// TestStreamReadOfChangesInOneRoundTrip: the one-round-trip read of a
// live stream's changes returns what the statement-by-statement read does,
// at every watermark, as messages are queued, sent and cancelled.
func TestStreamReadOfChangesInOneRoundTrip(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	st := store.New(pool)
	ctx := t.Context()
	token, err := st.CreateToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	user, err := st.Authenticate(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	chat, _, err := st.CreateChat(ctx, store.NewChat{OwnerID: user.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")}})
	if err != nil {
		t.Fatal(err)
	}
	var seen []int64 // snapshot versions, each a watermark to read from
	check := func(what string) {
		t.Helper()
		c, err := st.GetChat(ctx, user.ID, chat.ID)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, c.SnapshotVersion)
		for _, wm := range append([]int64{0}, seen...) {
			got, err := st.ReadStream(ctx, user.ID, chat.ID, wm, 0, false)
			if err != nil {
				t.Fatalf("%s: read from %d: %v", what, wm, err)
			}
			want, err := st.ReadStreamOneByOne(ctx, user.ID, chat.ID, wm)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: read from %d:\n got %+v\nwant %+v", what, wm, got, want)
			}
		}
	}
	check("created")
	sent, err := st.SendMessage(ctx, store.SendParams{OwnerID: user.ID, ChatID: chat.ID, Content: []jsonb.Part{jsonb.Text("next")}})
	if err != nil {
		t.Fatal(err)
	}
	check("queued")
	structured, err := st.SendMessage(ctx, store.SendParams{OwnerID: user.ID, ChatID: chat.ID, Content: []jsonb.Part{jsonb.Text("report")},
		Request: &store.RequestSpec{Name: "r", Schema: json.RawMessage(`{"type":"integer"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	check("queued structured")
	for _, r := range []store.SendResult{structured, sent} {
		if _, _, err := st.DeleteQueued(ctx, user.ID, chat.ID, r.Queued.ID); err != nil {
			t.Fatal(err)
		}
		check("deleted from the queue")
	}
	if _, err := st.ReadStream(ctx, user.ID, uuid.New(), 0, 0, false); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a missing chat: %v", err)
	}
}
