package httpapi_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jwtauth"
	"github.com/chatd/chatd/internal/oidctest"
	"github.com/chatd/chatd/internal/testenv"
)

// kidOf reads the key id of a JWT's header.
func kidOf(t *testing.T, token string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	var h struct {
		Kid string `json:"kid"`
	}
	if err != nil || json.Unmarshal(raw, &h) != nil || h.Kid == "" {
		t.Fatalf("the header of %.20s…: %s %v", token, raw, err)
	}
	return h.Kid
}

// TestRealOpenIDProvider runs zitadel/oidc's example provider and signs
// its users in: chatd finds its keys through discovery, accepts the ID
// tokens it issues (each user its own chatd user), picks up a key the
// provider rotated to without a restart, and refuses its tokens once they
// expire.
func TestRealOpenIDProvider(t *testing.T) {
	t.Parallel()
	p := oidctest.Start(t)
	var skew atomic.Int64 // how far the server's clock is moved ahead
	v, err := jwtauth.New(jwtauth.Options{Issuer: p.Issuer, Discovery: true, Audience: oidctest.ClientID,
		Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.New(t, testenv.Options{NoRunner: true, JWT: v})

	first, err := p.Login(t.Context(), oidctest.User, oidctest.Password)
	if err != nil {
		t.Fatal(err)
	}
	c1 := client.New(env.API.URL, first, env.API.Client())
	chat, err := c1.CreateChat(t.Context(), client.CreateChatRequest{Content: text("signed in at the provider")})
	if err != nil {
		t.Fatalf("the provider's ID token: %v", err)
	}
	if v.Fetches() != 1 {
		t.Fatalf("%d fetches of the provider's keys, want 1 (discovery, then the JWKS)", v.Fetches())
	}
	if got, err := c1.GetChat(t.Context(), chat.Chat.ID); err != nil || got.ID != chat.Chat.ID {
		t.Fatalf("%+v %v", got, err)
	}

	// The other user is another chatd user.
	second, err := p.Login(t.Context(), oidctest.User2, oidctest.Password)
	if err != nil {
		t.Fatal(err)
	}
	c2 := client.New(env.API.URL, second, env.API.Client())
	if _, err := c2.GetChat(t.Context(), chat.Chat.ID); statusOf(err) != 404 {
		t.Fatalf("the other user gets the first's chat: %v", err)
	}
	// Both were created on first use, keyed by the provider and their subject.
	users, err := env.Store.ListUsers(t.Context(), "", 10)
	if err != nil || len(users) != 2 {
		t.Fatalf("users: %+v %v", users, err)
	}
	subjects := map[string]bool{}
	for _, u := range users {
		if u.Issuer == nil || *u.Issuer != p.Issuer || !strings.HasPrefix(u.Name, "idp:") {
			t.Fatalf("user %+v", u)
		}
		subjects[*u.Subject] = true
	}
	if !subjects["id1"] || !subjects["id2"] {
		t.Fatalf("subjects %v", subjects)
	}

	// The provider rotates its key; a minute on, its new tokens verify
	// with one more fetch, and so do the old key's.
	newKID := p.Rotate(t)
	skew.Add(int64(time.Minute + time.Second))
	rotated, err := p.Login(t.Context(), oidctest.User, oidctest.Password)
	if err != nil {
		t.Fatal(err)
	}
	if kidOf(t, rotated) != newKID || newKID == kidOf(t, first) {
		t.Fatalf("the provider signed with %s after rotating to %s", kidOf(t, rotated), newKID)
	}
	c3 := client.New(env.API.URL, rotated, env.API.Client())
	if list, err := c3.ListChats(t.Context(), 0, ""); err != nil || len(list.Chats) != 1 || list.Chats[0].ID != chat.Chat.ID {
		t.Fatalf("the rotated key's token: %+v %v", list, err)
	}
	if _, err := c1.ListChats(t.Context(), 0, ""); err != nil {
		t.Fatalf("the old key's token after the rotation: %v", err)
	}
	if v.Fetches() != 2 {
		t.Fatalf("%d fetches after the rotation, want 2", v.Fetches())
	}

	// Its ID tokens live an hour: past that (and the leeway), refused.
	skew.Add(int64(time.Hour))
	r := call(t, env, rotated, "GET", "/api/v1/chats", "")
	if r.status != 401 || !strings.Contains(r.header.Get("WWW-Authenticate"), "the token has expired") {
		t.Fatalf("the provider's expired token: %d %q", r.status, r.header.Get("WWW-Authenticate"))
	}
}
