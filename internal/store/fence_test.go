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

func TestMain(m *testing.M) { dbtest.Main(m) }

// state is everything a commit could have changed.
type state struct {
	Snapshot, History int64
	Attempt           int32
	Worker            uuid.NullUUID
	Messages          int
	Steps, Receipts   int
	Status            string
}

func readState(t *testing.T, pool *pgxpool.Pool, chat uuid.UUID) state {
	t.Helper()
	var s state
	err := pool.QueryRow(t.Context(), `SELECT c.snapshot_version, c.history_version, c.generation_attempt, c.worker_id, c.status,
			(SELECT count(*) FROM chat_messages m WHERE m.chat_id = c.id),
			(SELECT count(*) FROM chat_messages m WHERE m.chat_id = c.id AND m.kind = 'receipt'),
			(SELECT coalesce(sum(r.steps), 0) FROM structured_requests r WHERE r.chat_id = c.id)
		FROM chats c WHERE c.id = $1`, chat).
		Scan(&s.Snapshot, &s.History, &s.Attempt, &s.Worker, &s.Status, &s.Messages, &s.Receipts, &s.Steps)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitLeaseExpired polls the database clock until the chat's lease is over.
func waitLeaseExpired(t *testing.T, pool *pgxpool.Pool, chat uuid.UUID) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var expired bool
		if err := pool.QueryRow(t.Context(), `SELECT lease_expires_at < now() FROM chats WHERE id = $1`, chat).Scan(&expired); err != nil {
			t.Fatal(err)
		}
		if expired {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("lease did not expire")
		}
		time.Sleep(5 * time.Millisecond) // polling the database clock
	}
}

