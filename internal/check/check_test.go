package check_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/check"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/store"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestCheckFileIsWellFormed(t *testing.T) {
	t.Parallel()
	cs := check.Checks()
	want := []string{"finished_request_receipt", "receipt_without_finished_request", "stranded_request",
		"queued_in_idle_chat", "two_pending_in_history", "candidate_on_finished_request", "request_in_other_chat",
		"counters_out_of_order", "stuck_chat", "webhook_outbox", "spawned_child_undelivered", "deleted_chat_remains",
		"webhook_delivery_orphan"}
	if len(cs) != len(want) {
		t.Fatalf("%d checks, want %d", len(cs), len(want))
	}
	for i, c := range cs {
		if c.Name != want[i] {
			t.Errorf("check %d is %s, want %s", i, c.Name, want[i])
		}
		if c.Doc == "" {
			t.Errorf("check %s is not explained", c.Name)
		}
		// Every row names its check, so psql output is readable too.
		if !strings.Contains(c.SQL, "'"+c.Name+"' AS check_name") {
			t.Errorf("check %s does not select its name as check_name", c.Name)
		}
	}
	for _, bad := range []string{"", "SELECT 1;", "-- name: a\n-- doc\n", "-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;",
		"-- name: a\nSELECT 1; SELECT 2;"} {
		if _, err := check.Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// fixture is a database with one user and helpers to build states the
// application would make, then break them by hand.
type fixture struct {
	t     *testing.T
	pool  *pgxpool.Pool
	st    *store.Store
	owner uuid.UUID
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, pool: dbtest.New(t)}
	f.st = store.New(f.pool)
	token, err := f.st.CreateToken(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	u, err := f.st.Authenticate(t.Context(), token)
	if err != nil {
		t.Fatal(err)
	}
	f.owner = u.ID
	return f
}

const schema = `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`

// structuredChat creates a running chat whose first message is a pending
// structured request.
func (f *fixture) structuredChat() (store.Chat, uuid.UUID, int64) {
	f.t.Helper()
	chat, msg, err := f.st.CreateChat(f.t.Context(), store.NewChat{OwnerID: f.owner, Model: "m",
		Content: []jsonb.Part{jsonb.Text("give me a")}, Request: &store.RequestSpec{Name: "a", Schema: json.RawMessage(schema)}})
	if err != nil {
		f.t.Fatal(err)
	}
	return chat, msg.StructuredRequestID.UUID, msg.ID
}

// finish runs the chat's turn to a succeeded receipt as a worker would, and
// returns the receipt's id. The chat must be the only runnable one.
func (f *fixture) finish(chatID, req uuid.UUID) int64 {
	f.t.Helper()
	ctx := f.t.Context()
	worker := uuid.New()
	c, err := f.st.Claim(ctx, worker, time.Minute)
	if err != nil || c.ID != chatID {
		f.t.Fatalf("claim: %v (%s)", err, c.ID)
	}
	commit := store.FinishTurn(store.Ending{
		Messages: []store.NewMessage{{Role: client.RoleAssistant, Parts: []jsonb.Part{jsonb.Text("done")}, RequestID: uuid.NullUUID{UUID: req, Valid: true}}},
		Outcomes: []store.Outcome{{RequestID: req, Status: client.OutputSucceeded, Value: json.RawMessage(`{"a":1}`)}},
	})
	commit.Fence = store.Fence{ChatID: chatID, WorkerID: worker, HistoryVersion: c.HistoryVersion}
	res, err := f.st.Apply(ctx, commit)
	if err != nil {
		f.t.Fatal(err)
	}
	if res.Chat.Status != client.StatusWaiting || res.Request == nil || res.Request.ReceiptMessageID == nil {
		f.t.Fatalf("finish: chat %s request %+v", res.Chat.Status, res.Request)
	}
	return *res.Request.ReceiptMessageID
}

// finishedChat is a chat whose structured request succeeded.
func (f *fixture) finishedChat() (chat, req uuid.UUID, input, receipt int64) {
	f.t.Helper()
	c, req, input := f.structuredChat()
	return c.ID, req, input, f.finish(c.ID, req)
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.pool.Exec(f.t.Context(), sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// broken runs statements with triggers (and so foreign keys and the
// deferred receipt/ledger pairing) off, as replication would.
func (f *fixture) broken(stmts ...string) {
	f.t.Helper()
	err := pgx.BeginFunc(f.t.Context(), f.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(f.t.Context(), "SET LOCAL session_replication_role = replica"); err != nil {
			return err
		}
		for _, s := range stmts {
			if _, err := tx.Exec(f.t.Context(), s); err != nil {
				return &stmtError{s, err}
			}
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

type stmtError struct {
	stmt string
	err  error
}

func (e *stmtError) Error() string { return e.stmt + ": " + e.err.Error() }

func (f *fixture) run() check.Report {
	f.t.Helper()
	rep, err := check.Run(f.t.Context(), f.pool)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, v := range rep.Violations {
		if !strings.HasPrefix(v.String(), v.Check+":") {
			f.t.Errorf("violation %q does not start with its check", v)
		}
	}
	return rep
}

// expect asserts that check name reports chat (and request, if valid) with
// a detail containing want.
func (f *fixture) expect(rep check.Report, name string, chat uuid.UUID, req uuid.UUID, want string) {
	f.t.Helper()
	for _, v := range rep.Of(name) {
		if v.ChatID.UUID == chat && (req == uuid.Nil || v.RequestID.UUID == req) && strings.Contains(v.Detail, want) {
			return
		}
	}
	f.t.Errorf("%s did not report chat %s request %s with %q; report:\n%s", name, chat, req, want, dump(rep))
}

func dump(rep check.Report) string {
	var b strings.Builder
	for _, v := range rep.Violations {
		b.WriteString("  " + v.String() + "\n")
	}
	return b.String()
}

func (f *fixture) expectClean() {
	f.t.Helper()
	if rep := f.run(); !rep.Clean() {
		f.t.Fatalf("violations on a healthy database:\n%s", dump(rep))
	}
}

func TestHealthyStatesAreClean(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.expectClean()
	// A finished request, then a running one with a queued request behind it.
	chat, _, _, _ := f.finishedChat()
	if _, err := f.st.SendMessage(t.Context(), store.SendParams{OwnerID: f.owner, ChatID: chat, Content: []jsonb.Part{jsonb.Text("again")},
		Request: &store.RequestSpec{Name: "a", Schema: json.RawMessage(schema)}}); err != nil {
		t.Fatal(err)
	}
	res, err := f.st.SendMessage(t.Context(), store.SendParams{OwnerID: f.owner, ChatID: chat, Content: []jsonb.Part{jsonb.Text("later")},
		Request: &store.RequestSpec{Name: "a", Schema: json.RawMessage(schema)}})
	if err != nil || res.Queued == nil {
		t.Fatalf("queue: %v %+v", err, res)
	}
	f.expectClean()
	// Deleting the queued request cancels it; editing the first message
	// cancels the running one; deleting a chat leaves its tombstones.
	if _, _, err := f.st.DeleteQueued(t.Context(), f.owner, chat, res.Queued.ID); err != nil {
		t.Fatal(err)
	}
	f.expectClean()
	h, err := f.st.ListMessages(t.Context(), f.owner, chat, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.EditMessage(t.Context(), store.EditParams{OwnerID: f.owner, ChatID: chat, MessageID: h.Messages[0].ID,
		Content: []jsonb.Part{jsonb.Text("edited")}, Format: store.FormatPreserve}); err != nil {
		t.Fatal(err)
	}
	f.expectClean()
	if _, err := f.st.DeleteChat(t.Context(), f.owner, chat); err != nil {
		t.Fatal(err)
	}
	f.expectClean()
}

func TestFinishedRequestReceipt(t *testing.T) {
	t.Parallel()
	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, req, _, receipt := f.finishedChat()
		f.broken("DELETE FROM chat_messages WHERE id = " + itoa(receipt))
		f.expect(f.run(), "finished_request_receipt", chat, req, "has no receipt")
	})
	t.Run("two", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, req, _, receipt := f.finishedChat()
		f.exec("DROP INDEX chat_messages_one_receipt_per_request")
		f.broken(`INSERT INTO chat_messages (chat_id, role, kind, visibility, content, structured_request_id, revision)
			SELECT chat_id, role, kind, visibility, content, structured_request_id, revision FROM chat_messages WHERE id = ` + itoa(receipt))
		rep := f.run()
		f.expect(rep, "finished_request_receipt", chat, req, "has 2 receipts")
		f.expect(rep, "receipt_without_finished_request", chat, req, "points at message "+itoa(receipt)+" instead")
	})
	t.Run("pointer", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, req, input, _ := f.finishedChat()
		f.broken("UPDATE structured_requests SET receipt_message_id = " + itoa(input))
		rep := f.run()
		f.expect(rep, "finished_request_receipt", chat, req, "receipt_message_id is "+itoa(input))
		f.expect(rep, "receipt_without_finished_request", chat, req, "instead")
	})
}

func TestReceiptWithoutFinishedRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	chat, req, _, _ := f.finishedChat()
	f.broken(`UPDATE structured_requests SET status = 'pending', receipt_message_id = NULL, finished_at = NULL`)
	rep := f.run()
	f.expect(rep, "receipt_without_finished_request", chat, req, "still pending")
	f.expect(rep, "stranded_request", chat, req, "while its chat is waiting")
}

func TestStrandedRequest(t *testing.T) {
	t.Parallel()
	// These states need no disabled trigger: each statement is legal on
	// its own, only the combination strands the request.
	t.Run("idle chat", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, req, _ := f.structuredChat()
		f.exec("UPDATE chats SET status = 'waiting' WHERE id = $1", chat.ID)
		f.expect(f.run(), "stranded_request", chat.ID, req, "while its chat is waiting")
	})
	t.Run("error chat", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, req, _ := f.structuredChat()
		f.exec("UPDATE chats SET status = 'error' WHERE id = $1", chat.ID)
		f.expect(f.run(), "stranded_request", chat.ID, req, "while its chat is error")
	})
	t.Run("input deleted", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, req, input := f.structuredChat()
		f.exec("UPDATE chat_messages SET deleted = true WHERE id = $1", input)
		f.expect(f.run(), "stranded_request", chat.ID, req, "neither in history nor queued")
	})
	t.Run("superseded", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, req, _ := f.structuredChat()
		f.exec(`INSERT INTO chat_messages (chat_id, role, content) VALUES ($1, 'user', '[{"type":"text","text":"never mind"}]')`, chat.ID)
		f.expect(f.run(), "stranded_request", chat.ID, req, "supersedes")
	})
	t.Run("in history and queued", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, req, _ := f.structuredChat()
		f.exec(`INSERT INTO chat_queued_messages (chat_id, content, structured_request_id) VALUES ($1, '[]', $2)`, chat.ID, req)
		f.expect(f.run(), "stranded_request", chat.ID, req, "both in history and queued")
	})
}

