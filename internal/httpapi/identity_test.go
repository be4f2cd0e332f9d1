package httpapi_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/testenv"
)

// scopedClient is a client of env with a new token for userName as spec
// says.
func scopedClient(t *testing.T, env *testenv.Env, spec store.TokenSpec) (*client.Client, client.Token) {
	t.Helper()
	secret, info, err := env.Store.CreateScopedToken(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	tok := client.Token{ID: info.ID, User: info.UserName}
	return client.New(env.API.URL, secret, env.API.Client()), tok
}

func statusOf(err error) int {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.StatusCode
	}
	return 0
}

// TestReadTokenCannotWrite: a read token reads (lists, gets, follows) and
// every write is a 403 naming the write scope; an admin-only route is a 403
// naming admin.
func TestReadTokenCannotWrite(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	owner := env.Client("reader-owner")
	chat, err := owner.CreateChat(t.Context(), client.CreateChatRequest{Content: text("hi")})
	if err != nil {
		t.Fatal(err)
	}
	id := chat.Chat.ID
	reader, _ := scopedClient(t, env, store.TokenSpec{User: "reader-owner", Scopes: []client.Scope{client.ScopeRead}})
	if _, err := reader.GetChat(t.Context(), id); err != nil {
		t.Fatalf("a read token reads: %v", err)
	}
	stream := collect(t, reader.Stream(t.Context(), id, 0))
	stream.until(t, "the status", func(ev client.StreamEvent) bool { return ev.Type == client.EventStatus })
	if _, err := reader.CreateStreamTicket(t.Context(), id); err != nil {
		t.Fatalf("a read token gets a stream ticket: %v", err)
	}
	writes := map[string]func() error{
		"create": func() error {
			_, err := reader.CreateChat(t.Context(), client.CreateChatRequest{Content: text("x")})
			return err
		},
		"send": func() error {
			_, err := reader.SendMessage(t.Context(), id, client.SendMessageRequest{Content: text("x")})
			return err
		},
		"edit": func() error {
			_, err := reader.EditMessage(t.Context(), id, chat.Messages[0].ID, client.EditMessageRequest{Content: text("x")})
			return err
		},
		"interrupt": func() error { _, err := reader.Interrupt(t.Context(), id); return err },
		"update":    func() error { _, err := reader.UpdateChat(t.Context(), id, client.UpdateChatRequest{}); return err },
		"revoke":    func() error { return reader.RevokeToken(t.Context(), uuid.New()) },
	}
	for name, do := range writes {
		err := do()
		var ae *client.APIError
		want := "write"
		if name == "revoke" {
			want = "admin"
		}
		if !errors.As(err, &ae) || ae.StatusCode != 403 || !strings.Contains(ae.Body.Message, "needs the "+want+" scope") {
			t.Errorf("%s with a read token: %v", name, err)
		}
	}
	r := call(t, env, env.Token("reader-owner"), "POST", "/api/v1/tokens", `{"user":"x"}`)
	if r.status != 403 || r.header.Get("WWW-Authenticate") != `Bearer realm="chatd", error="insufficient_scope", scope="admin"` {
		t.Fatalf("a write token on the token API: %d %q", r.status, r.header.Get("WWW-Authenticate"))
	}
	// Nothing was written.
	if got, err := owner.ListMessages(t.Context(), id, 0, 100); err != nil || len(got.Messages) != 1 {
		t.Fatalf("messages after the refused writes: %+v %v", got.Messages, err)
	}
}