// TestZombieWorkerCannotCommit: worker A claims a chat and starts a
// provider step; its lease runs out (it is paused, partitioned, slow);
// worker B takes the chat over. Whatever A then tries to commit — the step,
// a receipt, another attempt, a renewal — misses its fence and writes
// nothing, while B's commits go through.
func TestZombieWorkerCannotCommit(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	st := store.New(pool)
	ctx := t.Context()
	user := newUser(t, st, "alice")
	chat, input, err := st.CreateChat(ctx, store.NewChat{OwnerID: user.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")},
		Request: &store.RequestSpec{Name: "r", Schema: json.RawMessage(`{"type":"integer"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	req := input.StructuredRequestID

	// A claims with a lease that is over at once, reads, and counts its attempt.
	a, b := uuid.New(), uuid.New()
	if c, err := st.Claim(ctx, a, time.Millisecond); err != nil || c.ID != chat.ID {
		t.Fatalf("A claims: %v", err)
	}
	turnA, err := st.LoadTurn(ctx, chat.ID)
	if err != nil {
		t.Fatal(err)
	}
	fenceA := store.Fence{ChatID: chat.ID, WorkerID: a, HistoryVersion: turnA.Chat.HistoryVersion}
	attemptA, err := st.RecordAttempt(ctx, fenceA)
	if err != nil || attemptA != 1 {
		t.Fatalf("A's attempt: %d %v", attemptA, err)
	}
	waitLeaseExpired(t, pool, chat.ID)

	// B takes over and starts its own attempt on the same history.
	if c, err := st.Claim(ctx, b, time.Minute); err != nil || c.ID != chat.ID {
		t.Fatalf("B claims: %v", err)
	}
	fenceB := store.Fence{ChatID: chat.ID, WorkerID: b, HistoryVersion: turnA.Chat.HistoryVersion}
	attemptB, err := st.RecordAttempt(ctx, fenceB)
	if err != nil || attemptB != 2 {
		t.Fatalf("B's attempt: %d %v", attemptB, err)
	}
	before := readState(t, pool, chat.ID)

	step := func(value string) store.Commit {
		return store.Commit{
			Messages: []store.NewMessage{{Role: client.RoleAssistant, RequestID: req, FinishReason: "tool-calls",
				Parts: []jsonb.Part{{Type: jsonb.PartToolCall, ToolCallID: "call_" + value, ToolName: "coder_structured_output",
					Args: json.RawMessage(`{"output":` + value + `}`)}}}},
			Progress: &store.Progress{RequestID: req.UUID, Steps: 1, SetCandidate: true, Candidate: json.RawMessage(value), CandidateCallID: "call_" + value},
		}
	}
	// A's step, fenced on its attempt.
	c := step("1")
	c.Fence = fenceA
	c.Fence.Attempt = &attemptA
	if _, err := st.Apply(ctx, c); !errors.Is(err, store.ErrFenceMiss) {
		t.Fatalf("A's step: %v, want a fence miss", err)
	}
	// A's receipt, ending the turn.
	receiptA := store.FinishTurn(store.Ending{Outcomes: []store.Outcome{{RequestID: req.UUID, Status: client.OutputSucceeded, Value: json.RawMessage(`1`)}}})
	receiptA.Fence = fenceA
	if _, err := st.Apply(ctx, receiptA); !errors.Is(err, store.ErrFenceMiss) {
		t.Fatalf("A's receipt: %v, want a fence miss", err)
	}
	// A's interruption commit, another attempt, a renewal, a release.
	endA := store.FinishTurn(store.Ending{})
	endA.Fence = store.Fence{ChatID: chat.ID, WorkerID: a, HistoryVersion: fenceA.HistoryVersion,
		Statuses: []client.ChatStatus{client.StatusRunning, client.StatusInterrupting}}
	if _, err := st.Apply(ctx, endA); !errors.Is(err, store.ErrFenceMiss) {
		t.Fatalf("A's end of turn: %v, want a fence miss", err)
	}
	if _, err := st.RecordAttempt(ctx, fenceA); !errors.Is(err, store.ErrFenceMiss) {
		t.Fatalf("A's new attempt: %v, want a fence miss", err)
	}
	if err := st.RenewLease(ctx, chat.ID, a, time.Minute); !errors.Is(err, store.ErrFenceMiss) {
		t.Fatalf("A's renewal: %v, want a fence miss", err)
	}
	if err := st.Release(ctx, chat.ID, a); err != nil {
		t.Fatal(err)
	}
	if after := readState(t, pool, chat.ID); after != before {
		t.Fatalf("A's commits changed the chat:\nbefore %+v\nafter  %+v", before, after)
	}

	// B's own stale attempt is a zombie generation too: a retry (attempt 3)
	// supersedes attempt 2.
	attemptB3, err := st.RecordAttempt(ctx, fenceB)
	if err != nil || attemptB3 != 3 {
		t.Fatalf("B's retry: %d %v", attemptB3, err)
	}
	c = step("2")
	c.Fence = fenceB
	c.Fence.Attempt = &attemptB
	if _, err := st.Apply(ctx, c); !errors.Is(err, store.ErrFenceMiss) {
		t.Fatalf("B's superseded attempt: %v, want a fence miss", err)
	}

	// B's current attempt commits, then its receipt.
	c = step("3")
	c.Fence = fenceB
	c.Fence.Attempt = &attemptB3
	res, err := st.Apply(ctx, c)
	if err != nil {
		t.Fatalf("B's step: %v", err)
	}
	fenceB.HistoryVersion = res.Chat.HistoryVersion
	receiptB := store.FinishTurn(store.Ending{Outcomes: []store.Outcome{{RequestID: req.UUID, Status: client.OutputSucceeded, Value: json.RawMessage(`3`)}}})
	receiptB.Fence = fenceB
	res, err = st.Apply(ctx, receiptB)
	if err != nil {
		t.Fatalf("B's receipt: %v", err)
	}
	if res.Chat.Status != client.StatusWaiting || res.Request.Status != client.OutputSucceeded {
		t.Fatalf("after B: chat %s request %s", res.Chat.Status, res.Request.Status)
	}
	final := readState(t, pool, chat.ID)
	if final.Receipts != 1 || final.Steps != 1 || final.Messages != before.Messages+2 || final.Worker.Valid {
		t.Fatalf("final state %+v", final)
	}
	rs, err := st.GetRequest(ctx, user.ID, req.UUID)
	if err != nil || rs.Receipt == nil {
		t.Fatalf("lookup: %v", err)
	}
	parts, err := jsonb.ParseContent(rs.Receipt.Content)
	if err != nil {
		t.Fatal(err)
	}
	var value string
	for _, p := range parts {
		if p.Type == jsonb.PartOutcome {
			value = string(p.Outcome.Value)
		}
	}
	if value != "3" {
		t.Fatalf("receipt value %q, want B's 3", value)
	}
	if rep, err := check.Run(ctx, pool); err != nil || !rep.Clean() {
		t.Fatalf("checker: %v %+v", err, rep.Violations)
	}
}

// TestExpiredLeaseWithoutTakeoverStillCommits: a lease that ran out only
// lets another worker claim the chat; until one does, the owner's fence
// holds and its work is not thrown away.
func TestExpiredLeaseWithoutTakeoverStillCommits(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	st := store.New(pool)
	ctx := t.Context()
	token, _ := st.CreateToken(ctx, "alice")
	user, err := st.Authenticate(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	chat, _, err := st.CreateChat(ctx, store.NewChat{OwnerID: user.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")}})
	if err != nil {
		t.Fatal(err)
	}
	a := uuid.New()
	c, err := st.Claim(ctx, a, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	waitLeaseExpired(t, pool, chat.ID)
	end := store.FinishTurn(store.Ending{Messages: []store.NewMessage{{Role: client.RoleAssistant, Parts: []jsonb.Part{jsonb.Text("hi")}}}})
	end.Fence = store.Fence{ChatID: chat.ID, WorkerID: a, HistoryVersion: c.HistoryVersion}
	res, err := st.Apply(ctx, end)
	if err != nil || res.Chat.Status != client.StatusWaiting {
		t.Fatalf("commit after expiry: %v %s", err, res.Chat.Status)
	}
}

// newUser creates a user (with a token) and returns it.
func newUser(t testing.TB, st *store.Store, name string) store.User {
	t.Helper()
	token, err := st.CreateToken(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	user, err := st.Authenticate(t.Context(), token)
	if err != nil {
		t.Fatal(err)
	}
	return user
}

// TestMissedFenceLocksTheChatFirst: a worker commit sends its writes with
// its fence, in one batch, before the fence's answer is judged; when the
// fence missed they run, then roll back. They must take their locks as
// every commit does, the chat first: a zombie's progress alone (no message
// first) would otherwise lock the ledger row, then wait for the chat that
// the owner's commit holds while that commit waits for the ledger row — a
// deadlock, which PostgreSQL breaks after deadlock_timeout (1 s) by
// aborting one of the two.
func TestMissedFenceLocksTheChatFirst(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	st := store.New(pool)
	ctx := t.Context()
	user := newUser(t, st, "alice")
	chat, input, err := st.CreateChat(ctx, store.NewChat{OwnerID: user.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")},
		Request: &store.RequestSpec{Name: "r", Schema: json.RawMessage(`{"type":"integer"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	req := input.StructuredRequestID.UUID
	owner := uuid.New()
	if c, err := st.Claim(ctx, owner, time.Minute); err != nil || c.ID != chat.ID {
		t.Fatalf("claim: %v", err)
	}
	turn, err := st.LoadTurn(ctx, chat.ID)
	if err != nil {
		t.Fatal(err)
	}

	// The owner's commit, in flight: it holds the chat.
	ownerTx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ownerTx.Rollback(ctx)
	if _, err := ownerTx.Exec(ctx, `SELECT 1 FROM chats WHERE id = $1 FOR UPDATE`, chat.ID); err != nil {
		t.Fatal(err)
	}
	// A zombie's progress-only commit waits for it.
	zombie := make(chan error, 1)
	go func() {
		_, err := st.Apply(ctx, store.Commit{
			Fence:    store.Fence{ChatID: chat.ID, WorkerID: uuid.New(), HistoryVersion: turn.Chat.HistoryVersion},
			Progress: &store.Progress{RequestID: req, Steps: 1}})
		zombie <- err
	}()
	for waiting := false; !waiting; {
		if err := pool.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-zombie:
			t.Fatalf("the zombie's commit returned %v without waiting for the owner's", err)
		default:
		}
	}
	// The owner's commit goes on to the ledger row, which nobody else
	// holds (NOWAIT: a lock held fails at once), and commits.
	if _, err := ownerTx.Exec(ctx, `SELECT 1 FROM structured_requests WHERE request_id = $1 FOR UPDATE NOWAIT`, req); err != nil {
		t.Fatalf("the owner's commit: %v", err)
	}
	if err := ownerTx.Commit(ctx); err != nil {
		t.Fatalf("the owner's commit: %v", err)
	}
	if err := <-zombie; !errors.Is(err, store.ErrFenceMiss) {
		t.Fatalf("the zombie's commit: %v, want a fence miss", err)
	}
	if r, err := st.GetRequest(ctx, user.ID, req); err != nil || r.Request.Steps != 0 {
		t.Fatalf("request after the zombie: %+v %v", r.Request, err)
	}
}

// TestRenewLeases: one statement renews the held chats still owned; a chat
// another worker owns is not renewed, nor one whose row another
// transaction holds (skipped, not waited for: RenewLease tells the two
// apart), and a chat renewed keeps its lease from the database's clock.
func TestRenewLeases(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	st := store.New(pool)
	ctx := t.Context()
	user := newUser(t, st, "alice")
	var held []store.Held
	for range 3 {
		if _, _, err := st.CreateChat(ctx, store.NewChat{OwnerID: user.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")}}); err != nil {
			t.Fatal(err)
		}
		w := uuid.New()
		c, err := st.Claim(ctx, w, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, store.Held{Chat: c.ID, Worker: w})
	}
	owned, lost, locked := held[0], held[1], held[2]
	lost.Worker = uuid.New() // another worker's claim
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM chats WHERE id = $1 FOR UPDATE`, locked.Chat); err != nil {
		t.Fatal(err)
	}
	renewed, err := st.RenewLeases(ctx, []store.Held{owned, lost, locked}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(renewed) != 1 || renewed[0] != owned.Chat {
		t.Fatalf("renewed %v, want only %s", renewed, owned.Chat)
	}
	var left time.Duration
	if err := pool.QueryRow(ctx, `SELECT extract(epoch FROM lease_expires_at - now()) * interval '1 second' FROM chats WHERE id = $1`,
		owned.Chat).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left < 59*time.Minute {
		t.Fatalf("the renewed lease has %s left, want about an hour", left)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.RenewLease(ctx, locked.Chat, locked.Worker, time.Hour); err != nil {
		t.Fatalf("the chat held by another transaction, renewed alone: %v", err)
	}
	if err := st.RenewLease(ctx, lost.Chat, lost.Worker, time.Hour); !errors.Is(err, store.ErrFenceMiss) {
		t.Fatalf("the chat another worker owns, renewed alone: %v, want a fence miss", err)
	}
}

// TestRunnableLimitCheckedOncePerSecond: admissions of an owner far below
// --max-runnable-per-user count its runnable chats once, not every time
// (each count scans an index every turn's end leaves an entry in), and an
// owner at its limit is still refused.
func TestRunnableLimitCheckedOncePerSecond(t *testing.T) {
	t.Parallel()
	cfg := dbtest.Config(t)
	txs := store.Trace(cfg)
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := store.New(pool)
	ctx := t.Context()
	bob := newUser(t, st, "bob")
	admit := func(u store.User, max int) (int64, error) {
		before := txs.Snapshot()["admit"].Statements
		_, _, err := st.CreateChat(ctx, store.NewChat{OwnerID: u.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")}, MaxRunnable: max})
		return txs.Snapshot()["admit"].Statements - before, err
	}
	// The admission right after a count (well within its second: a
	// machine that stalls longer is given another user to try with).
	for try := 0; ; try++ {
		alice := newUser(t, st, fmt.Sprintf("alice%d", try))
		checked, err := admit(alice, 5000)
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		next, err := admit(alice, 5000)
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(begin) > 500*time.Millisecond && try < 5 {
			continue
		}
		if next != checked-1 {
			t.Fatalf("the admission after a count of 1 of 5,000 sent %d statements, the counted one %d: want one fewer", next, checked)
		}
		break
	}
	for i := range 3 {
		if _, err := admit(bob, 3); err != nil {
			t.Fatalf("bob's admission %d of 3: %v", i+1, err)
		}
	}
	if _, err := admit(bob, 3); !errors.Is(err, store.ErrTooManyRunnable) {
		t.Fatalf("bob's fourth admission under a limit of 3: %v", err)
	}
}
