package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/check"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/store"
)

var deleteSchema = &store.RequestSpec{Name: "r", Schema: json.RawMessage(`{"type":"integer"}`)}

// chatRows counts, per table, the rows that belong to the chats: every
// table with a chat's id in a column, and those that hang off its messages
// and requests.
func chatRows(t *testing.T, pool *pgxpool.Pool, chats []uuid.UUID) map[string]int {
	t.Helper()
	queries := map[string]string{
		"chats":                `SELECT count(*) FROM chats WHERE id = ANY($1) OR parent_chat_id = ANY($1)`,
		"chat_messages":        `SELECT count(*) FROM chat_messages WHERE chat_id = ANY($1)`,
		"chat_queued_messages": `SELECT count(*) FROM chat_queued_messages WHERE chat_id = ANY($1)`,
		"structured_requests":  `SELECT count(*) FROM structured_requests WHERE chat_id = ANY($1)`,
		"stream_tickets":       `SELECT count(*) FROM stream_tickets WHERE chat_id = ANY($1)`,
		"idempotency_keys":     `SELECT count(*) FROM idempotency_keys WHERE chat_id = ANY($1)`,
		"mcp_calls": `SELECT count(*) FROM mcp_calls c WHERE NOT EXISTS (
			SELECT 1 FROM chat_messages m WHERE m.id = c.message_id) OR $1::uuid[] IS NULL`,
	}
	out := map[string]int{}
	for table, q := range queries {
		var n int
		if err := pool.QueryRow(t.Context(), q, chats).Scan(&n); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if n > 0 {
			out[table] = n
		}
	}
	return out
}

// mustBeClean runs the checker.
func mustBeClean(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	rep, err := check.Run(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Errorf("check: %s %v %v: %s", v.Check, v.ChatID, v.RequestID, v.Detail)
	}
}

