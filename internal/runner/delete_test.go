package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

// hookLog is a webhook receiver that counts the deliveries of each request.
type hookLog struct {
	mu    sync.Mutex
	seen  map[uuid.UUID][]string // request -> events delivered
	total int
	srv   *httptest.Server
}

func newHookLog(t *testing.T) *hookLog {
	h := &hookLog{seen: map[uuid.UUID][]string{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var p struct {
			Type string `json:"type"`
			Data struct {
				RequestID uuid.UUID `json:"request_id"`
				Status    string    `json:"status"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &p); err != nil || "structured_output."+p.Data.Status != p.Type {
			t.Errorf("webhook payload %s: %v", b, err)
		}
		h.mu.Lock()
		h.seen[p.Data.RequestID] = append(h.seen[p.Data.RequestID], p.Type)
		h.total++
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookLog) config() []config.Webhook {
	return []config.Webhook{{Name: "app", URL: h.srv.URL, Secret: "a-plain-secret-of-32-characters!"}}
}

// deliveredOnce waits until every request's webhook deliveries are
// recorded as delivered, then checks each was POSTed exactly once, as
// cancelled: a delivered row is never claimed again, so its one attempt is
// its only POST.
func (h *hookLog) deliveredOnce(t *testing.T, env *testenv.Env, reqs []uuid.UUID) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var delivered, attempts int
		err := env.Pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE state = 'delivered'), coalesce(sum(attempts), 0)
			FROM webhook_deliveries WHERE request_id = ANY($1)`, reqs).Scan(&delivered, &attempts)
		if err != nil {
			t.Fatal(err)
		}
		if delivered == len(reqs) {
			if attempts != len(reqs) {
				t.Errorf("%d attempts for %d deliveries", attempts, len(reqs))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d webhook deliveries made", delivered, len(reqs))
		}
		time.Sleep(10 * time.Millisecond) // polling the outbox
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range reqs {
		if got := h.seen[r]; len(got) != 1 || got[0] != "structured_output.cancelled" {
			t.Errorf("request %s: webhooks %v, want one structured_output.cancelled", r, got)
		}
	}
}

// holds are the provider calls a test holds in flight.
type holds struct {
	held, cut chan string
}

func newHolds(n int) *holds { return &holds{held: make(chan string, n), cut: make(chan string, n)} }

// marked holds the provider calls of chats whose first user message
// carries marker until the call's context ends (an interrupt, a deletion),
// and reports each one held and each one cut.
func (h *holds) marked(marker string) func(context.Context, *mockllm.Request) error {
	return func(ctx context.Context, req *mockllm.Request) error {
		if first := firstUser(req); strings.Contains(first, marker) {
			h.held <- first
			<-ctx.Done()
			h.cut <- first
		}
		return nil
	}
}

// wait waits for n calls on ch, within a minute.
func (h *holds) wait(t *testing.T, ch chan string, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatalf("%d of %d provider calls", i, n)
		}
	}
}

// waitLog waits until the env has logged line n times.
func waitLog(t *testing.T, env *testenv.Env, line string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for strings.Count(env.Logs(), line) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%q logged %d times, want %d", line, strings.Count(env.Logs(), line), n)
		}
		time.Sleep(10 * time.Millisecond) // polling the log
	}
}

const turnStops = "chat deleted: its turn stops"

