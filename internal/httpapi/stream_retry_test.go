package httpapi_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/testenv"
)

// A stream's reads (initialisation, catch-ups, the feed's
// reads after changes) may fail, or find nothing new, while commits go on.
// These tests fault the real reads (httpapi.TestSignals.StreamRead) and
// check that a stream never moves its watermark past changes it did not
// read, and that it reads again promptly once the database answers.

var errInjected = errors.New("injected: the database is unavailable")

// readFaults wraps a server's stream reads.
type readFaults struct {
	down   atomic.Bool  // every read fails
	failed atomic.Int64 // reads failed by down
	// failOwn fails the next read of a stream's own (not its first, not
	// the feed's).
	failOwn atomic.Bool
	// holdFirst holds the next first read of a stream once it has read,
	// until release is closed (reached is closed then).
	holdFirst        atomic.Bool
	reached, release chan struct{}
	// changed is told of every failure while down.
	changed chan struct{}
}

func newReadFaults() *readFaults {
	return &readFaults{reached: make(chan struct{}), release: make(chan struct{}), changed: make(chan struct{}, 1)}
}

func (f *readFaults) read(ctx context.Context, q httpapi.StreamQuery, read func(context.Context) (store.StreamRead, error)) (store.StreamRead, error) {
	switch {
	case f.down.Load():
		f.failed.Add(1)
		select {
		case f.changed <- struct{}{}:
		default:
		}
		return store.StreamRead{}, errInjected
	case !q.Full && !q.Feed && f.failOwn.CompareAndSwap(true, false):
		return store.StreamRead{}, errInjected
	case q.Full && f.holdFirst.CompareAndSwap(true, false):
		rd, err := read(ctx)
		close(f.reached)
		<-f.release
		return rd, err
	}
	return read(ctx)
}

// messageIDs returns the ids of the message events, and fails on a
// message sent twice.
func messageIDs(t *testing.T, evs []client.StreamEvent) []int64 {
	t.Helper()
	var ids []int64
	seen := map[int64]bool{}
	for _, e := range evs {
		if e.Message == nil {
			continue
		}
		if seen[e.Message.ID] {
			t.Fatalf("message %d sent twice (%s)", e.Message.ID, kinds(evs))
		}
		seen[e.Message.ID] = true
		ids = append(ids, e.Message.ID)
	}
	return ids
}

// sameAsHistory fails unless ids are the chat's history, in order.
func sameAsHistory(t *testing.T, c *client.Client, chat uuid.UUID, ids []int64, what string) {
	t.Helper()
	h, err := c.ListMessages(t.Context(), chat, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int64, 0, len(h.Messages))
	for _, m := range h.Messages {
		want = append(want, m.ID)
	}
	if len(ids) != len(want) {
		t.Fatalf("%s delivered messages %v, the history is %v", what, ids, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("%s delivered messages %v, the history is %v", what, ids, want)
		}
	}
}

// The receipt commits while the stream's reads fail; once they work again
// the stream delivers it within a second (it used to wait for the next
// change or the 10 s resync).
func TestStreamReadRetriedPromptly(t *testing.T) {
	t.Parallel()
	faults := newReadFaults()
	release := make(chan struct{})
	hold := func(ctx context.Context, _ *mockllm.Request) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	env := testenv.New(t, testenv.Options{APISignals: &httpapi.TestSignals{StreamRead: faults.read},
		Mock: mockllm.Options{BeforeRespond: hold}})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("report"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	req := *chat.Messages[0].StructuredOutputRequestID
	s := collect(t, c.Stream(ctx, chat.Chat.ID, 0))
	evs := s.until(t, "the initial status", func(e client.StreamEvent) bool { return e.Type == client.EventStatus })

	faults.down.Store(true)
	close(release)
	// The lookup does not read through the stream's path: the receipt is
	// committed while every stream read fails.
	if res, err := c.WaitStructuredOutput(ctx, req); err != nil || res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v %v", res, err)
	}
	// Reads keep failing after the commit: the stream must not have the
	// receipt yet.
	for from := faults.failed.Load(); faults.failed.Load() < from+3; {
		select {
		case <-faults.changed:
		case <-time.After(60 * time.Second):
			t.Fatalf("no read was retried in 60s (%d failed)", faults.failed.Load())
		}
	}
	for drained := false; !drained; {
		select {
		case ev := <-s.events:
			if isReceipt(req)(ev) {
				t.Fatal("the receipt arrived while every read failed")
			}
			evs = append(evs, ev)
		default:
			drained = true
		}
	}

	up := time.Now()
	faults.down.Store(false)
	evs = append(evs, s.until(t, "the receipt", isReceipt(req))...)
	if took := time.Since(up); took > time.Second {
		t.Fatalf("the receipt arrived %v after the reads worked again, want at most 1s", took)
	}
	evs = append(evs, s.until(t, "waiting", isStatus(client.StatusWaiting))...)
	sameAsHistory(t, c, chat.Chat.ID, messageIDs(t, evs), "the stream")
}

