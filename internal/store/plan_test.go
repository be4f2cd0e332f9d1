package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/store"
)

// TestCommitExecutorsAgree: Apply, which batches a commit's statements
// until one needs a result still on its way, leaves the database as
// sending them one by one does, and answers the same, for each kind of
// commit the runner makes. Both run on copies of one database.
func TestCommitExecutorsAgree(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// commit brings a fresh database to the point of the commit.
		commit func(e *planEnv) store.Commit
		// roundTrips, when set, is what the batched commit takes, BEGIN
		// and COMMIT included.
		roundTrips int64
	}{
		{"finalizer step with its receipt", func(e *planEnv) store.Commit {
			f, req := e.structured()
			return finalizerCommit(f, req, e.attempt)
		}, 2},
		{"rejection that fails the request", func(e *planEnv) store.Commit {
			f, req := e.structured()
			c := store.FinishTurn(store.Ending{
				Messages: []store.NewMessage{e.text("no tool call")},
				Progress: &store.Progress{RequestID: req, Steps: 1, Rejections: 1,
					Attempt: &client.Attempt{Attempt: 1, Reason: client.AttemptTextOnly, Errors: []client.AttemptError{{Keyword: "text_only", Message: "text"}}, ErrorsTotal: 1}},
				Outcomes: []store.Outcome{{RequestID: req, Status: client.OutputFailed, Code: client.CodeNotProduced, Message: "no result"}},
			})
			c.Fence = f
			return c
		}, 0},
		{"failed outcome without progress", func(e *planEnv) store.Commit {
			f, req := e.structured()
			c := store.FinishTurn(store.Ending{
				Outcomes: []store.Outcome{{RequestID: req, Status: client.OutputFailed, Code: client.CodeHookFailed, Message: "hook"}}})
			c.Fence = f
			return c
		}, 0},
		{"outcomes of two requests", func(e *planEnv) store.Commit {
			f, req := e.structured()
			queued := e.queue(f.ChatID, true)
			c := store.FinishTurn(store.Ending{
				Progress: &store.Progress{RequestID: req, Steps: 1, SetCandidate: true, Candidate: json.RawMessage(`{}`), CandidateCallID: "c"},
				Outcomes: []store.Outcome{{RequestID: req, Status: client.OutputSucceeded, Value: json.RawMessage(`{}`)},
					{RequestID: queued, Status: client.OutputCancelled, Code: client.CodeInterrupted, Message: "gone"},
					{RequestID: req, Status: client.OutputSucceeded, Value: json.RawMessage(`{}`)}},
			})
			c.Fence = f
			return c
		}, 0},
		{"spawns", func(e *planEnv) store.Commit {
			f, step := e.spawning()
			c := store.AwaitTools(store.Awaiting{Spawns: []store.Spawn{
				{MessageID: step, ToolCallID: "call_1", Model: "m", Content: []jsonb.Part{jsonb.Text("child one")}},
				{MessageID: step, ToolCallID: "call_2", Model: "m", Content: []jsonb.Part{jsonb.Text("child two")},
					Request: &store.RequestSpec{Name: "r", Schema: json.RawMessage(`{"type":"integer"}`)}},
			}, OnlyChildren: true})
			c.Fence = f
			return c
		}, 0},
		{"fair step that yields", func(e *planEnv) store.Commit {
			f := e.plain("alice")
			e.plainUnclaimed("bob")
			c := store.Continue(store.Continuation{Messages: []store.NewMessage{e.text("step")}, CountAttempt: true}).Fair()
			c.Fence = f
			return c
		}, 0},
		{"fair step that goes on", func(e *planEnv) store.Commit {
			c := store.Continue(store.Continuation{Messages: []store.NewMessage{e.text("step")}, CountAttempt: true}).Fair()
			c.Fence = e.plain("alice")
			return c
		}, 0},
		{"compaction", func(e *planEnv) store.Commit {
			f := e.plain("alice")
			last := e.latestMessage(f.ChatID)
			c := store.Continue(store.Continuation{CompressBefore: last, ClearCompaction: true, CountAttempt: true,
				Messages: []store.NewMessage{{Role: client.RoleUser, Visibility: store.VisibleModel,
					Parts: []jsonb.Part{{Type: jsonb.PartSummary, Text: "summary"}}}}})
			c.Fence = f
			return c
		}, 0},
		{"client tools awaited", func(e *planEnv) store.Commit {
			c := store.AwaitTools(store.Awaiting{Messages: []store.NewMessage{{Role: client.RoleAssistant, FinishReason: "tool-calls",
				Parts: []jsonb.Part{{Type: jsonb.PartToolCall, ToolCallID: "call_1", ToolName: "browse", Args: json.RawMessage(`{}`)}}}},
				Timeout: time.Minute})
			c.Fence = e.plain("alice")
			return c
		}, 0},
		{"error that promotes the queue head", func(e *planEnv) store.Commit {
			f := e.plain("alice")
			e.queue(f.ChatID, false)
			c := store.FailTurn(store.Ending{}, client.StreamError{Code: client.CodeProviderError, Message: "down"})
			c.Fence = f
			return c
		}, 0},
		{"error with nothing queued", func(e *planEnv) store.Commit {
			c := store.FailTurn(store.Ending{Messages: []store.NewMessage{e.text("partial")}},
				client.StreamError{Code: client.CodeProviderError, Message: "down"})
			c.Fence = e.plain("alice")
			return c
		}, 0},
		{"spawned child ending for its parent", func(e *planEnv) store.Commit {
			f, parent := e.child()
			c := store.FinishTurn(store.Ending{Messages: []store.NewMessage{e.text("the child's answer")}})
			c = c.ToParent(uuid.NullUUID{UUID: parent, Valid: true})
			c.Fence = f
			return c
		}, 0},
		{"fence miss", func(e *planEnv) store.Commit {
			f, req := e.structured()
			f.HistoryVersion--
			return finalizerCommit(f, req, e.attempt)
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := dbtest.NewURL(t)
			pool, _ := openPool(t, url)
			e := &planEnv{t: t, pool: pool}
			e.st = store.New(e.pool)
			c := tc.commit(e)
			e.pool.Close() // a database with connections cannot be copied
			copied := dbtest.CloneURL(t, url)

			batched := applyWith(t, url, c, (*store.Store).Apply)
			oneByOne := applyWith(t, copied, c, (*store.Store).ApplyOneByOne)
			if miss := strings.HasPrefix(tc.name, "fence miss"); miss != (batched.answer == "error: fence miss") ||
				!miss && strings.HasPrefix(batched.answer, "error") {
				t.Errorf("answer %s", batched.answer)
			}
			if batched.answer != oneByOne.answer {
				t.Errorf("answers differ:\n batched   %s\n one by one %s", batched.answer, oneByOne.answer)
			}
			if !slices.Equal(batched.rows, oneByOne.rows) {
				t.Errorf("databases differ:\n only batched:\n%s\n only one by one:\n%s",
					strings.Join(without(batched.rows, oneByOne.rows), "\n"), strings.Join(without(oneByOne.rows, batched.rows), "\n"))
			}
			t.Logf("round trips: %d batched, %d one by one", batched.roundTrips, oneByOne.roundTrips)
			if batched.roundTrips > oneByOne.roundTrips || tc.roundTrips > 0 && batched.roundTrips != tc.roundTrips {
				t.Errorf("%d round trips batched (%d one by one), want %d", batched.roundTrips, oneByOne.roundTrips, tc.roundTrips)
			}
		})
	}
}

