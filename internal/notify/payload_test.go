package notify

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/dbtest"
)

// TestChatPayloadRoundTrip: what formatChatPayload writes parses back to
// the same event, and anything else is refused.
func TestChatPayloadRoundTrip(t *testing.T) {
	t.Parallel()
	for _, snap := range []int64{1, 42, 1 << 62, SnapshotDeleted} {
		e := Event{ChatID: uuid.New(), Snapshot: snap, OwnerID: uuid.New()}
		if got, ok := parseChatPayload(formatChatPayload(e)); !ok || got != e {
			t.Errorf("%+v came back as %+v %v", e, got, ok)
		}
	}
	id, owner := uuid.NewString(), uuid.NewString()
	for _, bad := range []string{"", id, id + " 1", id + " 1 " + owner + " x", id + "  1 " + owner,
		id + " -1 " + owner, id + " one " + owner, "x 1 " + owner, id + " 1 y"} {
		if e, ok := parseChatPayload(bad); ok {
			t.Errorf("%q parsed as %+v", bad, e)
		}
	}
}

// TestChatPayloadFromTheTriggers: the payloads the triggers send for a new
// chat, a change a follower sees and a deletion parse to the chat, its
// owner and its snapshot, and formatChatPayload writes them byte for byte.
func TestChatPayloadFromTheTriggers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.New(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN chatd_chat"); err != nil {
		t.Fatal(err)
	}
	owner, chat := uuid.New(), uuid.New()
	for _, sql := range []string{
		`INSERT INTO users (id, name) VALUES ($1, 'payload')`,
		// A watch of all of the owner's chats: every visible change is announced.
		`INSERT INTO chat_followers (owner_id, chat_id, hub_id) VALUES ($1, '00000000-0000-0000-0000-000000000000', gen_random_uuid())`,
	} {
		if _, err := pool.Exec(ctx, sql, owner); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		sql  string
		snap int64
	}{
		{`INSERT INTO chats (id, owner_id, model) VALUES ($1, $2, 'm')`, 1},
		{`UPDATE chats SET title = 'renamed' WHERE id = $1 AND owner_id = $2`, 2},
		{`DELETE FROM chats WHERE id = $1 AND owner_id = $2`, SnapshotDeleted},
	}
	for _, st := range steps {
		if _, err := pool.Exec(ctx, st.sql, chat, owner); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := conn.Conn().WaitForNotification(wctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: no notification: %v", st.sql, err)
		}
		want := Event{ChatID: chat, Snapshot: st.snap, OwnerID: owner}
		if got, ok := parseChatPayload(n.Payload); !ok || got != want {
			t.Errorf("%s: %q parsed as %+v %v, want %+v", st.sql, n.Payload, got, ok, want)
		}
		if s := formatChatPayload(want); s != n.Payload {
			t.Errorf("%s: formatChatPayload wrote %q, the trigger %q", st.sql, s, n.Payload)
		}
	}
}

// formatChatPayload is the payload the triggers write for e.
func formatChatPayload(e Event) string {
	return e.ChatID.String() + " " + strconv.FormatInt(e.Snapshot, 10) + " " + e.OwnerID.String()
}