// A stream joins a feed that has read past the stream's first read, and
// its catch-up read fails: until a read of its own succeeds it is behind,
// and the feed's next read (which starts above what it missed) must not
// move it past the rows it has not seen.
func TestStreamCatchUpAfterAFailedReadMissesNothing(t *testing.T) {
	t.Parallel()
	faults := newReadFaults()
	env := testenv.New(t, testenv.Options{APISignals: &httpapi.TestSignals{StreamRead: faults.read}})
	c := env.Client("alice")
	ctx := t.Context()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("hello")})
	if err != nil {
		t.Fatal(err)
	}
	id := chat.Chat.ID
	a := collect(t, c.Stream(ctx, id, 0)) // keeps the chat's feed reading
	a.until(t, "the first turn's end", isStatus(client.StatusWaiting))

	// B reads (the history so far) and is held before it joins the feed.
	faults.holdFirst.Store(true)
	b := collect(t, c.Stream(ctx, id, 0))
	<-faults.reached
	// A turn commits and the feed reads it: B missed it. The turn ends
	// with its answer; a status event may not come, since a feed that
	// reads once after the turn sees waiting, as before.
	say := func(text string) {
		t.Helper()
		sent, err := c.SendMessage(ctx, id, client.SendMessageRequest{Content: []client.MessagePart{client.TextPart(text)}})
		if err != nil {
			t.Fatal(err)
		}
		if sent.Message == nil {
			t.Fatal("the message was queued on a waiting chat")
		}
		a.until(t, "the turn's answer", func(e client.StreamEvent) bool {
			return e.Message != nil && e.Message.ID > sent.Message.ID && e.Message.Role == client.RoleAssistant
		})
	}
	say("one")
	// B joins, finds the feed ahead, and its catch-up read fails.
	faults.failOwn.Store(true)
	close(faults.release)
	// Another turn: the feed's next read covers only what followed.
	say("two")
	h, err := c.ListMessages(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := h.Messages[len(h.Messages)-1].ID
	evs := b.until(t, "the last message", func(e client.StreamEvent) bool { return e.Message != nil && e.Message.ID == last })
	if faults.failOwn.Load() {
		t.Fatal("no catch-up read was made")
	}
	sameAsHistory(t, c, id, messageIDs(t, evs), "stream B")
}

// Several streams follow chats whose turns run tools while a third of all
// stream reads fail, at random; many reads find nothing new a client sees
// (claims, attempts, model-only rows). Every stream delivers its chat's
// history exactly: each message once, in order. CHATD_STREAM_SEED replays
// a run.
func TestStreamsUnderFailingReadsMissNothing(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CHATD_STREAM_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (CHATD_STREAM_SEED)", seed)
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 1))
	var failed, empty, reads atomic.Int64
	flaky := func(ctx context.Context, q httpapi.StreamQuery, read func(context.Context) (store.StreamRead, error)) (store.StreamRead, error) {
		reads.Add(1)
		mu.Lock()
		fail := !q.Full && rng.IntN(3) == 0
		mu.Unlock()
		if fail {
			failed.Add(1)
			return store.StreamRead{}, errInjected
		}
		rd, err := read(ctx)
		if err == nil && !q.Full && rd.Chat.SnapshotVersion > q.Watermark && len(rd.Changed) == 0 {
			empty.Add(1)
		}
		return rd, err
	}
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/notes.txt", []byte("make test"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each turn reads a file first (a step, its tool result), then answers.
	step := func(r *mockllm.Request) (mockllm.Step, bool) {
		if r.Messages[len(r.Messages)-1].Role == "user" {
			return mockllm.Step{Text: "Looking.", ToolCalls: []mockllm.ToolCall{{Name: "read_file", Arguments: `{"path":"notes.txt"}`}}}, true
		}
		return mockllm.Step{}, false
	}
	// Announced turns (no hand-off) are claimed by a worker: the claims
	// bump the chat's snapshot without a row a client sees, the empty
	// reads this test must exercise (a hand-off writes none).
	env := testenv.New(t, testenv.Options{APISignals: &httpapi.TestSignals{StreamRead: flaky}, Workspace: dir, NoHandoff: true,
		Mock: mockllm.Options{StepFor: step, ChunkDelay: time.Millisecond}})
	c := env.Client("alice")
	ctx := t.Context()
	const chats, turns = 3, 4
	var wg sync.WaitGroup
	for i := range chats {
		wg.Go(func() {
			chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("first " + strconv.Itoa(i))})
			if err != nil {
				t.Error(err)
				return
			}
			s := collect(t, c.Stream(ctx, chat.Chat.ID, 0))
			evs := s.until(t, "the first turn's end", isStatus(client.StatusWaiting))
			for n := range turns {
				if _, err := c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: text("turn " + strconv.Itoa(n))}); err != nil {
					t.Error(err)
					return
				}
				evs = append(evs, s.until(t, "a turn's start", isStatus(client.StatusRunning))...)
				evs = append(evs, s.until(t, "a turn's end", isStatus(client.StatusWaiting))...)
			}
			// Every row is committed before the last status: what the
			// stream sent by then is the whole history.
			sameAsHistory(t, c, chat.Chat.ID, messageIDs(t, evs), "chat "+strconv.Itoa(i))
		})
	}
	wg.Wait()
	t.Logf("%d stream reads: %d failed, %d found nothing a client sees", reads.Load(), failed.Load(), empty.Load())
	if failed.Load() == 0 || empty.Load() == 0 {
		t.Fatalf("the run exercised %d failed and %d empty reads; want both", failed.Load(), empty.Load())
	}
}
