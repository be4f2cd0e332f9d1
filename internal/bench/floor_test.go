package bench

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/testenv"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestSchemaFloorNotifiesNobody: the schema floor writes a real turn's rows
// (read back from a turn chatd ran) into chatd's schema, its requests end
// succeeded with their receipt, and it notifies nobody, as chatd's own turn
// long-polled where it was created does not: a floor that announced its
// commits would pay for notifications chatd does not send.
func TestSchemaFloorNotifiesNobody(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{})
	c := env.Client("alice")
	ctx := t.Context()
	created, err := c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("Review the change.")},
		ResponseFormat: &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "review", Schema: []byte(benchSchema)}}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.WaitStructuredOutput(ctx, *created.Messages[0].StructuredOutputRequestID); err != nil || res.Status != client.OutputSucceeded {
		t.Fatalf("chatd's turn: %+v %v", res, err)
	}
	ft, err := readFloorTurnFrom(ctx, env.Pool)
	if err != nil {
		t.Fatal(err)
	}
	env.Stop() // nothing of chatd's notifies from here on

	listen := listenOn(t, env, "chatd_chat", "chatd_work", "chatd_request")
	owner, err := schemaFloor.setup(ctx, env.Pool)
	if err != nil {
		t.Fatal(err)
	}
	const turns = 3
	for range turns {
		if err := schemaFloor.turn(ctx, env.Pool, owner, ft); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM structured_requests r JOIN chat_messages m ON m.id = r.receipt_message_id
		WHERE r.status = 'succeeded' AND r.admitted_by = $1`, floorProcess).Scan(&n); err != nil || n != turns {
		t.Fatalf("%d floor requests succeeded with their receipt (%v), want %d", n, err, turns)
	}
	// Notifications arrive in commit order: whatever the floor sent comes
	// before this one.
	if _, err := env.Pool.Exec(ctx, `SELECT pg_notify('chatd_work', 'sentinel')`); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		note, err := listen.Conn().WaitForNotification(wctx)
		if err != nil {
			t.Fatal(err)
		}
		if note.Payload == "sentinel" {
			return
		}
		t.Fatalf("the floor notified %s %q", note.Channel, note.Payload)
	}
}

// listenOn is a connection of env's pool listening on the channels.
func listenOn(t *testing.T, env *testenv.Env, channels ...string) *pgxpool.Conn {
	t.Helper()
	conn, err := env.Pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	for _, ch := range channels {
		if _, err := conn.Exec(t.Context(), "LISTEN "+ch); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}
