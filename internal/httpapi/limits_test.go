package httpapi_test

import (
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/testenv"
)

// TestRunnablePerUserLimit: a create or a send that would give its user a
// fourth runnable chat (limit 3) is answered 429 with Retry-After and a
// message naming the limit, and stores nothing; another user is not
// affected, and a message queued behind a running turn starts nothing, so
// it is not refused.
func TestRunnablePerUserLimit(t *testing.T) {
	t.Parallel()
	// No runner: every admitted chat stays runnable.
	env := testenv.New(t, testenv.Options{NoRunner: true, MaxRunnablePerUser: 3})
	alice, bob := env.Token("alice"), env.Token("bob")
	const body = `{"content":[{"type":"text","text":"hello"}]}`
	var chats []string
	for i := range 3 {
		res := call(t, env, alice, "POST", "/api/v1/chats", body)
		if res.status != 201 {
			t.Fatalf("create %d: %d %s", i, res.status, res.body)
		}
		chats = append(chats, res.header.Get("Location"))
	}
	first := chats[0]
	res := call(t, env, alice, "POST", "/api/v1/chats", body)
	if res.status != 429 || res.header.Get("Retry-After") == "" || !strings.Contains(res.err.Message, "--max-runnable-per-user") ||
		!strings.Contains(res.err.Message, "3") {
		t.Fatalf("the fourth create: %d, Retry-After %q, %q", res.status, res.header.Get("Retry-After"), res.err.Message)
	}
	var n int
	if err := env.Pool.QueryRow(t.Context(), `SELECT count(*) FROM chats c JOIN users u ON u.id = c.owner_id WHERE u.name = 'alice'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("alice has %d chats after the refusal, want 3", n)
	}
	if res := call(t, env, bob, "POST", "/api/v1/chats", body); res.status != 201 {
		t.Fatalf("bob's create: %d %s", res.status, res.body)
	}
	// Queued behind the running turn: no new runnable chat.
	if res := call(t, env, alice, "POST", chats[1]+"/messages", body); res.status != 200 {
		t.Fatalf("a queued send: %d %s", res.status, res.body)
	}

	// An idle chat whose send would start a fourth turn is refused too.
	if _, err := env.Pool.Exec(t.Context(), `UPDATE chats SET status = 'waiting' WHERE id = $1`,
		strings.TrimPrefix(first, "/api/v1/chats/")); err != nil {
		t.Fatal(err)
	}
	if res := call(t, env, alice, "POST", "/api/v1/chats", body); res.status != 201 {
		t.Fatalf("a create with one chat idle again: %d %s", res.status, res.body)
	}
	res = call(t, env, alice, "POST", first+"/messages", body)
	if res.status != 429 || res.header.Get("Retry-After") == "" {
		t.Fatalf("a send starting a fourth turn: %d %s", res.status, res.body)
	}
}
