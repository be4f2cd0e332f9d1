package jstest

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/console"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

// TestConsoleDeleteChat: the chat page's Delete asks first (Cancel keeps
// the chat); confirmed, it deletes the running chat, cancels its pending
// request (chat_deleted) and goes back to the chats.
func TestConsoleDeleteChat(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{StepFor: func(*mockllm.Request) (mockllm.Step, bool) {
		return mockllm.Step{Hold: true}, true
	}}})
	srv := httptest.NewServer(console.Mount(env.Server))
	t.Cleanup(func() {
		env.Server.Shutdown()
		srv.Close()
	})
	token := env.Token("alice")
	api := client.New(srv.URL, token, nil)
	created, err := api.CreateChat(t.Context(), client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("hold: report")},
		ResponseFormat: &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report",
			Schema: []byte(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	chat, req := created.Chat.ID, *created.Messages[0].StructuredOutputRequestID

	const wait = 60 * time.Second
	p := newTab(t, 1100, 800)
	p.navigate(srv.URL + "/console/")
	p.run(`sessionStorage.setItem("chatd.token", ` + jsString(token) + `)`)
	p.run(`location.hash = "#/chats/` + chat.String() + `"`)
	p.waitFor(`document.querySelector(".chat .conn")?.dataset.state === "live" && document.querySelector(".chat-head")?.dataset.status === "running"`, wait)

	p.click("#delete-chat")
	p.waitFor(`!document.querySelector(".confirm").hidden && document.activeElement?.id === "delete-cancel"`, wait)
	t.Logf("screenshot %s", p.screenshot(t.ArtifactDir(), "17-delete-confirm"))
	p.click("#delete-cancel")
	p.waitFor(`document.querySelector(".confirm").hidden`, wait)
	if _, err := api.GetChat(t.Context(), chat); err != nil {
		t.Fatalf("Cancel deleted the chat: %v", err)
	}

	p.click("#delete-chat")
	p.waitFor(`!document.querySelector(".confirm").hidden`, wait)
	p.click("#delete-confirm")
	p.waitFor(`location.hash === "#/chats"`, wait)
	var ae *client.APIError
	if _, err := api.GetChat(t.Context(), chat); !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound {
		t.Fatalf("the deleted chat: %v, want 404", err)
	}
	res, err := api.GetStructuredOutput(t.Context(), req, 0)
	if err != nil || res.Status != client.OutputCancelled || res.Error == nil || res.Error.Code != client.CodeChatDeleted {
		t.Fatalf("its request: %+v %v", res, err)
	}
}