func TestQueuedInIdleChat(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	chat, _, _, _ := f.finishedChat()
	f.exec(`INSERT INTO chat_queued_messages (chat_id, content) VALUES ($1, '[{"type":"text","text":"lost"}]')`, chat)
	f.expect(f.run(), "queued_in_idle_chat", chat, uuid.Nil, "waits in a chat that is waiting")
}

func TestTwoPendingInHistory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	chat, first, _ := f.structuredChat()
	second := uuid.New()
	f.exec(`INSERT INTO structured_requests (request_id, chat_id, name, schema) VALUES ($1, $2, 'b', '{}')`, second, chat.ID)
	f.exec(`INSERT INTO chat_messages (chat_id, role, content, structured_request_id) VALUES ($1, 'user', '[]', $2)`, chat.ID, second)
	rep := f.run()
	f.expect(rep, "two_pending_in_history", chat.ID, first, "2 pending requests")
	f.expect(rep, "two_pending_in_history", chat.ID, second, "2 pending requests")
}

func TestCandidateOnFinishedRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	chat, req, _, _ := f.finishedChat()
	f.exec("ALTER TABLE structured_requests DROP CONSTRAINT structured_requests_no_candidate_when_finished")
	f.broken(`UPDATE structured_requests SET candidate = '{"a":2}', candidate_tool_call_id = 'call_1'`)
	f.expect(f.run(), "candidate_on_finished_request", chat, req, "tool call call_1")
}

