package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/testenv"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// holdHook keeps provider calls whose latest user text contains "hold" in
// flight until release is closed or the call is abandoned.
func holdHook(entered chan<- struct{}, release <-chan struct{}) func(context.Context, *mockllm.Request) error {
	return func(ctx context.Context, r *mockllm.Request) error {
		if !strings.Contains(lastUser(r), "hold") {
			return nil
		}
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
}

func lastUser(r *mockllm.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// weatherStep makes the model call the client tool get_weather once for a
// user message about the weather.
func weatherStep(r *mockllm.Request) (mockllm.Step, bool) {
	last := r.Messages[len(r.Messages)-1]
	if last.Role != "user" || !strings.Contains(last.Content, "weather") || r.Tool("get_weather") == nil {
		return mockllm.Step{}, false
	}
	return mockllm.Step{ToolCalls: []mockllm.ToolCall{{Name: "get_weather", Arguments: `{"city":"Florence"}`}}}, true
}

const schema = `{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}`

func structured() *client.ResponseFormat {
	return &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(schema)}}
}

func text(s string) []client.MessagePart { return []client.MessagePart{client.TextPart(s)} }

// TestEveryMethod calls every method of Client against a whole chatd at
// least once, and fails if the client has a method this test does not call.
func TestEveryMethod(t *testing.T) {
	entered, release := make(chan struct{}, 4), make(chan struct{})
	defer close(release)
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{BeforeRespond: holdHook(entered, release), StepFor: weatherStep}})
	c := env.Client("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	called := map[string]bool{}
	check := func(method string, err error) {
		t.Helper()
		called[method] = true
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
	}

	h, err := c.Health(ctx)
	check("Health", err)
	r, err := c.Ready(ctx)
	check("Ready", err)
	if h.Status != "ok" || r.Status != "ready" {
		t.Fatalf("health %+v, ready %+v", h, r)
	}
	doc, err := c.OpenAPI(ctx)
	check("OpenAPI", err)
	var d struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil || !strings.HasPrefix(d.OpenAPI, "3.0") || d.Paths["/api/v1/chats"] == nil {
		t.Fatalf("openapi: %v %.200s", err, doc)
	}

	// A structured request to its committed receipt.
	created, err := c.CreateChat(ctx, client.CreateChatRequest{Title: "report", Content: text("report"), ResponseFormat: structured()})
	check("CreateChat", err)
	chat := created.Chat.ID
	req := *created.Messages[0].StructuredOutputRequestID
	res, err := c.WaitStructuredOutput(ctx, req)
	check("WaitStructuredOutput", err)
	if res.Status != client.OutputSucceeded || res.ChatID != chat || res.ReceiptMessageID == nil || !json.Valid(res.Value) {
		t.Fatalf("result %+v", res)
	}
	got, err := c.GetStructuredOutput(ctx, req, time.Second)
	check("GetStructuredOutput", err)
	if got.Status != client.OutputSucceeded || string(got.Value) != string(res.Value) {
		t.Fatalf("lookup %+v", got)
	}
	page, err := c.ListMessages(ctx, chat, 0, 0)
	check("ListMessages", err)
	receipt := page.Messages[len(page.Messages)-1]
	if receipt.ID != *res.ReceiptMessageID || receipt.StructuredOutput == nil || receipt.StructuredOutput.RequestID != req {
		t.Fatalf("last message %+v", receipt)
	}
	title := "renamed"
	ch, err := c.UpdateChat(ctx, chat, client.UpdateChatRequest{Title: &title})
	check("UpdateChat", err)
	if ch.Title != title {
		t.Fatalf("title %q", ch.Title)
	}
	list, err := c.ListChats(ctx, 1, "")
	check("ListChats", err)
	if len(list.Chats) != 1 || list.Chats[0].ID != chat {
		t.Fatalf("chats %+v", list.Chats)
	}
	kid, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("a child"), ParentChatID: &chat})
	check("CreateChat", err)
	kids, err := c.ListChildChats(ctx, chat, 10, "")
	check("ListChildChats", err)
	if len(kids.Chats) != 1 || kids.Chats[0].ID != kid.Chat.ID || *kids.Chats[0].ParentChatID != chat {
		t.Fatalf("children %+v", kids.Chats)
	}

	// A client tool call answered by the client.
	tools, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("weather in Florence?"),
		DynamicTools: []client.DynamicTool{{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object"}`)}}})
	check("CreateChat", err)
	waiting := waitStatus(t, ctx, c, tools.Chat.ID, client.StatusRequiresAction)
	called["GetChat"] = true
	if len(waiting.PendingToolCalls) != 1 || waiting.PendingToolCalls[0].ToolName != "get_weather" {
		t.Fatalf("pending %+v", waiting.PendingToolCalls)
	}
	tr, err := c.SubmitToolResults(ctx, tools.Chat.ID, client.ToolResultsRequest{Results: []client.ToolResult{
		{ToolCallID: waiting.PendingToolCalls[0].ToolCallID, Output: json.RawMessage(`{"forecast":"sunny"}`)}}})
	check("SubmitToolResults", err)
	if tr.Message.Role != client.RoleTool || tr.Chat.Status != client.StatusRunning {
		t.Fatalf("tool results %+v", tr)
	}
	waitStatus(t, ctx, c, tools.Chat.ID, client.StatusWaiting)

	// A held turn: queue, delete from the queue, interrupt, edit.
	held, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("hold on")})
	check("CreateChat", err)
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the held turn never reached the provider")
	}
	sent, err := c.SendMessage(ctx, held.Chat.ID, client.SendMessageRequest{Content: text("later"), ResponseFormat: structured()})
	check("SendMessage", err)
	if !sent.Queued || sent.QueuedMessage.StructuredOutputRequestID == nil {
		t.Fatalf("send %+v", sent)
	}
	del, err := c.DeleteQueued(ctx, held.Chat.ID, sent.QueuedMessage.ID)
	check("DeleteQueued", err)
	if len(del.Messages) != 1 || del.Messages[0].StructuredOutput.Error.Code != client.CodeQueueDeleted {
		t.Fatalf("delete %+v", del)
	}
	in, err := c.Interrupt(ctx, held.Chat.ID)
	check("Interrupt", err)
	if in.Status != client.StatusInterrupting {
		t.Fatalf("interrupt %+v", in)
	}
	waitStatus(t, ctx, c, held.Chat.ID, client.StatusWaiting)
	edit, err := c.EditMessage(ctx, held.Chat.ID, held.Messages[0].ID, client.EditMessageRequest{Content: text("edited")})
	check("EditMessage", err)
	if edit.Message.Content[0].Text != "edited" || len(edit.DeletedMessageIDs) == 0 || edit.DeletedMessageIDs[0] != held.Messages[0].ID {
		t.Fatalf("edit %+v", edit)
	}

	// Streams: the chat's events, and the watch of all chats.
	st := c.Stream(ctx, chat, 0)
	defer st.Close()
	seen := map[string]bool{}
	for !seen[client.EventStatus] {
		ev, err := st.Next()
		check("Stream", err)
		seen[ev.Type] = true
		if ev.Message != nil && st.LastID() < ev.Message.ID {
			t.Fatalf("LastID %d after message %d", st.LastID(), ev.Message.ID)
		}
	}
	if !seen[client.EventMessage] || !seen[client.EventQueue] {
		t.Fatalf("initial stream events %v", seen)
	}
	wt := c.Watch(ctx)
	defer wt.Close()
	ev, err := wt.Next()
	check("Watch", err)
	if ev.Type != client.EventChat || ev.Chat == nil {
		t.Fatalf("watch %+v", ev)
	}
	tk, err := c.CreateStreamTicket(ctx, chat)
	check("CreateStreamTicket", err)
	if !strings.HasPrefix(tk.Ticket, "cst_") || tk.ExpiresAt.IsZero() {
		t.Fatalf("stream ticket %+v", tk)
	}
	cp, err := c.Compact(ctx, chat)
	check("Compact", err)
	if cp.ID != chat {
		t.Fatalf("compact %+v", cp)
	}

	m, err := c.Metrics(ctx)
	check("Metrics", err)
	if !strings.Contains(string(m), "\n# TYPE chatd_http_requests_total counter\n") {
		t.Fatalf("metrics: %.300s", m)
	}

	// Errors arrive as *APIError with the server's body.
	_, err = c.GetChat(ctx, uuid.New())
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Body.Message == "" || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("missing chat: %v", err)
	}
	_, err = c.CreateChat(ctx, client.CreateChatRequest{Content: text("x"), ResponseFormat: &client.ResponseFormat{Type: "xml"}})
	if !errors.As(err, &ae) || ae.StatusCode != 400 || len(ae.Body.Validations) != 1 || ae.Body.Validations[0].Field != "response_format.type" {
		t.Fatalf("invalid format: %v", err)
	}

	// The token API (an admin token), and acting for a user.
	secret, _, err := env.Store.CreateScopedToken(ctx, store.TokenSpec{User: "root", Scopes: []client.Scope{client.ScopeAdmin}})
	if err != nil {
		t.Fatal(err)
	}
	admin := client.New(env.API.URL, secret, env.API.Client())
	made, err := admin.CreateToken(ctx, client.CreateTokenRequest{User: "backend", ActAs: true})
	check("CreateToken", err)
	tokens, err := admin.ListTokens(ctx, "backend")
	check("ListTokens", err)
	if len(tokens.Tokens) != 1 || tokens.Tokens[0].ID != made.Token.ID || !tokens.Tokens[0].ActAs {
		t.Fatalf("tokens %+v", tokens)
	}
	users, err := admin.ListUsers(ctx, 0, "")
	check("ListUsers", err)
	if len(users.Users) != 3 { // alice, backend, root
		t.Fatalf("users %+v", users)
	}
	asAlice := client.New(env.API.URL, made.Secret, env.API.Client()).ActAs("alice")
	called["ActAs"] = true
	if got, err := asAlice.GetChat(ctx, chat); err != nil || got.ID != chat {
		t.Fatalf("the backend as alice: %+v %v", got, err)
	}
	check("RevokeToken", admin.RevokeToken(ctx, made.Token.ID))

	// Export and delete a chat; export and erase a user (admin).
	var exported bytes.Buffer
	check("ExportChat", c.ExportChat(ctx, tools.Chat.ID, &exported))
	if !strings.HasPrefix(exported.String(), `{"type":"chatd_export"`) || !strings.Contains(exported.String(), `{"type":"end"`) {
		t.Fatalf("export %.300s", exported.String())
	}
	gone, err := c.DeleteChat(ctx, tools.Chat.ID)
	check("DeleteChat", err)
	if len(gone.DeletedChatIDs) != 1 || gone.DeletedChatIDs[0] != tools.Chat.ID {
		t.Fatalf("delete %+v", gone)
	}
	exported.Reset()
	check("ExportUser", admin.ExportUser(ctx, "backend", &exported))
	if !strings.Contains(exported.String(), `"user":"backend"`) {
		t.Fatalf("user export %.300s", exported.String())
	}
	erased, err := admin.EraseUser(ctx, "backend")
	check("EraseUser", err)
	if erased.User != "backend" {
		t.Fatalf("erasure %+v", erased)
	}

	ct := reflect.TypeFor[*client.Client]()
	for i := range ct.NumMethod() {
		if name := ct.Method(i).Name; !called[name] {
			t.Errorf("client method %s is not exercised by this test", name)
		}
	}
}

// waitStatus polls the chat (through the API, with a deadline) until it has
// the wanted status.
func waitStatus(t *testing.T, ctx context.Context, c *client.Client, chat uuid.UUID, want client.ChatStatus) client.Chat {
	t.Helper()
	for {
		ch, err := c.GetChat(ctx, chat)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Status == want {
			return ch
		}
		select {
		case <-ctx.Done():
			t.Fatalf("chat is %s, want %s", ch.Status, want)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
