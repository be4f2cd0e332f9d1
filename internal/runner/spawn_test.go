package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

const childSchema = `{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"],"additionalProperties":false}`

const parentSchema = `{"type":"object","properties":{"child_count":{"type":"integer"},"notes":{"type":"array","items":{"type":"string"}}},"required":["child_count"]}`

// spawnCall is a scripted spawn_agent call.
func spawnCall(id, prompt string, format string) mockllm.ToolCall {
	args := map[string]any{"prompt": prompt, "title": "child " + id}
	if format != "" {
		args["response_format"] = json.RawMessage(`{"type":"json_schema","json_schema":{"name":"count","schema":` + format + `}}`)
	}
	b, _ := json.Marshal(args)
	return mockllm.ToolCall{ID: id, Name: runner.SpawnToolName, Arguments: string(b)}
}

// lastUser is the text of a request's last message when it is a user
// message ("" otherwise: a conversation resumed after tool results).
func lastUser(req *mockllm.Request) string {
	if len(req.Messages) == 0 {
		return ""
	}
	if m := req.Messages[len(req.Messages)-1]; m.Role == "user" {
		return m.Content
	}
	return ""
}

// firstUser is the text of a request's first user message.
func firstUser(req *mockllm.Request) string {
	for _, m := range req.Messages {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// waitChat follows the chat's stream until cond holds for it.
func waitChat(t *testing.T, c *client.Client, chat uuid.UUID, cond func(client.Chat) bool) {
	t.Helper()
	s := c.Stream(t.Context(), chat, 0)
	defer s.Close()
	if ch, err := c.GetChat(t.Context(), chat); err == nil && cond(ch) {
		return
	}
	for {
		ev, err := s.Next()
		if err != nil {
			t.Fatalf("stream of %s: %v", chat, err)
		}
		if ev.Chat != nil && cond(*ev.Chat) {
			return
		}
	}
}

// toolContents are a request's tool messages by call id.
func toolContents(req *mockllm.Request) map[string]string {
	out := map[string]string{}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			out[m.ToolCallID] = m.Content
		}
	}
	return out
}