// TestDeleteChatCancelsThenRemoves: a running structured turn with two
// structured messages queued behind it. The delete cancels all three
// requests (chat_deleted) with their webhook deliveries, removes every row
// of the chat, and leaves tombstones a lookup reads; the worker that owned
// the turn can commit nothing afterwards, and the chat cannot come back.
func TestDeleteChatCancelsThenRemoves(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	st := store.New(pool)
	ctx := t.Context()
	if err := st.SyncWebhooks(ctx, map[string][]string{"hook": {"structured_output.cancelled"}}); err != nil {
		t.Fatal(err)
	}
	alice, bob := newUser(t, st, "alice"), newUser(t, st, "bob")
	chat, input, err := st.CreateChat(ctx, store.NewChat{OwnerID: alice.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")}, Request: deleteSchema})
	if err != nil {
		t.Fatal(err)
	}
	requests := []uuid.UUID{input.StructuredRequestID.UUID}
	for i := range 2 {
		res, err := st.SendMessage(ctx, store.SendParams{OwnerID: alice.ID, ChatID: chat.ID, Content: []jsonb.Part{jsonb.Text(fmt.Sprint("more ", i))},
			Request: deleteSchema})
		if err != nil || res.Queued == nil {
			t.Fatalf("queue: %+v %v", res, err)
		}
		requests = append(requests, res.Queued.StructuredRequestID.UUID)
	}
	worker := uuid.New()
	claimed, err := st.Claim(ctx, worker, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteChat(ctx, bob.ID, chat.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob deletes alice's chat: %v", err)
	}

	d, err := st.DeleteChat(ctx, alice.ID, chat.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Chats) != 1 || len(d.Cancelled) != 3 || d.Queued != 2 || d.Requests != 3 {
		t.Fatalf("deletion %+v", d)
	}
	for i, c := range d.Cancelled {
		if c.Request.RequestID != requests[i] || c.Request.Status != client.OutputCancelled ||
			c.Request.ErrorCode == nil || *c.Request.ErrorCode != client.CodeChatDeleted || c.Receipt == nil {
			t.Errorf("cancelled %d: %+v", i, c)
		}
	}
	if rows := chatRows(t, pool, []uuid.UUID{chat.ID}); len(rows) > 0 {
		t.Errorf("rows left: %v", rows)
	}

	// The worker that owned the turn commits nothing.
	end := store.FinishTurn(store.Ending{Messages: []store.NewMessage{{Role: client.RoleAssistant, Parts: []jsonb.Part{jsonb.Text("late")}}},
		Outcomes: []store.Outcome{{RequestID: requests[0], Status: client.OutputSucceeded, Value: json.RawMessage(`1`)}}})
	end.Fence = store.Fence{ChatID: chat.ID, WorkerID: worker, HistoryVersion: claimed.HistoryVersion}
	if _, err := st.Apply(ctx, end); !errors.Is(err, store.ErrFenceMiss) {
		t.Fatalf("late commit: %v, want a fence miss", err)
	}
	if err := st.RenewLease(ctx, chat.ID, worker, time.Minute); !errors.Is(err, store.ErrFenceMiss) {
		t.Fatalf("renewal: %v", err)
	}
	if rows := chatRows(t, pool, []uuid.UUID{chat.ID}); len(rows) > 0 {
		t.Errorf("rows after the late commit: %v", rows)
	}

	// Lookups read the tombstone: the owner's, and nobody else's.
	for _, id := range requests {
		st, err := st.GetRequest(ctx, alice.ID, id)
		if err != nil || st.Deleted == nil || st.Deleted.Reason != store.DeletedByOwner || st.Request.Status != client.OutputCancelled ||
			*st.Request.ErrorCode != client.CodeChatDeleted || st.Request.ChatID != chat.ID {
			t.Errorf("lookup of %s: %+v %v", id, st, err)
		}
	}
	if _, err := st.GetRequest(ctx, bob.ID, requests[0]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("bob's lookup: %v", err)
	}
	if del, err := st.RequestForDelivery(ctx, requests[1]); err != nil || del.Deleted == nil || del.Request.Status != client.OutputCancelled {
		t.Errorf("webhook read: %+v %v", del, err)
	}
	var deliveries int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE request_id = ANY($1) AND state = 'pending'
		AND event = 'structured_output.cancelled'`, requests).Scan(&deliveries); err != nil || deliveries != 3 {
		t.Errorf("%d deliveries owed, want 3 (%v)", deliveries, err)
	}

	// Again: deleted, with the reason.
	var de *store.DeletedError
	if _, err := st.DeleteChat(ctx, alice.ID, chat.ID); !errors.As(err, &de) || !errors.Is(err, store.ErrChatDeleted) || de.Reason != store.DeletedByOwner {
		t.Fatalf("second delete: %v", err)
	}
	// Nothing brings it back.
	_, err = pool.Exec(ctx, `INSERT INTO chats (id, owner_id, model) VALUES ($1, $2, 'm')`, chat.ID, alice.ID)
	if !store.IsConstraint(err, store.ChatsNotDeleted) {
		t.Errorf("chat inserted again: %v", err)
	}
	_, err = pool.Exec(ctx, `INSERT INTO chat_messages (chat_id, role, content) VALUES ($1, 'assistant', '[]')`, chat.ID)
	if !store.IsConstraint(err, store.ChatsTouchRequiresChat, store.MessagesChatIDFkey) {
		t.Errorf("message into the deleted chat: %v", err)
	}
	mustBeClean(t, pool)
}

// TestDeleteByHand: an operator's DELETE is refused while a request is
// pending and leaves the tombstones otherwise; tombstones are swept after
// their time, not while a webhook delivery still needs them.
func TestDeleteByHand(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	st := store.New(pool)
	ctx := t.Context()
	if err := st.SyncWebhooks(ctx, map[string][]string{"hook": {"structured_output.succeeded"}}); err != nil {
		t.Fatal(err)
	}
	alice := newUser(t, st, "alice")
	chat, input, err := st.CreateChat(ctx, store.NewChat{OwnerID: alice.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")}, Request: deleteSchema})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(ctx, `DELETE FROM chats WHERE id = $1`, chat.ID)
	if !store.IsConstraint(err, store.ChatsDeleteRequestsFinished) {
		t.Fatalf("hand delete with a pending request: %v", err)
	}
	worker := uuid.New()
	claimed, err := st.Claim(ctx, worker, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	req := input.StructuredRequestID.UUID
	end := store.FinishTurn(store.Ending{Outcomes: []store.Outcome{{RequestID: req, Status: client.OutputSucceeded, Value: json.RawMessage(`7`)}}})
	end.Fence = store.Fence{ChatID: chat.ID, WorkerID: worker, HistoryVersion: claimed.HistoryVersion}
	if _, err := st.Apply(ctx, end); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM chats WHERE id = $1`, chat.ID); err != nil {
		t.Fatalf("hand delete: %v", err)
	}
	got, err := st.GetRequest(ctx, alice.ID, req)
	if err != nil || got.Deleted == nil || got.Request.Status != client.OutputSucceeded || got.Request.ErrorCode != nil {
		t.Fatalf("lookup: %+v %v", got, err)
	}
	var usage map[string]any
	if err := json.Unmarshal(got.Deleted.Usage, &usage); err != nil || len(usage) == 0 {
		t.Errorf("usage kept: %s %v", got.Deleted.Usage, err)
	}
	mustBeClean(t, pool)

	// Swept once old, but not while its delivery is pending.
	if n, skipped, err := st.SweepTombstones(ctx, 0, 10); err != nil || skipped || n != 0 {
		t.Fatalf("sweep with a delivery pending: %d %v %v", n, skipped, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE webhook_deliveries SET state = 'dead' WHERE request_id = $1`, req); err != nil {
		t.Fatal(err)
	}
	if n, _, err := st.SweepTombstones(ctx, time.Hour, 10); err != nil || n != 0 {
		t.Fatalf("sweep of young tombstones: %d %v", n, err)
	}
	if n, _, err := st.SweepTombstones(ctx, 0, 10); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_deliveries) + (SELECT count(*) FROM request_tombstones)
		+ (SELECT count(*) FROM chat_tombstones)`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d rows left after the sweep (%v)", left, err)
	}
	if _, err := st.GetRequest(ctx, alice.ID, req); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("lookup after the sweep: %v", err)
	}
}

// newChat creates a plain chat of the owner's (a child of parent, when
// valid); done ends its first turn, so it is idle.
func newChat(t *testing.T, st *store.Store, owner uuid.UUID, parent uuid.NullUUID, done bool) uuid.UUID {
	t.Helper()
	ctx := t.Context()
	chat, _, err := st.CreateChat(ctx, store.NewChat{OwnerID: owner, Model: "m", Content: []jsonb.Part{jsonb.Text("hello")}, ParentChatID: parent})
	if err != nil {
		t.Fatal(err)
	}
	if !done {
		return chat.ID
	}
	worker := uuid.New()
	c, err := st.ClaimTurn(ctx, store.ClaimParams{Worker: worker, Chat: chat.ID, Lease: time.Minute})
	if err != nil || c.Turn.Chat.ID != chat.ID {
		t.Fatalf("claim %s: %v", chat.ID, err)
	}
	end := store.FinishTurn(store.Ending{Messages: []store.NewMessage{{Role: client.RoleAssistant, Parts: []jsonb.Part{jsonb.Text("hi")}}}})
	end.Fence = store.Fence{ChatID: chat.ID, WorkerID: worker, HistoryVersion: c.Turn.Chat.HistoryVersion}
	if _, err := st.Apply(ctx, end); err != nil {
		t.Fatal(err)
	}
	return chat.ID
}

// backdate moves the chats' last change back by age, past the triggers
// that own updated_at.
func backdate(t *testing.T, pool *pgxpool.Pool, age time.Duration, chats ...uuid.UUID) {
	t.Helper()
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	_, err = conn.Exec(t.Context(), `SET session_replication_role = replica;
		UPDATE chats SET updated_at = now() - make_interval(secs => `+fmt.Sprint(age.Seconds())+`) WHERE id = ANY('{`+joinIDs(chats)+`}');
		RESET session_replication_role`)
	if err != nil {
		t.Fatal(err)
	}
}

func joinIDs(ids []uuid.UUID) string {
	out := ""
	for i, id := range ids {
		if i > 0 {
			out += ","
		}
		out += id.String()
	}
	return out
}

// TestExpireChats: the sweep deletes chats at rest for longer than the
// retention, each with its tree, in batches; it keeps young chats, busy
// ones, and a tree with a busy child. One replica sweeps at a time.
func TestExpireChats(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	st := store.New(pool)
	ctx := t.Context()
	owner := newUser(t, st, "alice").ID
	none := uuid.NullUUID{}
	var expired []uuid.UUID
	for range 3 {
		expired = append(expired, newChat(t, st, owner, none, true))
	}
	quiet := newChat(t, st, owner, none, true) // with an idle child: both go
	quietChild := newChat(t, st, owner, uuid.NullUUID{UUID: quiet, Valid: true}, true)
	expired = append(expired, quiet, quietChild)
	young := newChat(t, st, owner, none, true)
	running := newChat(t, st, owner, none, false)
	busy := newChat(t, st, owner, none, true) // its child runs
	busyChild := newChat(t, st, owner, uuid.NullUUID{UUID: busy, Valid: true}, false)
	old := append([]uuid.UUID{running, busy, busyChild}, expired...)
	backdate(t, pool, 48*time.Hour, old...)

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(18)`); err != nil {
		t.Fatal(err)
	}
	if e, err := st.ExpireChats(ctx, time.Hour, 2); err != nil || e.Found != 0 {
		t.Fatalf("sweep while another holds the lock: %+v %v", e, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	var deleted []uuid.UUID
	for {
		e, err := st.ExpireChats(ctx, time.Hour, 2)
		if err != nil {
			t.Fatalf("sweep: %+v %v", e, err)
		}
		deleted = append(deleted, e.Chats...)
		if e.Found < 2 {
			break
		}
	}
	want := map[uuid.UUID]bool{}
	for _, id := range expired {
		want[id] = true
	}
	for _, id := range deleted {
		if !want[id] {
			t.Errorf("chat %s expired", id)
		}
		delete(want, id)
	}
	if len(want) > 0 {
		t.Errorf("chats not expired: %v", want)
	}
	if rows := chatRows(t, pool, expired); len(rows) > 0 {
		t.Errorf("rows left: %v", rows)
	}
	var reasons int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM chat_tombstones WHERE reason = 'expired' AND chat_id = ANY($1)`, expired).
		Scan(&reasons); err != nil || reasons != len(expired) {
		t.Errorf("%d expired tombstones, want %d (%v)", reasons, len(expired), err)
	}
	for _, id := range []uuid.UUID{young, running, busy, busyChild} {
		if _, err := st.LoadChat(ctx, id); err != nil {
			t.Errorf("kept chat %s: %v", id, err)
		}
	}
	if age, err := st.OldestChatAge(ctx); err != nil || age < 47*time.Hour {
		t.Errorf("oldest chat kept: %s %v", age, err)
	}
	mustBeClean(t, pool)
}

// TestEraseUser: a user with an idle chat, a running structured one with
// a queue, a child, an idempotency key and a pending webhook delivery is
// erased: the report counts what went, no row of theirs is left, and
// another user's chat is untouched.
func TestEraseUser(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	st := store.New(pool)
	ctx := t.Context()
	if err := st.SyncWebhooks(ctx, map[string][]string{"hook": {"structured_output.cancelled"}}); err != nil {
		t.Fatal(err)
	}
	alice, bob := newUser(t, st, "alice"), newUser(t, st, "bob")
	idle := newChat(t, st, alice.ID, uuid.NullUUID{}, true)
	newChat(t, st, alice.ID, uuid.NullUUID{UUID: idle, Valid: true}, false)
	chat, _, err := st.CreateChat(ctx, store.NewChat{OwnerID: alice.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")}, Request: deleteSchema,
		Key: &store.Idempotency{Key: "k1", Fingerprint: make([]byte, 32)}, Answer: func(store.Chat, store.Message) (int, []byte, error) {
			return 201, []byte(`{"sentinel":"in the answer"}`), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SendMessage(ctx, store.SendParams{OwnerID: alice.ID, ChatID: chat.ID, Content: []jsonb.Part{jsonb.Text("queued")},
		Request: deleteSchema}); err != nil {
		t.Fatal(err)
	}
	keep := newChat(t, st, bob.ID, uuid.NullUUID{}, true)

	e, err := st.EraseUser(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if e.UserID != alice.ID || e.Chats != 3 || e.Cancelled != 2 || e.QueuedMessages != 1 || e.Tokens != 1 || e.IdempotencyKeys != 0 ||
		e.WebhookDeliveries != 2 || e.Unsent != 2 || e.Tombstones != 3 || e.Messages == 0 {
		t.Errorf("erasure report %+v", e)
	}
	var left int
	err = pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM users WHERE id = $1) + (SELECT count(*) FROM chats WHERE owner_id = $1)
		+ (SELECT count(*) FROM api_tokens WHERE user_id = $1) + (SELECT count(*) FROM idempotency_keys WHERE user_id = $1)
		+ (SELECT count(*) FROM chat_tombstones WHERE owner_id = $1) + (SELECT count(*) FROM request_tombstones)
		+ (SELECT count(*) FROM webhook_deliveries)`, alice.ID).Scan(&left)
	if err != nil || left != 0 {
		t.Errorf("%d rows of alice left (%v)", left, err)
	}
	if _, err := st.LoadChat(ctx, keep); err != nil {
		t.Errorf("bob's chat: %v", err)
	}
	if _, err := st.EraseUser(ctx, "alice"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second erasure: %v", err)
	}
	mustBeClean(t, pool)
}
