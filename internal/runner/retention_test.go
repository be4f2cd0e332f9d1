package runner_test

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/prom"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

// backdate moves the chats' last visible change back by age, past the
// trigger that owns updated_at.
func backdate(t *testing.T, env *testenv.Env, age time.Duration, chats []uuid.UUID) {
	t.Helper()
	conn, err := env.Pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, stmt := range []string{`SET session_replication_role = replica`,
		fmt.Sprintf(`UPDATE chats SET updated_at = now() - interval '%d seconds' WHERE id = ANY($1)`, int(age.Seconds())),
		`RESET session_replication_role`} {
		args := []any{}
		if stmt[0] == 'U' {
			args = append(args, chats)
		}
		if _, err := conn.Exec(t.Context(), stmt, args...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRetentionSweep: with --retain-chats, the workers' sweep deletes the
// chats at rest for longer, in batches, and counts them; a chat as old
// whose turn runs (its request pending) is kept, and so is a young one,
// whose age the gauge of the oldest chat at rest shows.
func TestRetentionSweep(t *testing.T) {
	t.Parallel()
	h := newHolds(1)
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{BeforeRespond: h.marked("[hold]")},
		Runner: runner.Options{RetainChats: time.Hour, RetentionBatch: 2, Poll: 20 * time.Millisecond, MaxRunning: 4}})
	alice := env.Client("alice")
	var idle []uuid.UUID
	for i := range 6 {
		res, err := alice.CreateChat(t.Context(), client.CreateChatRequest{Content: []client.MessagePart{client.TextPart(fmt.Sprint("hello ", i))}})
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, res.Chat.ID)
		waitChat(t, alice, res.Chat.ID, func(c client.Chat) bool { return c.Status == client.StatusWaiting })
	}
	young := idle[len(idle)-1] // not backdated: kept
	idle = idle[:len(idle)-1]
	busy, req := createText(t, alice, "[hold] report")
	h.wait(t, h.held, 1)
	backdate(t, env, 48*time.Hour, append(idle, busy))

	deadline := time.Now().Add(60 * time.Second)
	for chatLeft(t, env, idle) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows of expired chats left", chatLeft(t, env, idle))
		}
		time.Sleep(10 * time.Millisecond) // polling the sweep's work
	}
	if c, err := alice.GetChat(t.Context(), busy); err != nil || c.Status != client.StatusRunning {
		t.Fatalf("busy chat: %+v %v", c, err)
	}
	if r, err := alice.GetStructuredOutput(t.Context(), req, 0); err != nil || r.Status != client.OutputPending {
		t.Fatalf("its request: %+v %v", r, err)
	}
	var s *prom.Scrape
	for {
		s = scrapeEnv(t, env)
		if age, _ := s.Get("chatd_retention_oldest_chat_age_seconds"); age > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no oldest chat age")
		}
		time.Sleep(10 * time.Millisecond) // the gauge is set after the round
	}
	if n, _ := s.Get("chatd_retention_deleted_total", "kind", "chats"); n != 5 {
		t.Errorf("chats deleted: %v", n)
	}
	if n, _ := s.Get("chatd_retention_deleted_total", "kind", "messages"); n != 10 {
		t.Errorf("messages deleted: %v", n)
	}
	if age, _ := s.Get("chatd_retention_oldest_chat_age_seconds"); age >= 3600 {
		t.Errorf("oldest chat at rest kept: %vs old, past the retention", age)
	}
	if _, err := alice.GetChat(t.Context(), young); err != nil {
		t.Errorf("the young chat: %v", err)
	}
	if n, _ := s.Get("chatd_retention_batch_duration_seconds"); n < 3 {
		t.Errorf("%v batches observed", n)
	}
	if _, err := alice.Interrupt(t.Context(), busy); err != nil {
		t.Fatal(err)
	}
	h.wait(t, h.cut, 1)
	checkClean(t, env)
}

// scrapeEnv reads the env's /metrics.
func scrapeEnv(t *testing.T, env *testenv.Env) *prom.Scrape {
	t.Helper()
	rec := httptest.NewRecorder()
	env.Server.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	s, err := prom.Parse(bytes.NewReader(rec.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
