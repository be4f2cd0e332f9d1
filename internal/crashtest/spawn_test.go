package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/check"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mockllm"
)

// Where a spawn kill lands: the parent's provider call that spawns, the
// child's call, or the parent's call that finalizes from the child's
// receipt.
const (
	spawnPhaseParent = "parent-spawns"
	spawnPhaseChild  = "child"
	spawnPhaseFinal  = "parent-finalizes"
)

// spawnPhase says which of the phases a provider request is, and the
// parent's tag ("p3") it belongs to.
func spawnPhase(req *mockllm.Request) (phase, tag string) {
	first, last := "", ""
	for _, m := range req.Messages {
		if m.Role == "user" && first == "" {
			first = m.Content
		}
	}
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "user" {
		last = req.Messages[n-1].Content
	}
	_, tag, _ = strings.Cut(first, "#")
	switch {
	case strings.HasPrefix(first, "CHILD"):
		return spawnPhaseChild, tag
	case last != "":
		return spawnPhaseParent, tag
	}
	return spawnPhaseFinal, tag
}

// A chatd is SIGKILLed at each phase of a parent that spawns a structured
// child: while the parent's spawning call is in flight, while the child's
// is, and while the parent's final call is. Another chatd takes over: each
// parent has exactly one child, gets its receipt as the tool result and
// finalizes from it; chatd check is clean.
func TestSpawnAgentKilled(t *testing.T) {
	t.Parallel()
	db := dbtest.NewURL(t)
	pool := openPool(t, db)
	var mu sync.Mutex
	armed := map[string]string{} // tag -> the phase whose first call is held
	arrived := make(chan string, 8)
	mock := mockllm.New(mockllm.Options{
		BeforeRespond: func(ctx context.Context, req *mockllm.Request) error {
			phase, tag := spawnPhase(req)
			mu.Lock()
			hold := armed[tag] == phase
			if hold {
				delete(armed, tag) // the next server's call goes through
			}
			mu.Unlock()
			if !hold {
				return nil
			}
			arrived <- tag
			<-ctx.Done() // until the kill cuts the connection
			return ctx.Err()
		},
		StepFor: func(req *mockllm.Request) (mockllm.Step, bool) {
			switch phase, tag := spawnPhase(req); phase {
			case spawnPhaseParent:
				args, _ := json.Marshal(map[string]any{"prompt": "CHILD count #" + tag,
					"response_format": json.RawMessage(`{"type":"json_schema","json_schema":{"name":"count","schema":` +
						`{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"]}}}`)})
				return mockllm.Step{ToolCalls: []mockllm.ToolCall{{ID: "call_spawn", Name: "spawn_agent", Arguments: string(args)}}}, true
			case spawnPhaseChild:
				return mockllm.Step{Value: json.RawMessage(`{"count": ` + strings.TrimPrefix(tag, "p") + `}`)}, true
			default:
				for _, m := range req.Messages {
					if m.Role == "tool" && m.ToolCallID == "call_spawn" {
						var r struct {
							Status string `json:"status"`
							Value  struct {
								Count int `json:"count"`
							} `json:"value"`
						}
						if json.Unmarshal([]byte(m.Content), &r) == nil && r.Status == "succeeded" {
							return mockllm.Step{Value: json.RawMessage(fmt.Sprintf(`{"title":"child said","count":%d}`, r.Value.Count))}, true
						}
					}
				}
				return mockllm.Step{TextOnly: true}, true
			}
		},
	})
	srv := httptest.NewServer(mock)
	t.Cleanup(srv.Close)
	cfg := map[string]any{
		"providers":     []map[string]any{{"name": "mock", "type": "openai-compatible", "base_url": srv.URL + "/v1"}},
		"models":        []map[string]any{{"id": "mock/model", "provider": "mock", "model": "mock-1"}},
		"default_model": "mock/model",
		"spawn_agent":   map[string]any{},
	}
	b, _ := json.Marshal(cfg)
	config := filepath.Join(t.TempDir(), "chatd-spawn.json")
	if err := os.WriteFile(config, b, 0o644); err != nil {
		t.Fatal(err)
	}
	token := newToken(t, db, "alice")
	start := func(i int) *server {
		return startServer(t, serverOpts{Name: fmt.Sprintf("spawn%d", i), DB: db, Config: config, Workers: 2})
	}
	cur := start(0)
	ctx := t.Context()
	for i, phase := range []string{spawnPhaseParent, spawnPhaseChild, spawnPhaseFinal} {
		tag := fmt.Sprintf("p%d", i+1)
		mu.Lock()
		armed[tag] = phase
		mu.Unlock()
		c := cur.client(token)
		created, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("Ask a child #" + tag), ResponseFormat: structured(), SpawnAgents: true})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-arrived:
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s: the %s call never came", tag, phase)
		}
		cur.kill()
		cur = start(i + 1)
		c = cur.client(token)
		req := *created.Messages[0].StructuredOutputRequestID
		res, err := c.WaitStructuredOutput(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`{"title":"child said","count":%d}`, i+1)
		var got, exp any
		_ = json.Unmarshal(res.Value, &got)
		_ = json.Unmarshal([]byte(want), &exp)
		if res.Status != client.OutputSucceeded || fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Fatalf("%s killed at %s: parent %+v %s", tag, phase, res, res.Value)
		}
		kids, err := c.ListChildChats(ctx, created.Chat.ID, 10, "")
		if err != nil || len(kids.Chats) != 1 {
			t.Fatalf("%s killed at %s: children %+v (%v)", tag, phase, kids.Chats, err)
		}
		var state string
		if err := pool.QueryRow(ctx, `SELECT spawn_state FROM chats WHERE id = $1`, kids.Chats[0].ID).Scan(&state); err != nil || state != "delivered" {
			t.Fatalf("%s killed at %s: spawn_state %q (%v)", tag, phase, state, err)
		}
		var results int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM chat_messages m CROSS JOIN LATERAL jsonb_array_elements(m.content) p
			WHERE m.chat_id = $1 AND p->>'type' = 'tool-result' AND p->>'tool_call_id' = 'call_spawn'`, created.Chat.ID).Scan(&results); err != nil || results != 1 {
			t.Fatalf("%s killed at %s: %d results of the spawning call (%v)", tag, phase, results, err)
		}
		t.Logf("%s: killed during the %s call; parent %s, child %s", tag, phase, res.Status, kids.Chats[0].ID)
	}
	rep, err := check.Run(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Errorf("checker: %s", v)
	}
}
