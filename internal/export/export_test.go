package export_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/bench"
	"github.com/chatd/chatd/internal/check"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/export"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/store"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func clean(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	rep, err := check.Run(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Errorf("check: %v", v)
	}
}

// exportOf exports the named user of st into a buffer.
func exportOf(t *testing.T, st *store.Store, name string) []byte {
	t.Helper()
	u, err := st.FindUser(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := export.User(t.Context(), st, u.ID, u.Name, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// normalized reads an export's lines as a reader that is not chatd would,
// generic JSON, and hands them over a chat at a time (its key, and its
// lines): the header's time is dropped, and message ids, which an import
// assigns anew in the same order, are replaced by their rank in their chat.
func normalized(t *testing.T, r io.Reader, each func(chat string, lines []string)) {
	t.Helper()
	type ref struct {
		chat string
		rank int
	}
	ranks := map[float64]ref{}
	var chat string
	var group []map[string]any
	flush := func() {
		var out []string
		for _, l := range group {
			for _, k := range []string{"receipt_message_id", "spawn_message_id"} {
				if id, ok := l[k].(float64); ok {
					l[k] = fmt.Sprint(ranks[id].chat, "#", ranks[id].rank)
				}
			}
			b, _ := json.Marshal(l)
			out = append(out, string(b))
		}
		if len(out) > 0 {
			each(chat, out)
		}
		group = nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	n := 0
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		switch l["type"] {
		case export.TypeHeader:
			delete(l, "exported_at")
			chat = "header"
		case export.TypeChat:
			flush()
			chat, n = l["id"].(string), 0
		case export.TypeMessage:
			n++
			ranks[l["id"].(float64)] = ref{chat, n}
			l["id"] = n
		case export.TypeEnd:
			flush()
			chat = "end"
		}
		group = append(group, l)
	}
	flush()
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// chatsOf reads an export, normalized, by chat.
func chatsOf(t *testing.T, b []byte) map[string][]string {
	out := map[string][]string{}
	normalized(t, bytes.NewReader(b), func(chat string, lines []string) { out[chat] = lines })
	return out
}

// idleChat creates a chat (a child of parent, when valid) and ends its
// turn with outcome for its request, if it has one.
func idleChat(t *testing.T, st *store.Store, owner uuid.UUID, parent uuid.NullUUID, req *store.RequestSpec, o *store.Outcome) uuid.UUID {
	t.Helper()
	ctx := t.Context()
	chat, input, err := st.CreateChat(ctx, store.NewChat{OwnerID: owner, Model: "m", Content: []jsonb.Part{jsonb.Text("hello")},
		ParentChatID: parent, Request: req, Title: "made"})
	if err != nil {
		t.Fatal(err)
	}
	worker := uuid.New()
	c, err := st.ClaimTurn(ctx, store.ClaimParams{Worker: worker, Chat: chat.ID, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	e := store.Ending{Messages: []store.NewMessage{{Role: client.RoleAssistant, Parts: []jsonb.Part{jsonb.Text("hi")},
		RequestID: input.StructuredRequestID, Usage: json.RawMessage(`{"input_tokens":3,"output_tokens":4}`)}}}
	if o != nil {
		o.RequestID = input.StructuredRequestID.UUID
		e.Outcomes = []store.Outcome{*o}
	}
	end := store.FinishTurn(e)
	end.Fence = store.Fence{ChatID: chat.ID, WorkerID: worker, HistoryVersion: c.Turn.Chat.HistoryVersion}
	if _, err := st.Apply(ctx, end); err != nil {
		t.Fatal(err)
	}
	return chat.ID
}

// TestRoundTrip: alice's chats — seeded structured ones, a failed request,
// a chat with a child, one running with a request queued — are exported,
// imported into an empty database and exported again: the same lines but
// for the running chat, which comes back at rest with its requests
// cancelled and without its queue; chatd check is clean on both sides.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	from, to := dbtest.New(t), dbtest.New(t)
	src, dst := store.New(from), store.New(to)
	owner := seedChats(t, from, "alice", 20, time.Hour, "seeded")
	spec := &store.RequestSpec{Name: "n", Description: "d", Schema: json.RawMessage(`{"type":"integer"}`)}
	idleChat(t, src, owner, uuid.NullUUID{}, spec, &store.Outcome{Status: client.OutputFailed, Code: client.CodeNotProduced, Message: "no"})
	parent := idleChat(t, src, owner, uuid.NullUUID{}, nil, nil)
	idleChat(t, src, owner, uuid.NullUUID{UUID: parent, Valid: true}, nil, nil)
	running, input, err := src.CreateChat(ctx, store.NewChat{OwnerID: owner, Model: "m", Content: []jsonb.Part{jsonb.Text("go")}, Request: spec})
	if err != nil {
		t.Fatal(err)
	}
	queued, err := src.SendMessage(ctx, store.SendParams{OwnerID: owner, ChatID: running.ID, Content: []jsonb.Part{jsonb.Text("next")}, Request: spec})
	if err != nil {
		t.Fatal(err)
	}
	first := exportOf(t, src, "alice")

	// The target's webhooks are owed the receipts the import writes (the
	// running chat's cancellations), not those it restores.
	all := []string{"structured_output.succeeded", "structured_output.failed", "structured_output.cancelled"}
	if err := dst.SyncWebhooks(ctx, map[string][]string{"app": all}); err != nil {
		t.Fatal(err)
	}
	n, err := export.Import(ctx, dst, bytes.NewReader(first), "")
	if err != nil {
		t.Fatal(err)
	}
	if n.Chats != 24 || n.Queued != 1 {
		t.Errorf("imported %+v", n)
	}
	second := exportOf(t, dst, "alice")
	a, b := chatsOf(t, first), chatsOf(t, second)
	if len(a) != len(b) || len(a) != 26 { // the header, 24 chats, the end line
		t.Errorf("%d groups exported, %d re-exported", len(a), len(b))
	}
	// Only the running chat differs: it is at rest, its two requests were
	// cancelled with receipts, its queued message was left out; the end
	// line counts the queued message no more.
	for chat, was := range a {
		now := b[chat]
		if chat == running.ID.String() || chat == "end" {
			if slices.Equal(was, now) {
				t.Errorf("%s came back as it was", chat)
			}
			continue
		}
		if !slices.Equal(was, now) {
			t.Errorf("chat %s differs:\n  was %s\n  now %s", chat, strings.Join(was, "\n      "), strings.Join(now, "\n      "))
		}
	}
	alice, err := dst.FindUser(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []uuid.UUID{input.StructuredRequestID.UUID, queued.Queued.StructuredRequestID.UUID} {
		got, err := dst.GetRequest(ctx, alice.ID, req)
		if err != nil || got.Request.Status != client.OutputCancelled || *got.Request.ErrorCode != client.CodeInterrupted {
			t.Errorf("imported pending request %s: %+v %v", req, got.Request, err)
		}
	}
	var owed []uuid.UUID
	rows, err := to.Query(ctx, `SELECT request_id FROM webhook_deliveries ORDER BY request_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		owed = append(owed, id)
	}
	if want := []uuid.UUID{input.StructuredRequestID.UUID, queued.Queued.StructuredRequestID.UUID}; len(owed) != 2 ||
		!slices.Contains(owed, want[0]) || !slices.Contains(owed, want[1]) {
		t.Errorf("webhook deliveries owed for %v, want %v", owed, want)
	}
	clean(t, from)
	clean(t, to)

	// The same export again: its chats are there already.
	if _, err := export.Import(ctx, dst, bytes.NewReader(first), ""); !store.IsConstraint(err, store.ChatsPkey) {
		t.Errorf("second import: %v", err)
	}
	// Deleted there: the import may not bring them back.
	for _, lines := range a {
		var c export.Chat
		if json.Unmarshal([]byte(lines[0]), &c) == nil && c.Type == export.TypeChat && c.ParentChatID == nil {
			if _, err := dst.DeleteChat(ctx, alice.ID, c.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := export.Import(ctx, dst, bytes.NewReader(first), ""); !store.IsConstraint(err, store.ChatsNotDeleted) {
		t.Errorf("import of deleted chats: %v", err)
	}
	clean(t, to)
}

// TestImportRefusesBrokenExports: a cut export, an unknown field, a row
// before its chat and a wrong version are refused, naming the line.
func TestImportRefusesBrokenExports(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	from := dbtest.New(t)
	seedChats(t, from, "alice", 3, time.Hour, "seeded")
	whole := exportOf(t, store.New(from), "alice")
	ls := strings.SplitAfter(strings.TrimSuffix(string(whole), "\n"), "\n")
	cases := map[string]string{
		"cut":        strings.Join(ls[:len(ls)-1], ""),
		"unknown":    strings.Replace(string(whole), `"type":"chat",`, `"type":"chat","colour":"red",`, 1),
		"row first":  ls[0] + strings.Join(ls[2:], ""),
		"version":    strings.Replace(string(whole), `"version":1`, `"version":9`, 1),
		"not json":   ls[0] + "{\n",
		"bad counts": strings.Replace(string(whole), `"chats":3`, `"chats":4`, 1),
		"empty":      "",
		"other chat": ls[0] + ls[1] + strings.Replace(ls[2], `"chat_id":"`, `"chat_id":"0`, 1),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := export.Import(ctx, store.New(dbtest.New(t)), strings.NewReader(in), "")
			if !errors.Is(err, export.ErrFormat) && !(name == "empty" && err != nil) {
				t.Fatalf("import: %v", err)
			}
		})
	}
}

// heapBytes reads the heap's live object bytes.
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// exportPeak exports the named user into w with the heap sampled
// throughout, and returns how far its peak rose above where it was.
func exportPeak(t *testing.T, st *store.Store, name string, w io.Writer) (export.Counts, int64) {
	t.Helper()
	u, err := st.FindUser(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	base := heapBytes()
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			peak = max(peak, heapBytes())
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	start := time.Now()
	counts, err := export.User(t.Context(), st, u.ID, u.Name, w)
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	growth := int64(peak) - int64(base)
	t.Logf("%s: %d chats, %d messages in %s; heap peak %.1f MB above the %.1f MB before", name, counts.Chats, counts.Messages,
		took.Round(time.Millisecond), float64(growth)/(1<<20), float64(base)/(1<<20))
	return counts, growth
}

// countingWriter counts what goes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// TestExportStreamsAtConstantMemory: a user with 400 chats (set
// CHATD_EXPORT_CHATS for more) and one with a quarter as many are exported
// with the heap sampled throughout: the peak does not grow with the number
// of chats (the export writes each page as it reads it). The big export
// round-trips through an import into an empty database.
func TestExportStreamsAtConstantMemory(t *testing.T) {
	t.Parallel()
	n := 400
	if s := os.Getenv("CHATD_EXPORT_CHATS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	from := dbtest.New(t)
	st := store.New(from)
	text := strings.Repeat("a long message ", 1100) // 16 KB: a page of chats is 1.6 MB
	seedChats(t, from, "alice", n, time.Hour, text)
	seedChats(t, from, "bob", n/4, time.Hour, text)
	small := &countingWriter{w: io.Discard}
	_, smallPeak := exportPeak(t, st, "bob", small)
	file, err := os.CreateTemp(t.TempDir(), "export-*.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	big := &countingWriter{w: file}
	counts, bigPeak := exportPeak(t, st, "alice", big)
	t.Logf("export sizes: %.1f MB and %.1f MB", float64(small.n)/(1<<20), float64(big.n)/(1<<20))
	if counts.Chats != n || counts.Messages != 3*n {
		t.Fatalf("exported %+v", counts)
	}
	if bigPeak > smallPeak+3<<20 {
		t.Errorf("the heap peak grew from %d KB to %d KB for %d times the chats (%d MB)", smallPeak>>10, bigPeak>>10, 4, big.n>>20)
	}

	to := dbtest.New(t)
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := export.Import(ctx, store.New(to), file, ""); err != nil {
		t.Fatal(err)
	}
	t.Logf("imported in %s", time.Since(start).Round(time.Millisecond))
	sameExports(t, file, store.New(to))
	clean(t, to)
}

// sameExports compares an export file with a new export of st, a chat at
// a time, normalized, without holding either.
func sameExports(t *testing.T, file *os.File, st *store.Store) {
	t.Helper()
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		u, err := st.FindUser(context.Background(), "alice")
		if err == nil {
			_, err = export.User(context.Background(), st, u.ID, u.Name, pw)
		}
		pw.CloseWithError(err)
	}()
	type group struct {
		chat  string
		lines []string
	}
	want := make(chan group, 64)
	go func() {
		defer close(want)
		normalized(t, file, func(chat string, lines []string) { want <- group{chat, lines} })
	}()
	n := 0
	normalized(t, pr, func(chat string, lines []string) {
		n++
		if w := <-want; w.chat != chat || !slices.Equal(w.lines, lines) {
			t.Fatalf("group %d differs:\n  was %s %v\n  now %s %v", n, w.chat, w.lines, chat, lines)
		}
	})
	if rest, ok := <-want; ok {
		t.Fatalf("the re-export ends after %d groups; next was %s", n, rest.chat)
	}
}

// seedChats writes n chats of the user name at rest (bench.SeedChats).
func seedChats(t *testing.T, pool *pgxpool.Pool, name string, n int, age time.Duration, text string) uuid.UUID {
	t.Helper()
	owner, err := bench.SeedChatsIn(t.Context(), pool, name, n, age, text)
	if err != nil {
		t.Fatalf("seed %d chats: %v", n, err)
	}
	return owner
}