// createParent starts a structured chat opted into spawn_agent.
func createParent(t *testing.T, c *client.Client, text string) (uuid.UUID, uuid.UUID) {
	t.Helper()
	res, err := c.CreateChat(t.Context(), client.CreateChatRequest{
		Content: []client.MessagePart{client.TextPart(text)}, ResponseFormat: structured(parentSchema), SpawnAgents: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Chat.SpawnAgents || res.Messages[0].StructuredOutputRequestID == nil {
		t.Fatalf("created %+v", res)
	}
	return res.Chat.ID, *res.Messages[0].StructuredOutputRequestID
}

// children lists a chat's children through the API.
func children(t *testing.T, c *client.Client, parent uuid.UUID) map[string]client.Chat {
	t.Helper()
	res, err := c.ListChildChats(t.Context(), parent, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]client.Chat{}
	for _, ch := range res.Chats {
		if ch.ParentChatID == nil || *ch.ParentChatID != parent || ch.ParentToolCallID == nil {
			t.Fatalf("listed child %+v", ch)
		}
		out[*ch.ParentToolCallID] = ch
	}
	return out
}

// childRequest is the structured request a child was created with.
func childRequest(t *testing.T, c *client.Client, child uuid.UUID) uuid.UUID {
	t.Helper()
	h, err := c.ListMessages(t.Context(), child, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Messages) == 0 || h.Messages[0].StructuredOutputRequestID == nil {
		t.Fatalf("child %s has no structured request: %+v", child, h.Messages)
	}
	return *h.Messages[0].StructuredOutputRequestID
}

// parentResults are the tool results written into chat for spawn_agent
// calls: call id -> (content, is_error).
func parentResults(t *testing.T, env *testenv.Env, chat uuid.UUID) map[string]struct {
	Text    string
	IsError bool
} {
	t.Helper()
	rows, err := env.Pool.Query(t.Context(), `SELECT p->>'tool_call_id', p->'result'::text, coalesce((p->>'is_error')::boolean, false)
		FROM chat_messages m CROSS JOIN LATERAL jsonb_array_elements(m.content) p
		WHERE m.chat_id = $1 AND m.role = 'tool' AND p->>'type' = 'tool-result' AND p->>'tool_name' = 'spawn_agent'`, chat)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]struct {
		Text    string
		IsError bool
	}{}
	for rows.Next() {
		var id, text string
		var isErr bool
		if err := rows.Scan(&id, &text, &isErr); err != nil {
			t.Fatal(err)
		}
		out[id] = struct {
			Text    string
			IsError bool
		}{text, isErr}
	}
	return out
}

// The parent calls spawn_agent with a response_format; the child's turn
// finalizes; the child's receipt is the parent's tool result, and the
// parent finalizes from it. The child is listed under its parent.
func TestSpawnAgentStructuredChild(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var receiptSeen json.RawMessage
	env := testenv.New(t, testenv.Options{Spawn: &runner.SpawnOptions{}, Mock: mockllm.Options{StepFor: func(req *mockllm.Request) (mockllm.Step, bool) {
		switch u := lastUser(req); {
		case strings.Contains(u, "[parent]"):
			if req.Tool(runner.SpawnToolName) == nil {
				return mockllm.Step{Text: "spawn_agent was not offered"}, true
			}
			return mockllm.Step{ToolCalls: []mockllm.ToolCall{spawnCall("call_spawn", "CHILD-COUNT: count the tests", childSchema)}}, true
		case strings.Contains(u, "CHILD-COUNT"):
			return mockllm.Step{Value: json.RawMessage(`{"count": 7}`)}, true
		case u == "":
			res, ok := toolContents(req)["call_spawn"]
			if !ok {
				return mockllm.Step{}, false
			}
			var receipt struct {
				Status string `json:"status"`
				Value  struct {
					Count int `json:"count"`
				} `json:"value"`
			}
			if err := json.Unmarshal([]byte(res), &receipt); err != nil || receipt.Status != "succeeded" {
				return mockllm.Step{Text: "bad receipt: " + res}, true
			}
			mu.Lock()
			receiptSeen = json.RawMessage(res)
			mu.Unlock()
			return mockllm.Step{Value: json.RawMessage(fmt.Sprintf(`{"child_count": %d}`, receipt.Value.Count))}, true
		}
		return mockllm.Step{}, false
	}}})
	c := env.Client("alice")
	parent, req := createParent(t, c, "[parent] How many tests are there?")
	res := wait(t, c, req)
	if res.Status != client.OutputSucceeded || !jsonEqual(t, res.Value, json.RawMessage(`{"child_count": 7}`)) {
		t.Fatalf("parent result %+v %s", res, res.Value)
	}
	settled(t, env, parent, req, client.OutputSucceeded, "")

	kids := children(t, c, parent)
	child, ok := kids["call_spawn"]
	if len(kids) != 1 || !ok || child.Mode != client.ModeChild || child.SpawnDepth != 1 || child.Title != "child call_spawn" || !child.SpawnAgents {
		t.Fatalf("children %+v", kids)
	}
	childReq := childRequest(t, c, child.ID)
	cres := wait(t, c, childReq)
	if cres.Status != client.OutputSucceeded || !jsonEqual(t, cres.Value, json.RawMessage(`{"count": 7}`)) {
		t.Fatalf("child result %+v", cres)
	}
	// The parent read the child's receipt: its chat, request and value.
	var receipt map[string]any
	mu.Lock()
	_ = json.Unmarshal(receiptSeen, &receipt)
	mu.Unlock()
	if receipt["chat_id"] != child.ID.String() || receipt["request_id"] != childReq.String() {
		t.Fatalf("receipt the parent read: %s", receiptSeen)
	}
	var state string
	if err := env.Pool.QueryRow(t.Context(), `SELECT spawn_state FROM chats WHERE id = $1`, child.ID).Scan(&state); err != nil || state != "delivered" {
		t.Fatalf("spawn_state %q (%v)", state, err)
	}
	// The unfiltered list has both; a filter on a chat without children none.
	all, err := c.ListChats(t.Context(), 50, "")
	if err != nil || len(all.Chats) != 2 {
		t.Fatalf("list %d chats (%v)", len(all.Chats), err)
	}
	if none := children(t, c, child.ID); len(none) != 0 {
		t.Fatalf("the child has children %+v", none)
	}
	checkClean(t, env)
}

// Two children in parallel fail: a structured one exhausts its budget, an
// ordinary one meets a terminal provider error. Each failure is an error
// result of its call, and the parent goes on.
func TestSpawnAgentChildFailures(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Spawn: &runner.SpawnOptions{}, Mock: mockllm.Options{StepFor: func(req *mockllm.Request) (mockllm.Step, bool) {
		switch first := firstUser(req); {
		case strings.Contains(first, "[parent]") && lastUser(req) != "":
			return mockllm.Step{ToolCalls: []mockllm.ToolCall{
				spawnCall("call_invalid", "CHILD-INVALID", childSchema),
				spawnCall("call_broken", "CHILD-BROKEN", ""),
			}}, true
		case strings.Contains(first, "[parent]"):
			return mockllm.Step{Value: json.RawMessage(`{"child_count": -1}`)}, true
		case strings.Contains(first, "CHILD-INVALID"):
			return mockllm.Step{Invalid: true}, true // every value violates the schema
		case strings.Contains(first, "CHILD-BROKEN"):
			return mockllm.Step{Error: &mockllm.ErrorSpec{Status: http.StatusBadRequest, Message: "no"}}, true
		}
		return mockllm.Step{}, false
	}}})
	c := env.Client("alice")
	parent, req := createParent(t, c, "[parent] Delegate.")
	res := wait(t, c, req)
	if res.Status != client.OutputSucceeded || !jsonEqual(t, res.Value, json.RawMessage(`{"child_count": -1}`)) {
		t.Fatalf("parent result %+v %s", res, res.Value)
	}
	got := parentResults(t, env, parent)
	inv, brk := got["call_invalid"], got["call_broken"]
	if len(got) != 2 || !inv.IsError || !strings.Contains(inv.Text, `"status": "failed"`) || !strings.Contains(inv.Text, "validation_exhausted") {
		t.Fatalf("results %+v", got)
	}
	if !brk.IsError || !strings.Contains(brk.Text, "failed (provider_error)") {
		t.Fatalf("broken child's result %+v", brk)
	}
	kids := children(t, c, parent)
	cres := wait(t, c, childRequest(t, c, kids["call_invalid"].ID))
	if cres.Status != client.OutputFailed || cres.Error == nil || cres.Error.Code != client.CodeValidationExhausted {
		t.Fatalf("invalid child %+v", cres)
	}
	if st := kids["call_broken"].Status; st != client.StatusError {
		t.Fatalf("broken child is %s", st)
	}
	checkClean(t, env)
}