func TestRequestInOtherChat(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	chat, req, _, _ := f.finishedChat()
	other, otherReq, _ := f.structuredChat()
	f.broken(`INSERT INTO chat_messages (chat_id, role, content, structured_request_id, revision)
		SELECT id, 'assistant', '[]', '` + req.String() + `', history_version FROM chats WHERE id = '` + other.ID.String() + `'`)
	// The queue has no trigger that looks at the request's chat.
	f.exec(`INSERT INTO chat_queued_messages (chat_id, content, structured_request_id) VALUES ($1, '[]', $2)`, chat, otherReq)
	rep := f.run()
	f.expect(rep, "request_in_other_chat", other.ID, req, "message row names a request of chat "+chat.String())
	f.expect(rep, "request_in_other_chat", chat, otherReq, "names a request of chat "+other.ID.String())
}

func TestCountersOutOfOrder(t *testing.T) {
	t.Parallel()
	t.Run("history above snapshot", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, _, _, _ := f.finishedChat()
		f.exec("ALTER TABLE chats DROP CONSTRAINT chats_history_not_ahead")
		f.broken("UPDATE chats SET history_version = snapshot_version + 5")
		f.expect(f.run(), "counters_out_of_order", chat, uuid.Nil, "is above snapshot_version")
	})
	t.Run("revision above snapshot", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, req, input, _ := f.finishedChat()
		f.broken("UPDATE chat_messages SET revision = revision + 100 WHERE id = " + itoa(input))
		f.expect(f.run(), "counters_out_of_order", chat, req, "above the chat's snapshot_version")
	})
	t.Run("change without fencing", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, _, _ := f.structuredChat()
		// A message written with the fence trigger off: its revision is
		// the chat's snapshot, but history_version did not follow.
		f.broken(`UPDATE chats SET snapshot_version = snapshot_version + 1 WHERE id = '`+chat.ID.String()+`'`,
			`INSERT INTO chat_messages (chat_id, role, content, revision)
				SELECT id, 'user', '[]', snapshot_version FROM chats WHERE id = '`+chat.ID.String()+`'`)
		f.expect(f.run(), "counters_out_of_order", chat.ID, uuid.Nil, "above the chat's history_version")
	})
	t.Run("row after the receipt", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, req, _, receipt := f.finishedChat()
		f.broken(`INSERT INTO chat_messages (chat_id, role, content, structured_request_id, revision)
			SELECT id, 'assistant', '[]', '` + req.String() + `', history_version FROM chats WHERE id = '` + chat.String() + `'`)
		f.expect(f.run(), "counters_out_of_order", chat, req, "comes after its receipt "+itoa(receipt))
	})
	t.Run("ledger counters", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, req, _ := f.structuredChat()
		// The column's CHECK (validation_rejections BETWEEN 0 AND rejections)
		// has a generated name: find it by its definition.
		f.exec(`DO $$ DECLARE n text; BEGIN
			SELECT conname INTO STRICT n FROM pg_constraint
			 WHERE conrelid = 'structured_requests'::regclass AND contype = 'c'
			   AND pg_get_constraintdef(oid) LIKE '%validation_rejections <= rejections%';
			EXECUTE format('ALTER TABLE structured_requests DROP CONSTRAINT %I', n);
		END $$`)
		f.broken("UPDATE structured_requests SET validation_rejections = 2")
		f.expect(f.run(), "counters_out_of_order", chat.ID, req, "rejections 0, validation_rejections 2")
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A chat left running or waiting for client tool results beyond its bounds
// is reported: a duplicate tool-call id once left a chat in requires_action
// with no pending call, and a wedged worker would leave a lease to expire
// unnoticed.
// Each case plants the row by hand; within the grace nothing is reported.
func TestStuckChat(t *testing.T) {
	t.Parallel()
	// waitingChat is a chat whose last assistant step made two client tool
	// calls, in requires_action with the given deadline (SQL).
	waitingChat := func(f *fixture, deadline string) (uuid.UUID, int64) {
		chat, _, _ := f.structuredChat()
		var step int64
		if err := f.pool.QueryRow(t.Context(), `INSERT INTO chat_messages (chat_id, role, content) VALUES ($1, 'assistant',
			'[{"type":"tool-call","tool_call_id":"a","tool_name":"ask","args":{}},{"type":"tool-call","tool_call_id":"b","tool_name":"ask","args":{}},
			  {"type":"tool-call","tool_call_id":"w","tool_name":"web_search","args":{},"provider_executed":true}]') RETURNING id`,
			chat.ID).Scan(&step); err != nil {
			t.Fatal(err)
		}
		f.exec(`UPDATE chats SET status = 'requires_action', requires_action_deadline = `+deadline+` WHERE id = $1`, chat.ID)
		return chat.ID, step
	}
	answer := func(f *fixture, chat uuid.UUID, ids ...string) {
		var parts []string
		for _, id := range ids {
			parts = append(parts, `{"type":"tool-result","tool_call_id":"`+id+`","tool_name":"ask","result":"ok"}`)
		}
		f.exec(`INSERT INTO chat_messages (chat_id, role, content) VALUES ($1, 'tool', $2)`, chat, "["+strings.Join(parts, ",")+"]")
	}
	t.Run("healthy", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		// Waiting within its deadline, one call answered, one not.
		chat, _ := waitingChat(f, "now() + interval '10 minutes'")
		answer(f, chat, "a")
		// Overdue, but within the grace the maintenance loop has.
		waitingChat(f, "now() - interval '1 minute'")
		// Running, its lease renewed, or expired a moment ago.
		worker := uuid.New()
		for range 2 {
			f.structuredChat()
			if _, err := f.st.Claim(t.Context(), worker, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		f.exec(`UPDATE chats SET lease_expires_at = now() - interval '1 minute' WHERE id = (SELECT id FROM chats WHERE worker_id IS NOT NULL LIMIT 1)`)
		// Runnable without an owner: waiting for a worker is not stuck.
		unowned, _, _ := f.structuredChat()
		f.exec(`UPDATE chats SET updated_at = now() - interval '1 hour' WHERE id = $1`, unowned.ID)
		f.expectClean()
	})
	t.Run("lease expired", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, req, _ := f.structuredChat()
		if _, err := f.st.Claim(t.Context(), uuid.New(), time.Minute); err != nil {
			t.Fatal(err)
		}
		f.exec(`UPDATE chats SET lease_expires_at = now() - interval '1 hour' WHERE id = $1`, chat.ID)
		f.expect(f.run(), "stuck_chat", chat.ID, req, "chat is running, but the lease of its worker")
		f.exec(`UPDATE chats SET status = 'interrupting' WHERE id = $1`, chat.ID)
		f.expect(f.run(), "stuck_chat", chat.ID, uuid.Nil, "chat is interrupting, but the lease")
	})
	t.Run("deadline passed", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, step := waitingChat(f, "now() - interval '1 hour'")
		answer(f, chat, "b")
		rep := f.run()
		f.expect(rep, "stuck_chat", chat, uuid.Nil, "chat has 1 unanswered client tool calls 01:00:")
		if v := rep.Of("stuck_chat"); len(v) == 1 && !v[0].RequestID.Valid {
			t.Errorf("the violation names no request: %v", v[0])
		}
		if v := rep.Of("stuck_chat"); len(v) != 1 || v[0].MessageID == nil || *v[0].MessageID != step {
			t.Errorf("violations %v, want one naming step %d", v, step)
		}
	})
	t.Run("no deadline", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, _ := waitingChat(f, "NULL")
		f.expect(f.run(), "stuck_chat", chat, uuid.Nil, "without a deadline")
	})
	t.Run("nothing pending", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		// Both client calls answered (the provider-executed one needs no
		// answer): nothing would ever resume the chat, deadline or not.
		chat, _ := waitingChat(f, "now() + interval '10 minutes'")
		answer(f, chat, "a", "b")
		f.expect(f.run(), "stuck_chat", chat, uuid.Nil, "no tool call of its last assistant step is unanswered")
	})
	t.Run("spawned children", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		// A parent waits, without a deadline, on the spawn_agent call its
		// awaited child answers.
		chat, _ := waitingChat(f, "NULL")
		answer(f, chat, "a", "b")
		var step int64
		if err := f.pool.QueryRow(t.Context(), `INSERT INTO chat_messages (chat_id, role, content) VALUES ($1, 'assistant',
			'[{"type":"tool-call","tool_call_id":"s","tool_name":"spawn_agent","args":{"prompt":"p"}}]') RETURNING id`, chat).Scan(&step); err != nil {
			t.Fatal(err)
		}
		f.exec(`UPDATE chats SET spawn_agents = true, status = 'requires_action', requires_action_deadline = NULL WHERE id = $1`, chat)
		var child uuid.UUID
		if err := f.pool.QueryRow(t.Context(), `INSERT INTO chats (owner_id, parent_chat_id, model, mode, status, spawn_depth,
			spawn_message_id, spawn_tool_call_id, spawn_state)
			SELECT owner_id, id, model, 'child', 'running', 1, $2, 's', 'awaited' FROM chats WHERE id = $1 RETURNING id`, chat, step).Scan(&child); err != nil {
			t.Fatal(err)
		}
		f.expectClean()
		// The child's turn ended without its result reaching the parent.
		f.exec(`UPDATE chats SET status = 'waiting' WHERE id = $1`, child)
		f.expect(f.run(), "spawned_child_undelivered", child, uuid.Nil, "its result never reached parent")
		// The parent waits on a call no awaited child will answer.
		f.exec(`UPDATE chats SET spawn_state = 'delivered' WHERE id = $1`, child)
		f.expect(f.run(), "stuck_chat", chat, uuid.Nil, "no child chat will answer")
		f.exec(`DELETE FROM chats WHERE id = $1`, child)
		f.expect(f.run(), "stuck_chat", chat, uuid.Nil, "no child chat will answer")
		// A parent that stopped waiting still awaits its child.
		f.exec(`INSERT INTO chats (owner_id, parent_chat_id, model, mode, status, spawn_depth, spawn_message_id, spawn_tool_call_id, spawn_state)
			SELECT owner_id, id, model, 'child', 'running', 1, $2, 's', 'awaited' FROM chats WHERE id = $1`, chat, step)
		f.exec(`UPDATE chats SET status = 'interrupting', requires_action_deadline = NULL WHERE id = $1`, chat)
		f.exec(`UPDATE chats SET status = 'waiting' WHERE id = $1`, chat)
		rep := f.run()
		if v := rep.Of("spawned_child_undelivered"); len(v) != 1 || !strings.Contains(v[0].Detail, "is waiting, but still awaits this child") {
			t.Errorf("report:\n%s", dump(rep))
		}
	})
}