// TestActAs: a backend token with the act-as capability acts for a user
// through X-Chatd-User and sees exactly that user's chats; the user's own
// token sees what it made; without the capability the header is a 403; the
// access line names the token and its own user beside the user.
func TestActAs(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	backend, backendTok := scopedClient(t, env, store.TokenSpec{User: "backend", ActAs: true})
	alice, bob := env.Client("alice-app"), env.Client("bob-app")
	mine, err := alice.CreateChat(t.Context(), client.CreateChatRequest{Content: text("alice's own")})
	if err != nil {
		t.Fatal(err)
	}
	bobs, err := bob.CreateChat(t.Context(), client.CreateChatRequest{Content: text("bob's")})
	if err != nil {
		t.Fatal(err)
	}
	asAlice := backend.ActAs("alice-app")
	made, err := asAlice.CreateChat(t.Context(), client.CreateChatRequest{Content: text("made by the backend for alice")})
	if err != nil {
		t.Fatal(err)
	}
	list, err := asAlice.ListChats(t.Context(), 0, "")
	if err != nil || len(list.Chats) != 2 {
		t.Fatalf("the backend as alice sees %+v %v, want alice's two chats", list.Chats, err)
	}
	if _, err := asAlice.GetChat(t.Context(), bobs.Chat.ID); statusOf(err) != 404 {
		t.Fatalf("the backend as alice gets bob's chat: %v", err)
	}
	if _, err := alice.GetChat(t.Context(), made.Chat.ID); err != nil {
		t.Fatalf("alice does not see the chat made for her: %v", err)
	}
	if _, err := bob.GetChat(t.Context(), made.Chat.ID); statusOf(err) != 404 {
		t.Fatalf("bob sees alice's chat: %v", err)
	}
	// Alice's stream, opened by the backend, sees her chat.
	stream := collect(t, asAlice.Stream(t.Context(), mine.Chat.ID, 0))
	stream.until(t, "the status", func(ev client.StreamEvent) bool { return ev.Type == client.EventStatus })
	// The backend's own chats are its own.
	if own, err := backend.ListChats(t.Context(), 0, ""); err != nil || len(own.Chats) != 0 {
		t.Fatalf("the backend itself: %+v %v", own.Chats, err)
	}
	// Without the capability, the header is refused.
	if _, err := bob.ActAs("alice-app").ListChats(t.Context(), 0, ""); statusOf(err) != 403 {
		t.Fatalf("X-Chatd-User without act-as: %v", err)
	}
	if r := call(t, env, "", "GET", "/api/v1/chats", "", "X-Chatd-User", "alice-app"); r.status != 401 {
		t.Fatalf("X-Chatd-User without a token: %d", r.status)
	}
	if _, err := backend.ActAs("bad name!").ListChats(t.Context(), 0, ""); statusOf(err) != 400 {
		t.Fatalf("an unusable X-Chatd-User: %v", err)
	}
	// An act-as token does not lend its admin scope.
	admin, _ := scopedClient(t, env, store.TokenSpec{User: "backend", ActAs: true,
		Scopes: []client.Scope{client.ScopeWrite, client.ScopeAdmin}})
	if _, err := admin.ActAs("alice-app").ListTokens(t.Context(), ""); statusOf(err) != 403 {
		t.Fatalf("admin through act-as: %v", err)
	}
	if _, err := asAlice.GetChat(t.Context(), made.Chat.ID); err != nil {
		t.Fatal(err)
	}
	want := []string{"path=/api/v1/chats/" + made.Chat.ID.String(), "user_id=" + userID(t, env, "alice-app").String(),
		"auth=token", "token_id=" + backendTok.ID.String(), "acting_user_id=" + userID(t, env, "backend").String()}
	if !hasLine(env.Logs(), append(want, `msg="http request"`)...) {
		t.Fatalf("no access line with %q in:\n%s", want, env.Logs())
	}
}