// The caps are tool error results naming them: a fourth call beyond
// max_children_per_turn, a child at max_depth that tries to spawn, and
// arguments that are refused before any cap.
func TestSpawnAgentCaps(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Spawn: &runner.SpawnOptions{MaxDepth: 1, MaxPerTurn: 2}, Mock: mockllm.Options{StepFor: func(req *mockllm.Request) (mockllm.Step, bool) {
		first, last := firstUser(req), lastUser(req)
		switch {
		case strings.Contains(first, "[parent]") && last != "":
			return mockllm.Step{ToolCalls: []mockllm.ToolCall{
				spawnCall("call_a", "CHILD-A deep", ""),
				{ID: "call_bad", Name: runner.SpawnToolName, Arguments: `{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"nonsense"}}}}`},
				spawnCall("call_b", "CHILD-B", ""),
				spawnCall("call_c", "CHILD-C", ""),
				{ID: "call_extra", Name: runner.SpawnToolName, Arguments: `{"prompt":"x","colour":"red"}`},
			}}, true
		case strings.Contains(first, "[parent]"):
			return mockllm.Step{Value: json.RawMessage(`{"child_count": 2}`)}, true
		case strings.Contains(first, "CHILD-A") && last != "":
			return mockllm.Step{ToolCalls: []mockllm.ToolCall{spawnCall("call_grandchild", "GRANDCHILD", "")}}, true
		case strings.Contains(first, "CHILD-A"):
			return mockllm.Step{Text: "A saw: " + toolContents(req)["call_grandchild"]}, true
		case strings.Contains(first, "CHILD-B"):
			return mockllm.Step{Text: "B done"}, true
		}
		return mockllm.Step{}, false
	}}})
	c := env.Client("alice")
	parent, req := createParent(t, c, "[parent] Fan out.")
	if res := wait(t, c, req); res.Status != client.OutputSucceeded {
		t.Fatalf("parent result %+v", res)
	}
	got := parentResults(t, env, parent)
	if r := got["call_c"]; !r.IsError || !strings.Contains(r.Text, "max_children_per_turn (2)") {
		t.Fatalf("third spawn: %+v", r)
	}
	if r := got["call_bad"]; !r.IsError || !strings.Contains(r.Text, "response_format.json_schema.schema") {
		t.Fatalf("bad schema: %+v", r)
	}
	if r := got["call_extra"]; !r.IsError || !strings.Contains(r.Text, "colour") {
		t.Fatalf("unknown argument: %+v", r)
	}
	if r := got["call_b"]; r.IsError || r.Text != `"B done"` {
		t.Fatalf("B: %+v", r)
	}
	// A is at depth 1 = max_depth: its own call was refused, and its
	// answer (which quotes the refusal) came back to the parent.
	if r := got["call_a"]; r.IsError || !strings.Contains(r.Text, "max_depth (1)") {
		t.Fatalf("A: %+v", r)
	}
	kids := children(t, c, parent)
	if len(kids) != 2 || len(children(t, c, kids["call_a"].ID)) != 0 {
		t.Fatalf("children %+v", kids)
	}
	checkClean(t, env)
}