func TestWebhookOutbox(t *testing.T) {
	t.Parallel()
	all := []string{"structured_output.succeeded", "structured_output.failed", "structured_output.cancelled"}
	subscribed := func(f *fixture) {
		f.t.Helper()
		if err := f.st.SyncWebhooks(f.t.Context(), map[string][]string{"ops": all}); err != nil {
			f.t.Fatal(err)
		}
	}
	t.Run("healthy", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.finishedChat() // finished before the subscription: owes nothing
		subscribed(f)
		_, req, _, _ := f.finishedChat()
		var n int
		if err := f.pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_deliveries WHERE request_id = $1 AND endpoint = 'ops'`, req).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%d delivery rows for the receipt (%v)", n, err)
		}
		f.expectClean()
	})
	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		subscribed(f)
		chat, req, _, _ := f.finishedChat()
		f.broken("DELETE FROM webhook_deliveries")
		f.expect(f.run(), "webhook_outbox", chat, req, "succeeded request has no delivery for webhook ops")
	})
	t.Run("pending request", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		chat, req, _ := f.structuredChat()
		f.exec(`INSERT INTO webhook_deliveries (request_id, endpoint, event) VALUES ($1, 'ops', 'structured_output.succeeded')`, req)
		f.expect(f.run(), "webhook_outbox", chat.ID, req, "delivery for webhook ops of a request still pending")
	})
	t.Run("wrong event", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		subscribed(f)
		chat, req, _, _ := f.finishedChat()
		f.exec(`UPDATE webhook_deliveries SET event = 'structured_output.failed' WHERE request_id = $1`, req)
		f.expect(f.run(), "webhook_outbox", chat, req, "carries structured_output.failed, but the request succeeded")
	})
}

func TestDeletedChatRemains(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	chat, req, _, _ := f.finishedChat()
	f.broken(`INSERT INTO chat_tombstones (chat_id, owner_id, reason) VALUES ('`+chat.String()+`', '`+f.owner.String()+`', 'expired')`,
		`INSERT INTO request_tombstones (request_id, chat_id, status, created_at, finished_at)
		 VALUES ('`+req.String()+`', '`+chat.String()+`', 'succeeded', now(), now())`)
	rep := f.run()
	f.expect(rep, "deleted_chat_remains", chat, uuid.Nil, "chat was expired at")
	f.expect(rep, "deleted_chat_remains", chat, req, "request has a tombstone")
}

func TestWebhookDeliveryOrphan(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := f.st.SyncWebhooks(t.Context(), map[string][]string{"ops": {"structured_output.succeeded"}}); err != nil {
		t.Fatal(err)
	}
	chat, req, _, _ := f.finishedChat()
	if _, err := f.st.DeleteChat(t.Context(), f.owner, chat); err != nil {
		t.Fatal(err)
	}
	f.expectClean() // the delivery is owed from the tombstone
	f.exec(`UPDATE webhook_deliveries SET event = 'structured_output.failed' WHERE request_id = $1`, req)
	f.expect(f.run(), "webhook_delivery_orphan", chat, req, "carries structured_output.failed, but the deleted request was succeeded")
	nobody := uuid.New()
	f.exec(`INSERT INTO webhook_deliveries (request_id, endpoint, event) VALUES ($1, 'ops', 'structured_output.succeeded')`, nobody)
	f.expect(f.run(), "webhook_delivery_orphan", uuid.Nil, nobody, "names no request, live or deleted")
}
