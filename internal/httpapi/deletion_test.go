package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/testenv"
)

// lineTypes returns the "type" of each line of an export.
func lineTypes(t *testing.T, export []byte) []string {
	t.Helper()
	var types []string
	sc := bufio.NewScanner(bytes.NewReader(export))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		types = append(types, l.Type)
	}
	return types
}

// TestDeleteChat: deleting a chat with a pending structured request (no
// workers: it stays pending) answers the chat and the cancelled request;
// the request's lookup answers its cancelled outcome (chat_deleted) from
// the tombstone; the chat's open stream ends with an error event of code
// chat_deleted; the chat is gone; deleting it again is a 404 that says it
// was deleted; another user cannot delete it, a read token neither.
func TestDeleteChat(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	ctx := t.Context()
	c := env.Client("deleter")
	created, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("report"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	id, req := created.Chat.ID, *created.Messages[0].StructuredOutputRequestID
	stream := collect(t, c.Stream(ctx, id, 0))
	stream.until(t, "the status", func(ev client.StreamEvent) bool { return ev.Type == client.EventStatus })

	if _, err := env.Client("intruder").DeleteChat(ctx, id); statusOf(err) != http.StatusNotFound {
		t.Fatalf("another user's delete: %v, want 404", err)
	}
	reader, _ := scopedClient(t, env, store.TokenSpec{User: "deleter", Scopes: []client.Scope{client.ScopeRead}})
	if _, err := reader.DeleteChat(ctx, id); statusOf(err) != http.StatusForbidden {
		t.Fatalf("a read token's delete: %v, want 403", err)
	}
	res, err := c.DeleteChat(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.DeletedChatIDs, []uuid.UUID{id}) || !slices.Equal(res.CancelledRequestIDs, []uuid.UUID{req}) {
		t.Fatalf("delete answered %+v, want chat %s and request %s", res, id, req)
	}
	stream.until(t, "the end of the stream", func(ev client.StreamEvent) bool {
		return ev.Type == client.EventError && ev.Error.Code == client.CodeChatDeleted
	})
	out, err := c.GetStructuredOutput(ctx, req, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != client.OutputCancelled || out.Error == nil || out.Error.Code != client.CodeChatDeleted ||
		out.ChatDeleted == nil || out.ChatDeleted.Reason != client.DeletionDeleted || out.ChatDeleted.DeletedAt.IsZero() {
		t.Fatalf("lookup after the delete: %+v (error %+v, deleted %+v)", out, out.Error, out.ChatDeleted)
	}
	if _, err := c.GetChat(ctx, id); statusOf(err) != http.StatusNotFound {
		t.Fatalf("get after the delete: %v, want 404", err)
	}
	_, err = c.DeleteChat(ctx, id)
	if ae, ok := err.(*client.APIError); !ok || ae.StatusCode != http.StatusNotFound || !strings.Contains(ae.Body.Message, "was deleted (deleted)") {
		t.Fatalf("second delete: %v, want a 404 saying the chat was deleted", err)
	}
	if _, err := env.Client("intruder").DeleteChat(ctx, id); err == nil || strings.Contains(err.Error(), "was deleted") {
		t.Fatalf("another user's delete of the deleted chat: %v, want a plain 404", err)
	}
	if err := c.ExportChat(ctx, id, &bytes.Buffer{}); statusOf(err) != http.StatusNotFound {
		t.Fatalf("export of the deleted chat: %v, want 404", err)
	}
}

// TestDeleteChatBadID: a malformed chat id is a 404, never a 500.
func TestDeleteChatBadID(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	for _, path := range []string{"/api/v1/chats/not-a-uuid", "/api/v1/chats/not-a-uuid/export"} {
		method := http.MethodDelete
		if strings.HasSuffix(path, "/export") {
			method = http.MethodGet
		}
		req, _ := http.NewRequestWithContext(t.Context(), method, env.API.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+env.Token("bad-id"))
		resp, err := env.API.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s: %d, want 404", method, path, resp.StatusCode)
		}
	}
}

// TestExportChat: a chat's export is JSON Lines — header, the chat, its
// request and messages, its child chat after it, the end line — and
// another user's export of it is a 404.
func TestExportChat(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	ctx := t.Context()
	c := env.Client("exporter")
	parent, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("report"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	child, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("child"), ParentChatID: &parent.Chat.ID})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := c.ExportChat(ctx, parent.Chat.ID, &b); err != nil {
		t.Fatal(err)
	}
	want := []string{"chatd_export", "chat", "structured_request", "message", "chat", "message", "end"}
	if got := lineTypes(t, b.Bytes()); !slices.Equal(got, want) {
		t.Fatalf("export lines %v, want %v:\n%s", got, want, b.String())
	}
	if !strings.Contains(b.String(), child.Chat.ID.String()) || !strings.Contains(b.String(), `"user":"exporter"`) {
		t.Fatalf("export lacks the child or the user:\n%s", b.String())
	}
	if err := env.Client("other").ExportChat(ctx, parent.Chat.ID, &b); statusOf(err) != http.StatusNotFound {
		t.Fatalf("another user's export: %v, want 404", err)
	}
}

// TestAdminEraseAndExportUser: an admin token exports a user's chats and
// erases the user (answering what went); the user's token then stops
// working and a second erasure is a 404; a write token cannot use either
// route (403), nor an admin acting for a user.
func TestAdminEraseAndExportUser(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	ctx := t.Context()
	victim := env.Client("victim")
	for range 3 {
		if _, err := victim.CreateChat(ctx, client.CreateChatRequest{Content: text("sentinel-erase-me"), ResponseFormat: schemaFormat()}); err != nil {
			t.Fatal(err)
		}
	}
	admin, _ := scopedClient(t, env, store.TokenSpec{User: "root", Scopes: []client.Scope{client.ScopeAdmin}})
	if _, err := victim.EraseUser(ctx, "victim"); statusOf(err) != http.StatusForbidden {
		t.Fatalf("a write token's erase: %v, want 403", err)
	}
	if err := victim.ExportUser(ctx, "victim", &bytes.Buffer{}); statusOf(err) != http.StatusForbidden {
		t.Fatalf("a write token's export: %v, want 403", err)
	}
	var b bytes.Buffer
	if err := admin.ExportUser(ctx, "victim", &b); err != nil {
		t.Fatal(err)
	}
	types := lineTypes(t, b.Bytes())
	if n := strings.Count(strings.Join(types, " "), "structured_request"); n != 3 || types[0] != "chatd_export" || types[len(types)-1] != "end" {
		t.Fatalf("user export lines %v", types)
	}
	for _, name := range []string{"nobody", "no%20body"} {
		if err := admin.ExportUser(ctx, name, &b); statusOf(err) != http.StatusNotFound {
			t.Fatalf("export of %q: %v, want 404", name, err)
		}
	}
	rep, err := admin.EraseUser(ctx, "victim")
	if err != nil {
		t.Fatal(err)
	}
	if rep.User != "victim" || rep.Chats != 3 || rep.CancelledRequests != 3 || rep.Tokens < 1 {
		t.Fatalf("erasure report %+v", rep)
	}
	if _, err := victim.ListChats(ctx, 0, ""); statusOf(err) != http.StatusUnauthorized {
		t.Fatalf("the erased user's token: %v, want 401", err)
	}
	if _, err := admin.EraseUser(ctx, "victim"); statusOf(err) != http.StatusNotFound {
		t.Fatalf("second erase: %v, want 404", err)
	}
}