// holdChildren holds every provider call of the children whose prompt
// contains marker until release is closed (or the call is cut off), and
// reports each arrival.
type holdChildren struct {
	marker  string
	arrived chan string
	release chan struct{}
}

func newHold(marker string) *holdChildren {
	return &holdChildren{marker: marker, arrived: make(chan string, 16), release: make(chan struct{})}
}

func (h *holdChildren) before(ctx context.Context, req *mockllm.Request) error {
	for _, m := range req.Messages {
		if m.Role == "user" && strings.Contains(m.Content, h.marker) {
			h.arrived <- m.Content
			select {
			case <-h.release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

func (h *holdChildren) await(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-h.arrived:
		case <-t.Context().Done():
			t.Fatal("the children never called the provider")
		}
	}
}

// While its children run, the parent waits in requires_action without a
// worker, a deadline or a client call; a client cannot answer a child's
// call. Interrupting the parent cancels it and each running child, with a
// cancelled receipt for the structured ones.
func TestSpawnAgentParentInterruptCancelsChildren(t *testing.T) {
	t.Parallel()
	hold := newHold("CHILD-HOLD")
	// The held children keep two slots; the parent's interruption needs
	// a third (and one more is kept for users with nothing running).
	env := testenv.New(t, testenv.Options{Spawn: &runner.SpawnOptions{}, Runner: runner.Options{MaxRunning: 4}, Mock: mockllm.Options{BeforeRespond: hold.before,
		StepFor: func(req *mockllm.Request) (mockllm.Step, bool) {
			if strings.Contains(lastUser(req), "[parent]") {
				return mockllm.Step{ToolCalls: []mockllm.ToolCall{
					spawnCall("call_1", "CHILD-HOLD one", childSchema),
					spawnCall("call_2", "CHILD-HOLD two", ""),
				}}, true
			}
			return mockllm.Step{}, false
		}}})
	c := env.Client("alice")
	parent, req := createParent(t, c, "[parent] Wait for two.")
	hold.await(t, 2)

	p, err := c.GetChat(t.Context(), parent)
	if err != nil {
		t.Fatal(err)
	}
	var deadline *time.Time
	var owned bool
	if err := env.Pool.QueryRow(t.Context(), `SELECT requires_action_deadline, worker_id IS NOT NULL FROM chats WHERE id = $1`, parent).Scan(&deadline, &owned); err != nil {
		t.Fatal(err)
	}
	if p.Status != client.StatusRequiresAction || len(p.PendingToolCalls) != 0 || deadline != nil || owned {
		t.Fatalf("waiting parent %+v deadline %v owned %v", p, deadline, owned)
	}
	_, err = c.SubmitToolResults(t.Context(), parent, client.ToolResultsRequest{Results: []client.ToolResult{{ToolCallID: "call_1", Output: json.RawMessage(`1`)}}})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || len(apiErr.Body.Validations) == 0 ||
		!strings.Contains(apiErr.Body.Validations[0].Detail, "child chat answers it") {
		t.Fatalf("answering a child's call: %v", err)
	}

	if _, err := c.Interrupt(t.Context(), parent); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, c, req); res.Status != client.OutputCancelled || res.Error.Code != client.CodeInterrupted {
		t.Fatalf("parent %+v", res)
	}
	kids := children(t, c, parent)
	if len(kids) != 2 {
		t.Fatalf("children %+v", kids)
	}
	cres := wait(t, c, childRequest(t, c, kids["call_1"].ID))
	if cres.Status != client.OutputCancelled || cres.Error.Code != client.CodeInterrupted {
		t.Fatalf("structured child %+v", cres)
	}
	// The ordinary child ends too (no receipt to wait for): its stream
	// of changes settles on waiting.
	waitChat(t, c, kids["call_2"].ID, func(ch client.Chat) bool { return ch.Status == client.StatusWaiting })
	var detached int
	_ = env.Pool.QueryRow(t.Context(), `SELECT count(*) FROM chats WHERE parent_chat_id = $1 AND spawn_state = 'detached'`, parent).Scan(&detached)
	if detached != 2 {
		t.Fatalf("%d children detached", detached)
	}
	// The parent's calls were answered by the interruption, once.
	if got := parentResults(t, env, parent); len(got) != 2 || !got["call_1"].IsError || !strings.Contains(got["call_1"].Text, "interrupted") {
		t.Fatalf("parent results %+v", got)
	}
	checkClean(t, env)
}

// Editing the parent's message discards the waiting turn: its children
// are cancelled the same way, and the edited message starts a new turn.
func TestSpawnAgentParentEditCancelsChildren(t *testing.T) {
	t.Parallel()
	hold := newHold("CHILD-EDIT")
	env := testenv.New(t, testenv.Options{Spawn: &runner.SpawnOptions{}, Runner: runner.Options{MaxRunning: 4}, Mock: mockllm.Options{BeforeRespond: hold.before,
		StepFor: func(req *mockllm.Request) (mockllm.Step, bool) {
			if strings.Contains(lastUser(req), "[parent]") {
				return mockllm.Step{ToolCalls: []mockllm.ToolCall{spawnCall("call_1", "CHILD-EDIT", childSchema)}}, true
			}
			return mockllm.Step{}, false
		}}})
	c := env.Client("alice")
	parent, req := createParent(t, c, "[parent] Wait.")
	hold.await(t, 1)
	h, err := c.ListMessages(t.Context(), parent, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	edit, err := c.EditMessage(t.Context(), parent, h.Messages[0].ID, client.EditMessageRequest{Content: []client.MessagePart{client.TextPart("Just answer.")}})
	if err != nil {
		t.Fatal(err)
	}
	if res := wait(t, c, req); res.Status != client.OutputCancelled || res.Error.Code != client.CodeSuperseded {
		t.Fatalf("edited request %+v", res)
	}
	kids := children(t, c, parent)
	cres := wait(t, c, childRequest(t, c, kids["call_1"].ID))
	if cres.Status != client.OutputCancelled || cres.Error.Code != client.CodeInterrupted {
		t.Fatalf("child %+v", cres)
	}
	if edit.Message.StructuredOutputRequestID == nil {
		t.Fatalf("edit %+v", edit)
	}
	if res := wait(t, c, *edit.Message.StructuredOutputRequestID); res.Status != client.OutputSucceeded {
		t.Fatalf("new turn %+v", res)
	}
	checkClean(t, env)
}

// The workers stop while a child's provider call is in flight (a server
// restart): the child runs again on the next workers, its result reaches
// the parent, and the parent finishes.
func TestSpawnAgentSurvivesRestart(t *testing.T) {
	t.Parallel()
	hold := newHold("CHILD-RESTART")
	env := testenv.New(t, testenv.Options{Spawn: &runner.SpawnOptions{}, Runner: runner.Options{DrainTimeout: 50 * time.Millisecond},
		Mock: mockllm.Options{BeforeRespond: hold.before, StepFor: func(req *mockllm.Request) (mockllm.Step, bool) {
			switch u := lastUser(req); {
			case strings.Contains(u, "[parent]"):
				return mockllm.Step{ToolCalls: []mockllm.ToolCall{spawnCall("call_1", "CHILD-RESTART", childSchema)}}, true
			case strings.Contains(u, "CHILD-RESTART"):
				return mockllm.Step{Value: json.RawMessage(`{"count": 3}`)}, true
			}
			if r, ok := toolContents(req)["call_1"]; ok && strings.Contains(r, `"count": 3`) {
				return mockllm.Step{Value: json.RawMessage(`{"child_count": 3}`)}, true
			}
			return mockllm.Step{}, false
		}}})
	c := env.Client("alice")
	parent, req := createParent(t, c, "[parent] Survive.")
	hold.await(t, 1)
	env.StopRunner() // the child's call is cut off; nothing of it is committed
	close(hold.release)
	env.StartRunner()
	res := wait(t, c, req)
	if res.Status != client.OutputSucceeded || !jsonEqual(t, res.Value, json.RawMessage(`{"child_count": 3}`)) {
		t.Fatalf("parent %+v %s", res, res.Value)
	}
	if got := parentResults(t, env, parent); len(got) != 1 {
		t.Fatalf("parent results %+v", got)
	}
	checkClean(t, env)
}

// spawn_agent needs the server's switch and the chat's opt-in.
func TestSpawnAgentOptIn(t *testing.T) {
	t.Parallel()
	off := testenv.New(t, testenv.Options{NoRunner: true})
	_, err := off.Client("alice").CreateChat(t.Context(), client.CreateChatRequest{
		Content: []client.MessagePart{client.TextPart("hi")}, SpawnAgents: true})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Body.Validations[0].Field != "spawn_agents" {
		t.Fatalf("opt-in on a server without spawn_agent: %v", err)
	}
	on := testenv.New(t, testenv.Options{Spawn: &runner.SpawnOptions{}, Mock: mockllm.Options{StepFor: func(req *mockllm.Request) (mockllm.Step, bool) {
		if req.Tool(runner.SpawnToolName) != nil {
			return mockllm.Step{Text: "offered"}, true
		}
		return mockllm.Step{}, false
	}}})
	c := on.Client("alice")
	_, req := create(t, c, reportSchema) // not opted in
	if res := wait(t, c, req); res.Status != client.OutputSucceeded {
		t.Fatalf("%+v", res)
	}
	_, err = c.CreateChat(t.Context(), client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("hi")}, SpawnAgents: true,
		DynamicTools: []client.DynamicTool{{Name: runner.SpawnToolName, InputSchema: json.RawMessage(`{"type":"object"}`)}}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Body.Validations[0].Field != "dynamic_tools.0.name" {
		t.Fatalf("a client tool named spawn_agent: %v", err)
	}
}
