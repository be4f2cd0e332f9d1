package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/xeipuuv/gojsonschema"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/check"
	"github.com/chatd/chatd/internal/jsonb"
)

// outputSchema is what the structured requests of these tests ask for.
const outputSchema = `{"type":"object","properties":{"title":{"type":"string","minLength":1},` +
	`"count":{"type":"integer","minimum":0,"maximum":99},"tags":{"type":"array","items":{"type":"string"},"maxItems":3}},` +
	`"required":["title","count"],"additionalProperties":false}`

func structured() *client.ResponseFormat {
	return &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(outputSchema)}}
}

func text(s string) []client.MessagePart { return []client.MessagePart{client.TextPart(s)} }

// seedFor returns the seed of a seeded test: $CHATD_CRASH_SEED, or a fresh
// one. It is logged (shown on failure and with -v) so a run can be replayed.
func seedFor(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHATD_CRASH_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHATD_CRASH_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("seed %d (replay: CHATD_CRASH_SEED=%d go test -race -run '^%s$' ./internal/crashtest/)", seed, seed, t.Name())
	return seed
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a number", name, s)
	}
	return n
}

// hash64 mixes a seed with values into a number, for decisions that must not
// depend on the order in which concurrent things happen.
func hash64(seed uint64, parts ...any) uint64 {
	h := fnv.New64a()
	fmt.Fprint(h, seed)
	for _, p := range parts {
		fmt.Fprintf(h, "\x00%v", p)
	}
	return h.Sum64()
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// poll calls cond until it is true or d passes; polling external processes
// or the database for a state is how these tests wait.
func poll(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// workspace makes a directory with a file for the read_file tool.
func workspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("the test command is make test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// settle waits until no chat has work left: every chat idle, no request
// pending. answer, if not nil, is called for each chat waiting for client
// tool results.
func settle(t *testing.T, pool *pgxpool.Pool, d time.Duration, answer func(chat uuid.UUID)) {
	t.Helper()
	var busy, pending int
	poll(t, d, "every chat to become idle", func() bool {
		if answer != nil {
			rows, err := pool.Query(context.Background(), `SELECT id FROM chats WHERE status = 'requires_action'`)
			if err == nil {
				ids, _ := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
				for _, id := range ids {
					answer(id)
				}
			}
		}
		err := pool.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM chats WHERE status NOT IN ('waiting', 'error')),
			(SELECT count(*) FROM structured_requests WHERE status = 'pending')`).Scan(&busy, &pending)
		if err != nil {
			t.Logf("settle: %v", err)
			return false
		}
		return busy == 0 && pending == 0
	})
}

// journal collects the messages concurrent senders sent.
type journal struct {
	mu     sync.Mutex
	inputs []input
}

func (j *journal) record(in input) {
	j.mu.Lock()
	j.inputs = append(j.inputs, in)
	j.mu.Unlock()
}

// requests returns the structured request ids the API answered.
func (j *journal) requests() []uuid.UUID {
	j.mu.Lock()
	defer j.mu.Unlock()
	var ids []uuid.UUID
	for _, in := range j.inputs {
		if in.Request != uuid.Nil {
			ids = append(ids, in.Request)
		}
	}
	return ids
}

// input is a user message a test sent.
type input struct {
	Chat uuid.UUID
	Text string // unique in the database
	// Request is the structured request id the API answered (Nil when the
	// message was ordinary or the answer was lost).
	Request uuid.UUID
	// Known: the API answered 2xx. Otherwise the connection was lost and
	// the message may or may not have been accepted.
	Known bool
	// Removed says whether the client deleted it from the queue.
	Removed removal
}

type removal int

const (
	notRemoved   removal = iota
	removed              // the deletion was answered 2xx
	maybeRemoved         // the deletion's answer was lost
)

// auditRequests checks the ledger after the traffic settled: every request
// in the database is finished with exactly one receipt that the ledger
// points at, every request a client was told about is among them, every
// succeeded value validates against its schema (checked here with another
// validator than the server's), and the invariant checker is clean.
func auditRequests(t *testing.T, pool *pgxpool.Pool, seen []uuid.UUID) map[string]int {
	t.Helper()
	ctx := context.Background()
	type row struct {
		ID       uuid.UUID
		Status   string
		Code     *string
		Schema   json.RawMessage
		Receipts int
		Pointer  *int64
		Receipt  json.RawMessage
	}
	rows, err := pool.Query(ctx, `SELECT r.request_id, r.status, r.error_code, r.schema,
			(SELECT count(*) FROM chat_messages m WHERE m.structured_request_id = r.request_id AND m.kind = 'receipt'),
			r.receipt_message_id,
			(SELECT m.content FROM chat_messages m WHERE m.id = r.receipt_message_id)
		FROM structured_requests r`)
	if err != nil {
		t.Fatal(err)
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.ID, &x.Status, &x.Code, &x.Schema, &x.Receipts, &x.Pointer, &x.Receipt)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[uuid.UUID]row{}
	outcomes := map[string]int{}
	for _, r := range all {
		byID[r.ID] = r
		key := r.Status
		if r.Code != nil {
			key += "/" + *r.Code
		}
		outcomes[key]++
		if r.Status == "pending" || r.Receipts != 1 || r.Pointer == nil {
			t.Errorf("request %s: status %s, %d receipts, receipt pointer %v", r.ID, r.Status, r.Receipts, r.Pointer)
			continue
		}
		if r.Status != "succeeded" {
			continue
		}
		parts, err := jsonb.ParseContent(r.Receipt)
		if err != nil {
			t.Errorf("request %s: receipt: %v", r.ID, err)
			continue
		}
		var value json.RawMessage
		for _, p := range parts {
			if p.Type == jsonb.PartOutcome && p.Outcome != nil {
				value = p.Outcome.Value
			}
		}
		res, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(r.Schema), gojsonschema.NewBytesLoader(value))
		if err != nil || !res.Valid() {
			t.Errorf("request %s succeeded with %s, which does not validate: %v %v", r.ID, value, err, res.Errors())
		}
	}
	for _, id := range seen {
		if _, ok := byID[id]; !ok {
			t.Errorf("request %s, accepted by the API, is not in the ledger", id)
		}
	}
	rep, err := check.Run(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Errorf("checker: %s", v)
	}
	return outcomes
}

// auditInputs checks that no message was lost: every accepted input is in
// its chat's history exactly once, unless it was a structured request that
// ended cancelled; an input whose answer was lost is there at most once; an
// input deleted from the queue is not there, and its request (if any) was
// cancelled.
func auditInputs(t *testing.T, pool *pgxpool.Pool, inputs []input) {
	t.Helper()
	ctx := context.Background()
	for _, in := range inputs {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM chat_messages
			WHERE kind = 'message' AND role = 'user' AND visibility = 'both' AND NOT deleted
			  AND content @> jsonb_build_array(jsonb_build_object('type', 'text', 'text', $1::text))`, in.Text).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		var status, code string
		if in.Request != uuid.Nil {
			_ = pool.QueryRow(ctx, `SELECT status, coalesce(error_code, '') FROM structured_requests WHERE request_id = $1`, in.Request).
				Scan(&status, &code)
		}
		switch {
		case n > 1:
			t.Errorf("input %q is in history %d times", in.Text, n)
		case in.Removed == removed:
			if n != 0 || (in.Request != uuid.Nil && code != "queue_deleted") {
				t.Errorf("input %q was deleted from the queue, but is in history %d times (request %s %s %s)", in.Text, n, in.Request, status, code)
			}
		case n == 0 && in.Known && in.Removed == notRemoved:
			if status != "cancelled" {
				t.Errorf("input %q (chat %s, request %s) was accepted but is not in history (request status %q)", in.Text, in.Chat, in.Request, status)
			}
		}
	}
}

// outcomeSummary renders outcome counts in a stable order.
func outcomeSummary(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}
