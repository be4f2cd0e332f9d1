package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/testenv"
)

// post sends a raw POST with an optional Idempotency-Key.
func post(t *testing.T, env *testenv.Env, token, path, key, body string) (int, http.Header, []byte) {
	t.Helper()
	res := call(t, env, token, "POST", path, body, httpapi.IdempotencyKeyHeader, key)
	return res.status, res.header, res.body
}

func count(t *testing.T, env *testenv.Env, query string, args ...any) int {
	t.Helper()
	var n int
	if err := env.Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	alice, bob := env.Token("alice"), env.Token("bob")
	chats := func(user string) int {
		return count(t, env, `SELECT count(*) FROM chats c JOIN users u ON u.id = c.owner_id WHERE u.name = $1`, user)
	}
	const create = `{"content":[{"type":"text","text":"hi"}]}`

	// The first request does the work; the repeat gets the same answer and does nothing.
	st1, h1, b1 := post(t, env, alice, "/api/v1/chats", "k-1", create)
	st2, h2, b2 := post(t, env, alice, "/api/v1/chats", "k-1", create)
	if st1 != 201 || st2 != 201 || !bytes.Equal(b1, b2) {
		t.Fatalf("first %d %s, repeat %d %s", st1, b1, st2, b2)
	}
	if h1.Get(httpapi.ReplayedHeader) != "" || h2.Get(httpapi.ReplayedHeader) != "true" {
		t.Fatalf("replayed headers %q, %q", h1.Get(httpapi.ReplayedHeader), h2.Get(httpapi.ReplayedHeader))
	}
	if n := chats("alice"); n != 1 {
		t.Fatalf("%d chats after a repeated create", n)
	}

	// The same key with another body, or on another route: 422, nothing done.
	if st, _, b := post(t, env, alice, "/api/v1/chats", "k-1", `{"content":[{"type":"text","text":"other"}]}`); st != 422 || !strings.Contains(string(b), `"field":"Idempotency-Key"`) {
		t.Fatalf("reused key: %d %s", st, b)
	}
	// Another user's key space is their own.
	if st, h, _ := post(t, env, bob, "/api/v1/chats", "k-1", create); st != 201 || h.Get(httpapi.ReplayedHeader) != "" || chats("bob") != 1 {
		t.Fatalf("bob with alice's key: %d, replayed %q", st, h.Get(httpapi.ReplayedHeader))
	}
	if n := chats("alice"); n != 1 {
		t.Fatalf("%d chats after a refused reuse", n)
	}

	// A send to the busy chat (no workers: it stays running) is queued once.
	var chatID string
	if i := bytes.Index(b1, []byte(`"chat":{"id":"`)); i >= 0 {
		chatID = string(b1[i+14 : i+14+36])
	}
	path := "/api/v1/chats/" + chatID + "/messages"
	const send = `{"content":[{"type":"text","text":"later"}]}`
	s1, _, sb1 := post(t, env, alice, path, "k-2", send)
	s2, sh2, sb2 := post(t, env, alice, path, "k-2", send)
	if s1 != 200 || s2 != 200 || !bytes.Equal(sb1, sb2) || sh2.Get(httpapi.ReplayedHeader) != "true" {
		t.Fatalf("send: %d %s / %d %s", s1, sb1, s2, sb2)
	}
	if n := count(t, env, `SELECT count(*) FROM chat_queued_messages WHERE chat_id = $1`, chatID); n != 1 {
		t.Fatalf("%d queued messages after a repeated send", n)
	}
	if st, _, _ := post(t, env, alice, "/api/v1/chats", "k-2", send); st != 422 {
		t.Fatalf("a send's key on a create: %d", st)
	}

	// A refused request keeps nothing under its key: fixed, it goes through.
	if st, _, _ := post(t, env, alice, "/api/v1/chats", "k-3", `{"content":[]}`); st != 400 {
		t.Fatalf("invalid body: %d", st)
	}
	if st, h, _ := post(t, env, alice, "/api/v1/chats", "k-3", create); st != 201 || h.Get(httpapi.ReplayedHeader) != "" {
		t.Fatalf("after a refusal: %d, replayed %q", st, h.Get(httpapi.ReplayedHeader))
	}

	// After 24 hours a key is free again.
	if _, err := env.Pool.Exec(context.Background(), `UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = 'k-1'`); err != nil {
		t.Fatal(err)
	}
	before := chats("alice")
	if st, h, _ := post(t, env, alice, "/api/v1/chats", "k-1", create); st != 201 || h.Get(httpapi.ReplayedHeader) != "" || chats("alice") != before+1 {
		t.Fatalf("expired key: %d, replayed %q", st, h.Get(httpapi.ReplayedHeader))
	}

	// Malformed keys.
	for _, k := range []string{strings.Repeat("k", 256), "with space", "caf\u00e9"} {
		if st, _, b := post(t, env, alice, "/api/v1/chats", k, create); st != 400 || !strings.Contains(string(b), `"field":"Idempotency-Key"`) {
			t.Fatalf("key %q: %d %s", k, st, b)
		}
	}
}

// Concurrent requests with one key: one does the work, every one gets its answer.
func TestIdempotencyKeyConcurrent(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	token := env.Token("alice")
	const n = 8
	// Hold alice's user row so that every request passes the replay check
	// and then waits inside its transaction (the chat's foreign key needs a
	// share lock on it): the requests then race for the key for real.
	ctx := context.Background()
	hold, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx)
	if _, err := hold.Exec(ctx, `SELECT 1 FROM users WHERE name = 'alice' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	statuses := make([]int, n)
	bodies := make([][]byte, n)
	for i := range n {
		wg.Go(func() {
			statuses[i], _, bodies[i] = post(t, env, token, "/api/v1/chats", "same", `{"content":[{"type":"text","text":"once"}]}`)
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for count(t, env, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) < n {
		if time.Now().After(deadline) {
			t.Fatal("the requests never queued behind the held row")
		}
		time.Sleep(5 * time.Millisecond) // polling the database's view of other sessions
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := range n {
		if statuses[i] != 201 || !bytes.Equal(bodies[i], bodies[0]) {
			t.Fatalf("request %d: %d %s; first %d %s", i, statuses[i], bodies[i], statuses[0], bodies[0])
		}
	}
	if c := count(t, env, `SELECT count(*) FROM chats`); c != 1 {
		t.Fatalf("%d chats", c)
	}
}

// The Go client sends the key from the context.
func TestClientIdempotencyKey(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	c := env.Client("alice")
	ctx := client.WithIdempotencyKey(context.Background(), "client-key")
	req := client.CreateChatRequest{Content: text("hi")}
	a, err := c.CreateChat(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateChat(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if a.Chat.ID != b.Chat.ID || count(t, env, `SELECT count(*) FROM chats`) != 1 {
		t.Fatalf("two chats: %s, %s", a.Chat.ID, b.Chat.ID)
	}
}
