package runner_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

// sentinel is in everything alice writes.
const sentinel = "SENTINEL-8f3a2c"

// scan counts, per table and column, the rows whose value contains any of
// the needles (bytea read as escaped text, everything else as text).
func scan(t *testing.T, env *testenv.Env, needles ...string) map[string]int {
	t.Helper()
	rows, err := env.Pool.Query(t.Context(), `SELECT table_name, column_name, data_type FROM information_schema.columns
		WHERE table_schema = 'public' ORDER BY table_name, ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	type column struct{ table, name, typ string }
	var cols []column
	for rows.Next() {
		var c column
		if err := rows.Scan(&c.table, &c.name, &c.typ); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	if rows.Err() != nil || len(cols) < 50 {
		t.Fatalf("%d columns (%v)", len(cols), rows.Err())
	}
	found := map[string]int{}
	for _, c := range cols {
		expr := fmt.Sprintf("%q::text", c.name)
		if c.typ == "bytea" {
			expr = fmt.Sprintf("encode(%q, 'escape')", c.name)
		}
		for _, n := range needles {
			var hits int
			q := fmt.Sprintf(`SELECT count(*) FROM %q WHERE strpos(%s, $1) > 0`, c.table, expr)
			if err := env.Pool.QueryRow(t.Context(), q, n).Scan(&hits); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if hits > 0 {
				found[c.table+"."+c.name+" ~ "+n] += hits
			}
		}
	}
	return found
}

// TestEraseLeavesNothing: alice has chats in every state — running, with
// messages queued, waiting for a client tool's result, failed, a parent
// awaiting two running children, a structured one whose webhook delivery
// keeps failing — plus an idempotency key, a stream ticket and a token.
// After chatd user erase, no column of any table holds her id or the text
// she wrote, her turns stop, bob's chat is untouched and chatd check is
// clean.
func TestEraseLeavesNothing(t *testing.T) {
	t.Parallel()
	h := newHolds(4)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	t.Cleanup(failing.Close)
	env := testenv.New(t, testenv.Options{Spawn: &runner.SpawnOptions{}, Runner: runner.Options{MaxRunning: 8},
		Webhooks: []config.Webhook{{Name: "app", URL: failing.URL, Secret: "a-plain-secret-of-32-characters!"}},
		Mock: mockllm.Options{BeforeRespond: h.marked("[hold]"), StepFor: func(req *mockllm.Request) (mockllm.Step, bool) {
			switch first := firstUser(req); {
			case strings.Contains(first, "[parent]") && lastUser(req) != "":
				return mockllm.Step{ToolCalls: []mockllm.ToolCall{spawnCall("call_a", "[hold] a "+sentinel, childSchema),
					spawnCall("call_b", "[hold] b "+sentinel, childSchema)}}, true
			case strings.Contains(first, "[tools]"):
				return mockllm.Step{ToolCalls: []mockllm.ToolCall{{Name: stormLookup.Name, Arguments: `{"q":"` + sentinel + `"}`}}}, true
			case strings.Contains(first, "[fail]"):
				return mockllm.Step{Error: &mockllm.ErrorSpec{Status: http.StatusBadRequest, Message: "no"}}, true
			case strings.Contains(first, "[ok]") && strings.Contains(first, sentinel):
				return mockllm.Step{Value: json.RawMessage(`{"command":"` + sentinel + `"}`)}, true
			case strings.Contains(first, "[ok]"):
				return mockllm.Step{Value: json.RawMessage(`{"command":"go test"}`)}, true
			}
			return mockllm.Step{}, false
		}}})
	alice, bob := env.Client("alice"), env.Client("bob")
	owner := ownerOf(t, env, "alice")
	text := func(s string) []client.MessagePart { return []client.MessagePart{client.TextPart(s + " " + sentinel)} }

	running, _ := createText(t, alice, "[hold] running "+sentinel)
	for i := range 2 {
		if _, err := alice.SendMessage(t.Context(), running, client.SendMessageRequest{Content: text(fmt.Sprint("queued ", i)),
			ResponseFormat: structured(reportSchema)}); err != nil {
			t.Fatal(err)
		}
	}
	tools, err := alice.CreateChat(client.WithIdempotencyKey(t.Context(), "key-"+sentinel), client.CreateChatRequest{Content: text("[tools]"),
		DynamicTools: []client.DynamicTool{stormLookup}})
	if err != nil {
		t.Fatal(err)
	}
	failed, _ := createText(t, alice, "[fail] "+sentinel)
	parent, _ := createParent(t, alice, "[parent] "+sentinel)
	_, ok := createText(t, alice, "[ok] "+sentinel)
	h.wait(t, h.held, 3) // the running chat and both children
	waitChat(t, alice, tools.Chat.ID, func(c client.Chat) bool { return c.Status == client.StatusRequiresAction })
	waitChat(t, alice, failed, func(c client.Chat) bool { return c.Status == client.StatusError })
	if r := wait(t, alice, ok); r.Status != client.OutputSucceeded {
		t.Fatalf("ok: %+v", r)
	}
	if _, err := alice.CreateStreamTicket(t.Context(), parent); err != nil {
		t.Fatal(err)
	}
	_, keep := createText(t, bob, "[ok] bob's own")
	found := scan(t, env, owner.String(), sentinel)
	for _, table := range []string{"chats", "chat_messages", "chat_queued_messages", "idempotency_keys", "stream_tickets", "api_tokens", "users"} {
		if !hasTable(found, table) {
			t.Errorf("before the erasure, %s holds nothing of alice's: %v", table, found)
		}
	}

	e, err := env.Store.EraseUser(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if e.Chats != 7 || e.QueuedMessages != 2 || e.Tokens == 0 || e.StreamTickets != 1 || e.Unsent == 0 {
		t.Errorf("erasure %+v", e)
	}
	h.wait(t, h.cut, 3)
	waitLog(t, env, turnStops, 3)
	if found := scan(t, env, owner.String(), sentinel); len(found) > 0 {
		t.Errorf("alice is still there: %v", found)
	}
	if r := wait(t, bob, keep); r.Status != client.OutputSucceeded {
		t.Errorf("bob's request: %+v", r)
	}
	checkClean(t, env)
}

func hasTable(found map[string]int, table string) bool {
	for k := range found {
		if strings.HasPrefix(k, table+".") {
			return true
		}
	}
	return false
}

// stormLookup is a client tool the model calls.
var stormLookup = client.DynamicTool{Name: "lookup", Description: "Looks a word up. The client runs it.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}