// ownerOf reads the user id behind a name's token.
func ownerOf(t *testing.T, env *testenv.Env, name string) uuid.UUID {
	t.Helper()
	u, err := env.Store.Authenticate(t.Context(), env.Token(name))
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

// chatLeft counts the rows of the chats still in any table but the
// tombstones.
func chatLeft(t *testing.T, env *testenv.Env, chats []uuid.UUID) int {
	t.Helper()
	var n int
	err := env.Pool.QueryRow(t.Context(), `SELECT
		(SELECT count(*) FROM chats WHERE id = ANY($1) OR parent_chat_id = ANY($1)) +
		(SELECT count(*) FROM chat_messages WHERE chat_id = ANY($1)) +
		(SELECT count(*) FROM chat_queued_messages WHERE chat_id = ANY($1)) +
		(SELECT count(*) FROM structured_requests WHERE chat_id = ANY($1)) +
		(SELECT count(*) FROM stream_tickets WHERE chat_id = ANY($1)) +
		(SELECT count(*) FROM idempotency_keys WHERE chat_id = ANY($1))`, chats).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDeleteDuringTurnOnAnotherReplica: replica A runs a structured turn,
// its provider call in flight; replica B deletes the chat. The request is
// cancelled (chat_deleted) and its webhook delivered once; a long poll on
// A answers it; A's worker stops its step and writes nothing; no row of
// the chat comes back.
func TestDeleteDuringTurnOnAnotherReplica(t *testing.T) {
	t.Parallel()
	hooks := newHookLog(t)
	h := newHolds(1)
	// A long lease: no renewal (which would find the chat gone) cuts the
	// step before the deletion does.
	a := testenv.New(t, testenv.Options{Webhooks: hooks.config(), Runner: runner.Options{Lease: 10 * time.Minute}, Mock: mockllm.Options{BeforeRespond: h.marked("[hold]"),
		StepFor: func(*mockllm.Request) (mockllm.Step, bool) {
			return mockllm.Step{Value: json.RawMessage(`{"command":"late"}`)}, true
		}}})
	b := testenv.OnPool(t, a.Pool, testenv.Options{NoRunner: true, Webhooks: hooks.config()})
	alice := a.Client("alice")
	chat, req := createText(t, alice, "[hold] report")
	h.wait(t, h.held, 1)
	polled := make(chan client.StructuredOutputResult, 1)
	go func() {
		r, err := alice.WaitStructuredOutput(t.Context(), req)
		if err != nil {
			t.Errorf("long poll: %v", err)
		}
		polled <- r
	}()

	d, err := b.Store.DeleteChat(t.Context(), ownerOf(t, b, "alice"), chat)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Cancelled) != 1 || d.Cancelled[0].Request.RequestID != req || *d.Cancelled[0].Request.ErrorCode != client.CodeChatDeleted {
		t.Fatalf("deletion %+v", d)
	}
	h.wait(t, h.cut, 1) // the provider call in flight is cut at once
	waitLog(t, a, turnStops, 1)
	if r := <-polled; r.Status != client.OutputCancelled || r.Value != nil {
		t.Errorf("long poll answered %+v", r)
	}
	if n := chatLeft(t, a, []uuid.UUID{chat}); n != 0 {
		t.Errorf("%d rows of the deleted chat", n)
	}
	hooks.deliveredOnce(t, a, []uuid.UUID{req})
	checkClean(t, a)
}

// TestDeleteWithQueuedRequests: five chats, each running a structured turn
// with twenty structured messages queued behind it (the most a queue
// holds), are deleted at once, each by its own transaction: 105 requests
// cancelled, each with one receipt and one webhook delivery, 100 queued
// messages gone.
func TestDeleteWithQueuedRequests(t *testing.T) {
	t.Parallel()
	hooks := newHookLog(t)
	h := newHolds(5)
	env := testenv.New(t, testenv.Options{Webhooks: hooks.config(), Runner: runner.Options{MaxRunning: 8},
		Mock: mockllm.Options{BeforeRespond: h.marked("[hold]")}})
	alice := env.Client("alice")
	var chats, reqs []uuid.UUID
	for i := range 5 {
		chat, req := createText(t, alice, fmt.Sprintf("[hold] chat %d", i))
		chats, reqs = append(chats, chat), append(reqs, req)
	}
	h.wait(t, h.held, len(chats))
	for _, chat := range chats {
		for j := range 20 {
			res, err := alice.SendMessage(t.Context(), chat, client.SendMessageRequest{Content: []client.MessagePart{client.TextPart(fmt.Sprint("queued ", j))},
				ResponseFormat: structured(reportSchema), BusyBehavior: client.BusyQueue})
			if err != nil || res.QueuedMessage == nil || res.QueuedMessage.StructuredOutputRequestID == nil {
				t.Fatalf("queue: %+v %v", res, err)
			}
			reqs = append(reqs, *res.QueuedMessage.StructuredOutputRequestID)
		}
	}
	owner := ownerOf(t, env, "alice")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var cancelled, queued int
	for _, chat := range chats {
		wg.Go(func() {
			d, err := env.Store.DeleteChat(t.Context(), owner, chat)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			cancelled, queued = cancelled+len(d.Cancelled), queued+int(d.Queued)
			mu.Unlock()
		})
	}
	wg.Wait()
	if cancelled != 105 || queued != 100 {
		t.Fatalf("cancelled %d requests, %d queued", cancelled, queued)
	}
	h.wait(t, h.cut, 5)
	waitLog(t, env, turnStops, 5)
	if n := chatLeft(t, env, chats); n != 0 {
		t.Errorf("%d rows of the deleted chats", n)
	}
	var outcomes int
	if err := env.Pool.QueryRow(t.Context(), `SELECT count(*) FROM request_tombstones WHERE request_id = ANY($1)
		AND status = 'cancelled' AND error_code = 'chat_deleted'`, reqs).Scan(&outcomes); err != nil || outcomes != len(reqs) {
		t.Errorf("%d cancelled tombstones of %d (%v)", outcomes, len(reqs), err)
	}
	hooks.deliveredOnce(t, env, reqs)
	checkClean(t, env)
}

// createText starts a structured chat with text and returns the chat and
// request ids.
func createText(t *testing.T, c *client.Client, text string) (uuid.UUID, uuid.UUID) {
	t.Helper()
	res, err := c.CreateChat(t.Context(), client.CreateChatRequest{Content: []client.MessagePart{client.TextPart(text)},
		ResponseFormat: structured(reportSchema)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Chat.ID, *res.Messages[0].StructuredOutputRequestID
}

// spawnParent scripts a parent that spawns two structured children
// ([parent]) whose calls the mock holds, and finalizes from their results.
func spawnParent(h *holds) mockllm.Options {
	return mockllm.Options{BeforeRespond: h.marked("CHILD-HOLD"), StepFor: func(req *mockllm.Request) (mockllm.Step, bool) {
		switch first := firstUser(req); {
		case strings.Contains(first, "[parent]") && lastUser(req) != "":
			return mockllm.Step{ToolCalls: []mockllm.ToolCall{spawnCall("call_a", "CHILD-HOLD a", childSchema),
				spawnCall("call_b", "CHILD-HOLD b", childSchema)}}, true
		case strings.Contains(first, "[parent]"):
			return mockllm.Step{Value: json.RawMessage(`{"child_count": 2}`)}, true
		}
		return mockllm.Step{}, false
	}}
}

// TestDeleteParentWithRunningChildren: a parent awaits two children whose
// turns run; deleting the parent deletes the children, cancels all three
// requests, and stops both children's workers.
func TestDeleteParentWithRunningChildren(t *testing.T) {
	t.Parallel()
	h := newHolds(2)
	env := testenv.New(t, testenv.Options{Spawn: &runner.SpawnOptions{}, Runner: runner.Options{MaxRunning: 4}, Mock: spawnParent(h)})
	alice := env.Client("alice")
	parent, req := createParent(t, alice, "[parent] count")
	h.wait(t, h.held, 2)
	kids := children(t, alice, parent)
	chats, reqs := []uuid.UUID{parent}, []uuid.UUID{req}
	for _, k := range kids {
		chats, reqs = append(chats, k.ID), append(reqs, childRequest(t, alice, k.ID))
	}
	d, err := env.Store.DeleteChat(t.Context(), ownerOf(t, env, "alice"), parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Chats) != 3 || len(d.Cancelled) != 3 {
		t.Fatalf("deletion %+v", d)
	}
	h.wait(t, h.cut, 2)
	waitLog(t, env, turnStops, 2)
	if n := chatLeft(t, env, chats); n != 0 {
		t.Errorf("%d rows of the deleted chats", n)
	}
	for _, r := range reqs {
		got, err := alice.GetStructuredOutput(t.Context(), r, 0)
		if err != nil || got.Status != client.OutputCancelled {
			t.Errorf("lookup of %s: %+v %v", r, got, err)
		}
	}
	checkClean(t, env)
}

// TestDeleteAwaitedChild: deleting one child its parent awaits answers
// the parent's call with the child's cancelled receipt; the parent goes on
// when the other child is deleted too, and finalizes.
func TestDeleteAwaitedChild(t *testing.T) {
	t.Parallel()
	h := newHolds(2)
	env := testenv.New(t, testenv.Options{Spawn: &runner.SpawnOptions{}, Runner: runner.Options{MaxRunning: 4}, Mock: spawnParent(h)})
	alice := env.Client("alice")
	parent, req := createParent(t, alice, "[parent] count")
	h.wait(t, h.held, 2)
	owner := ownerOf(t, env, "alice")
	for _, k := range children(t, alice, parent) {
		if _, err := env.Store.DeleteChat(t.Context(), owner, k.ID); err != nil {
			t.Fatal(err)
		}
	}
	res := wait(t, alice, req)
	if res.Status != client.OutputSucceeded {
		t.Fatalf("parent %+v", res)
	}
	for call, r := range parentResults(t, env, parent) {
		if !r.IsError || !strings.Contains(r.Text, string(client.CodeChatDeleted)) {
			t.Errorf("result of %s: %+v", call, r)
		}
	}
	if _, err := env.Store.DeleteChat(t.Context(), owner, parent); err != nil {
		t.Fatal(err)
	}
	var tombstones int
	if err := env.Pool.QueryRow(t.Context(), `SELECT count(*) FROM chat_tombstones`).Scan(&tombstones); err != nil || tombstones != 3 {
		t.Errorf("%d tombstones (%v)", tombstones, err)
	}
	checkClean(t, env)
}
