package store_test

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/store"
)

// A batch sent outside a transaction is one transaction: a statement that
// fails, or a deferred check that fails when it commits, undoes the
// statements before it. The plain admission relies on it (one round trip,
// no BEGIN or COMMIT).
func TestBatchOutsideATransactionIsOne(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := t.Context()
	_, err := pool.Exec(ctx, `CREATE TABLE parent (id int PRIMARY KEY);
		CREATE TABLE child (id int PRIMARY KEY, parent int
			CONSTRAINT child_parent_fkey REFERENCES parent DEFERRABLE INITIALLY DEFERRED)`)
	if err != nil {
		t.Fatal(err)
	}
	for name, last := range map[string]string{
		"a statement fails":      "INSERT INTO child VALUES (1, NULL)", // duplicate key
		"a deferred check fails": "INSERT INTO child VALUES (2, 42)",   // no parent 42, checked at commit
	} {
		b := &pgx.Batch{}
		b.Queue("INSERT INTO parent VALUES (1)")
		b.Queue("INSERT INTO child VALUES (1, 1)")
		b.Queue(last)
		if err := pool.SendBatch(ctx, b).Close(); err == nil {
			t.Fatalf("%s: the batch succeeded", name)
		}
		var n int
		if err := pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM parent) + (SELECT count(*) FROM child)").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("%s: %d rows left behind, want none", name, n)
		}
	}
}

// An admission whose ledger row the database refuses leaves nothing: no
// chat, no message.
func TestAdmissionIsAllOrNothing(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	st := store.New(pool)
	ctx := t.Context()
	user := newUser(t, st, "alice")
	_, _, err := st.CreateChat(ctx, store.NewChat{OwnerID: user.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")},
		Request: &store.RequestSpec{Name: "not a name", Schema: json.RawMessage(`{"type":"object"}`)}})
	if !store.IsConstraint(err, "structured_requests_name_check") {
		t.Fatalf("CreateChat: %v, want the name check's violation", err)
	}
	var chats, messages int
	err = pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM chats), (SELECT count(*) FROM chat_messages)").Scan(&chats, &messages)
	if err != nil {
		t.Fatal(err)
	}
	if chats != 0 || messages != 0 {
		t.Fatalf("%d chats and %d messages left behind, want none", chats, messages)
	}
}