// hasLine says whether a line of logs holds every one of parts.
func hasLine(logs string, parts ...string) bool {
	for l := range strings.SplitSeq(logs, "\n") {
		all := true
		for _, p := range parts {
			if !strings.Contains(l, p) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func userID(t *testing.T, env *testenv.Env, name string) uuid.UUID {
	t.Helper()
	u, err := env.Store.UserByName(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

// TestTokenAPI: an admin token does over HTTP what `chatd token` does:
// create (the secret once), list (never a secret), revoke, and list
// users; a token revoked through the API is refused by another replica,
// and its streams there end, within the 5 s bound.
func TestTokenAPI(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	replica := testenv.OnPool(t, env.Pool, testenv.Options{NoRunner: true})
	admin, _ := scopedClient(t, env, store.TokenSpec{User: "root", Scopes: []client.Scope{client.ScopeAdmin}})
	created, err := admin.CreateToken(t.Context(), client.CreateTokenRequest{User: "dora",
		Scopes: []client.Scope{client.ScopeWrite}, ActAs: true, ExpiresIn: 3600})
	if err != nil {
		t.Fatal(err)
	}
	tok := created.Token
	if !strings.HasPrefix(created.Secret, store.TokenPrefix) || tok.User != "dora" || !tok.ActAs || tok.ExpiresAt == nil ||
		len(tok.Scopes) != 2 || tok.Scopes[0] != client.ScopeRead || tok.Scopes[1] != client.ScopeWrite {
		t.Fatalf("created: %+v", created)
	}
	list, err := admin.ListTokens(t.Context(), "dora")
	if err != nil || len(list.Tokens) != 1 || list.Tokens[0].ID != tok.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	if raw, _ := json.Marshal(list); strings.Contains(string(raw), created.Secret) {
		t.Fatal("the list shows the secret")
	}
	users, err := admin.ListUsers(t.Context(), 1, "")
	if err != nil || len(users.Users) != 1 || users.NextCursor == "" {
		t.Fatalf("users, page 1: %+v %v", users, err)
	}
	if more, err := admin.ListUsers(t.Context(), 10, users.NextCursor); err != nil || len(more.Users) != 1 || more.Users[0].Name == users.Users[0].Name {
		t.Fatalf("users, page 2: %+v %v", more, err)
	}
	for _, bad := range []string{`{"user":""}`, `{"user":"x","scopes":["root"]}`, `{"user":"x y"}`, `{"user":"x","expires_in":-1}`} {
		if r := call(t, env, "", "POST", "/api/v1/tokens", bad, "Authorization", "Bearer "+adminSecret(t, admin, env)); r.status != 400 {
			t.Errorf("%s: %d %s", bad, r.status, r.body)
		}
	}
	// Dora's token works on the replica, with a stream open there.
	dora := client.New(replica.API.URL, created.Secret, replica.API.Client())
	chat, err := dora.CreateChat(t.Context(), client.CreateChatRequest{Content: text("hi")})
	if err != nil {
		t.Fatal(err)
	}
	stream := collect(t, dora.Stream(t.Context(), chat.Chat.ID, 0))
	stream.until(t, "the status", func(ev client.StreamEvent) bool { return ev.Type == client.EventStatus })
	local := client.New(env.API.URL, created.Secret, env.API.Client())
	if _, err := local.ListChats(t.Context(), 0, ""); err != nil { // cached here now
		t.Fatal(err)
	}
	start := time.Now()
	if err := admin.RevokeToken(t.Context(), tok.ID); err != nil {
		t.Fatal(err)
	}
	// The replica that revoked it refuses it at once, its cache notwithstanding.
	if _, err := local.ListChats(t.Context(), 0, ""); statusOf(err) != 401 {
		t.Fatalf("the revoking replica accepts the token: %v", err)
	}
	if err := admin.RevokeToken(t.Context(), tok.ID); statusOf(err) != 404 {
		t.Fatalf("revoking again: %v", err)
	}
	select {
	case err := <-stream.errs:
		if statusOf(err) != 401 {
			t.Fatalf("reconnect after the revocation: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the replica's stream outlived the revocation")
	}
	took := time.Since(start)
	if _, err := dora.ListChats(t.Context(), 0, ""); statusOf(err) != 401 {
		t.Fatalf("the replica accepts a revoked token: %v", err)
	}
	if bound := store.TokenCacheTTL + 5*time.Second; took > bound {
		t.Fatalf("the replica's stream ended %s after the revocation (bound %s)", took, bound)
	}
	t.Logf("the replica ended the stream %s after the revocation", took.Round(time.Millisecond))
}

// adminSecret makes another admin token (the client hides its own).
func adminSecret(t *testing.T, admin *client.Client, env *testenv.Env) string {
	t.Helper()
	out, err := admin.CreateToken(t.Context(), client.CreateTokenRequest{User: "root2", Scopes: []client.Scope{client.ScopeAdmin}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Secret
}