// applied is a commit's answer and the database's rows after it, both
// with times and the ids the commit made up left out, and its round trips.
type applied struct {
	answer     string
	rows       []string
	roundTrips int64
}

// applyWith applies c with apply on the database at url.
func applyWith(t *testing.T, url string, c store.Commit, apply func(*store.Store, context.Context, store.Commit) (store.Committed, error)) applied {
	t.Helper()
	pool, txs := openPool(t, url)
	before := strings.Join(dumpRows(t, pool), "\n")
	res, err := apply(store.New(pool), t.Context(), c)
	roundTrips := txs.Snapshot()["worker_commit"].RoundTrips
	var answer string
	if err != nil {
		answer = "error: " + errorKind(err)
	} else {
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		answer = string(b)
	}
	rows := dumpRows(t, pool)
	for i, r := range rows {
		rows[i] = normalize(r, before)
	}
	slices.Sort(rows)
	return applied{answer: normalize(answer, before), rows: rows, roundTrips: roundTrips}
}

// errorKind is err as the worker tells errors apart.
func errorKind(err error) string {
	if errors.Is(err, store.ErrFenceMiss) {
		return "fence miss"
	}
	return err.Error()
}

var (
	timestamp = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"`)
	anyUUID   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

// normalize replaces times, which differ between the runs, and ids that
// were not in the database before (made up by the commit), in s.
func normalize(s, before string) string {
	s = timestamp.ReplaceAllString(s, `"<time>"`)
	return anyUUID.ReplaceAllStringFunc(s, func(id string) string {
		if strings.Contains(before, id) {
			return id
		}
		return "<new id>"
	})
}

// dumpRows returns every row of every table, as JSON, without the
// transaction ids that differ between runs.
func dumpRows(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	ctx := t.Context()
	var tables []string
	rows, err := pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
	if err == nil {
		for rows.Next() {
			var name string
			if err = rows.Scan(&name); err != nil {
				break
			}
			tables = append(tables, name)
		}
		rows.Close()
		err = cmpErr(err, rows.Err())
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, table := range tables {
		rows, err := pool.Query(ctx, `SELECT $1 || ' ' || (to_jsonb(t) - 'snapshot_xact')::text FROM `+table+` t`, table)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var row string
			if err := rows.Scan(&row); err != nil {
				t.Fatal(err)
			}
			out = append(out, row)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(out)
	return out
}

// without is the rows of a that b does not have.
func without(a, b []string) []string {
	var out []string
	for _, r := range a {
		if !slices.Contains(b, r) {
			out = append(out, r)
		}
	}
	return out
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// openPool opens a pool on the database at url, with a transaction
// counter.
func openPool(t *testing.T, url string) (*pgxpool.Pool, *store.TxCounter) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	store.Configure(cfg)
	txs := store.Trace(cfg)
	return dbtest.NewPool(t, cfg), txs
}

// planEnv makes the chats the commits of TestCommitExecutorsAgree are for.
type planEnv struct {
	t    *testing.T
	pool *pgxpool.Pool
	st   *store.Store
	// attempt is the generation attempt of the last claim.
	attempt int32
}

// planWorker is the one worker that owns the chats.
var planWorker = uuid.MustParse("5b7e36a8-9b5f-4a55-8f4c-2f0b8f2f6c01")

func (e *planEnv) user(name string) uuid.UUID {
	return newUser(e.t, e.st, name).ID
}

// claimed creates a chat from nc and claims it.
func (e *planEnv) claimed(nc store.NewChat) (store.Fence, store.Message) {
	e.t.Helper()
	chat, input, err := e.st.CreateChat(e.t.Context(), nc)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.claim(chat.ID), input
}

func (e *planEnv) claim(chat uuid.UUID) store.Fence {
	e.t.Helper()
	claim, err := e.st.ClaimTurn(e.t.Context(), store.ClaimParams{Worker: planWorker, Chat: chat, Lease: time.Hour, CountAttempt: true})
	if err != nil || claim.Turn.Chat.ID != chat {
		e.t.Fatalf("claim: %v", err)
	}
	e.attempt = claim.Turn.Chat.GenerationAttempt
	return store.Fence{ChatID: chat, WorkerID: planWorker, HistoryVersion: claim.Turn.Chat.HistoryVersion}
}

// structured is a claimed chat whose turn is a structured request.
func (e *planEnv) structured() (store.Fence, uuid.UUID) {
	f, input := e.claimed(store.NewChat{OwnerID: e.user("alice"), Model: "m", Content: []jsonb.Part{jsonb.Text("go")},
		Request: &store.RequestSpec{Name: "r", Schema: json.RawMessage(`{"type":"object"}`)}})
	return f, input.StructuredRequestID.UUID
}

// plain is a claimed chat of a new user.
func (e *planEnv) plain(owner string) store.Fence {
	f, _ := e.claimed(store.NewChat{OwnerID: e.user(owner), Model: "m", Content: []jsonb.Part{jsonb.Text("go")}})
	return f
}

// plainUnclaimed is a chat of a new user that waits for a worker.
func (e *planEnv) plainUnclaimed(owner string) {
	if _, _, err := e.st.CreateChat(e.t.Context(), store.NewChat{OwnerID: e.user(owner), Model: "m", Content: []jsonb.Part{jsonb.Text("go")}}); err != nil {
		e.t.Fatal(err)
	}
}

// spawning is a claimed chat that may spawn, with a committed step that
// calls spawn_agent twice.
func (e *planEnv) spawning() (store.Fence, int64) {
	e.t.Helper()
	f, _ := e.claimed(store.NewChat{OwnerID: e.user("alice"), Model: "m", SpawnAgents: true, Content: []jsonb.Part{jsonb.Text("go")}})
	call := func(id string) jsonb.Part {
		return jsonb.Part{Type: jsonb.PartToolCall, ToolCallID: id, ToolName: store.SpawnTool, Args: json.RawMessage(`{}`)}
	}
	c := store.Continue(store.Continuation{Messages: []store.NewMessage{{Role: client.RoleAssistant, FinishReason: "tool-calls",
		Parts: []jsonb.Part{call("call_1"), call("call_2")}}}})
	c.Fence = f
	res, err := e.st.Apply(e.t.Context(), c)
	if err != nil {
		e.t.Fatal(err)
	}
	f.HistoryVersion = res.Chat.HistoryVersion
	return f, res.Messages[0].ID
}

// child is a claimed spawned chat whose parent awaits it.
func (e *planEnv) child() (store.Fence, uuid.UUID) {
	e.t.Helper()
	f, step := e.spawning()
	c := store.AwaitTools(store.Awaiting{Spawns: []store.Spawn{
		{MessageID: step, ToolCallID: "call_1", Model: "m", Content: []jsonb.Part{jsonb.Text("child")}},
	}, Timeout: time.Minute})
	c.Fence = f
	if _, err := e.st.Apply(e.t.Context(), c); err != nil {
		e.t.Fatal(err)
	}
	var child uuid.UUID
	if err := e.pool.QueryRow(e.t.Context(), `SELECT id FROM chats WHERE parent_chat_id = $1`, f.ChatID).Scan(&child); err != nil {
		e.t.Fatal(err)
	}
	return e.claim(child), f.ChatID
}

// queue queues a message behind the running turn, with a structured
// request when asked, and returns the request.
func (e *planEnv) queue(chat uuid.UUID, structured bool) uuid.UUID {
	e.t.Helper()
	var owner uuid.UUID
	if err := e.pool.QueryRow(e.t.Context(), `SELECT owner_id FROM chats WHERE id = $1`, chat).Scan(&owner); err != nil {
		e.t.Fatal(err)
	}
	p := store.SendParams{OwnerID: owner, ChatID: chat, Content: []jsonb.Part{jsonb.Text("next")}}
	if structured {
		p.Request = &store.RequestSpec{Name: "q", Schema: json.RawMessage(`{"type":"integer"}`)}
	}
	res, err := e.st.SendMessage(e.t.Context(), p)
	if err != nil || res.Queued == nil {
		e.t.Fatalf("queue: %+v %v", res, err)
	}
	return res.Queued.StructuredRequestID.UUID
}

func (e *planEnv) latestMessage(chat uuid.UUID) int64 {
	e.t.Helper()
	var id int64
	if err := e.pool.QueryRow(e.t.Context(), `SELECT max(id) FROM chat_messages WHERE chat_id = $1`, chat).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *planEnv) text(s string) store.NewMessage {
	return store.NewMessage{Role: client.RoleAssistant, FinishReason: "stop", Parts: []jsonb.Part{jsonb.Text(s)}}
}
