package httpapi_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jwtauth"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/testenv"
)

const testAudience = "chatd-test"

// testIdP is an identity provider of one RSA key, its JWKS served over
// HTTP.
type testIdP struct {
	issuer string
	key    *rsa.PrivateKey
}

func newTestIdP(t *testing.T) (*testIdP, *jwtauth.Verifier) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := jwkset.NewJWKFromKey(&k.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "k1", USE: jwkset.UseSig}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{jwk.Marshal()}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) }))
	t.Cleanup(srv.Close)
	p := &testIdP{issuer: srv.URL + "/", key: k}
	v, err := jwtauth.New(jwtauth.Options{Issuer: p.issuer, JWKSURL: srv.URL + "/keys", Audience: testAudience})
	if err != nil {
		t.Fatal(err)
	}
	return p, v
}

func (p *testIdP) token(t *testing.T, sub string, over jwt.MapClaims) string {
	t.Helper()
	claims := jwt.MapClaims{"iss": p.issuer, "aud": testAudience, "sub": sub, "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range over {
		claims[k] = v
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(p.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJWTUsers: two subjects of the app's identity provider are two chatd
// users, created on first use, who cannot see each other's chats, streams
// or structured requests; a backend acting for one (X-Chatd-User: her
// subject) sees exactly hers; API tokens keep working beside JWTs; a JWT
// cannot act for anyone; no JWT reaches the logs.
func TestJWTUsers(t *testing.T) {
	t.Parallel()
	p, v := newTestIdP(t)
	env := testenv.New(t, testenv.Options{NoRunner: true, JWT: v})
	aliceJWT, bobJWT := p.token(t, "auth0|alice", nil), p.token(t, "auth0|bob", nil)
	alice := client.New(env.API.URL, aliceJWT, env.API.Client())
	bob := client.NewWithTokenSource(env.API.URL, func(context.Context) (string, error) { return bobJWT, nil }, env.API.Client())

	chat, err := alice.CreateChat(t.Context(), client.CreateChatRequest{Content: text("alice's"), ResponseFormat: schemaFormat()})
	if err != nil {
		t.Fatal(err)
	}
	requestID := *chat.Messages[0].StructuredOutputRequestID
	if _, err := bob.GetChat(t.Context(), chat.Chat.ID); statusOf(err) != 404 {
		t.Fatalf("bob gets alice's chat: %v", err)
	}
	if list, err := bob.ListChats(t.Context(), 0, ""); err != nil || len(list.Chats) != 0 {
		t.Fatalf("bob lists %+v %v", list.Chats, err)
	}
	if _, err := bob.GetStructuredOutput(t.Context(), requestID, 0); statusOf(err) != 404 {
		t.Fatalf("bob looks up alice's request: %v", err)
	}
	if _, err := bob.Stream(t.Context(), chat.Chat.ID, 0).Next(); statusOf(err) != 404 {
		t.Fatalf("bob follows alice's chat: %v", err)
	}
	if _, err := alice.GetStructuredOutput(t.Context(), requestID, 0); err != nil {
		t.Fatalf("alice looks up her request: %v", err)
	}
	watch := collect(t, alice.Watch(t.Context()))
	watch.until(t, "her chat", func(ev client.StreamEvent) bool { return ev.Chat != nil && ev.Chat.ID == chat.Chat.ID })

	// The users: keyed by (issuer, subject), named idp:…
	aliceUser, err := env.Store.UserBySubject(t.Context(), p.issuer, "auth0|alice")
	if err != nil || !strings.HasPrefix(aliceUser.Name, "idp:") {
		t.Fatalf("alice's user: %+v %v", aliceUser, err)
	}
	elsewhere, err := env.Store.UserBySubject(t.Context(), "https://other-issuer.example/", "auth0|alice")
	if err != nil || elsewhere.ID == aliceUser.ID {
		t.Fatalf("the same subject at another issuer is the same user: %+v %v", elsewhere, err)
	}

	// A backend acts for alice by her subject and sees exactly her chats.
	backend, _ := scopedClient(t, env, store.TokenSpec{User: "app-backend", ActAs: true})
	if list, err := backend.ActAs("auth0|alice").ListChats(t.Context(), 0, ""); err != nil || len(list.Chats) != 1 || list.Chats[0].ID != chat.Chat.ID {
		t.Fatalf("the backend as alice: %+v %v", list.Chats, err)
	}
	if _, err := backend.ActAs("auth0|bob").GetChat(t.Context(), chat.Chat.ID); statusOf(err) != 404 {
		t.Fatalf("the backend as bob gets alice's chat: %v", err)
	}
	// A JWT cannot act for another user; an API token still works.
	if _, err := alice.ActAs("auth0|bob").ListChats(t.Context(), 0, ""); statusOf(err) != 403 {
		t.Fatalf("a JWT acting for bob: %v", err)
	}
	if _, err := env.Client("plain").ListChats(t.Context(), 0, ""); err != nil {
		t.Fatalf("an API token beside JWTs: %v", err)
	}
	if logs := env.Logs(); strings.Contains(logs, aliceJWT) || strings.Contains(logs, strings.Split(bobJWT, ".")[2]) {
		t.Fatal("a JWT reached the logs")
	}
	if !hasLine(env.Logs(), `msg="http request"`, "auth=jwt", "user_id="+aliceUser.ID.String()) {
		t.Fatalf("no access line of alice's JWT:\n%s", env.Logs())
	}
}

// TestJWTRefusals: a refused JWT is a 401 whose WWW-Authenticate names the
// reason and not the token.
func TestJWTRefusals(t *testing.T) {
	t.Parallel()
	p, v := newTestIdP(t)
	env := testenv.New(t, testenv.Options{NoRunner: true, JWT: v})
	cases := map[string]struct{ token, want string }{
		"expired":       {p.token(t, "u", jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()}), "the token has expired"},
		"wrong aud":     {p.token(t, "u", jwt.MapClaims{"aud": "another-api"}), "the token is for another audience"},
		"wrong iss":     {p.token(t, "u", jwt.MapClaims{"iss": "https://evil.example/"}), "the token is from another issuer"},
		"sub not a str": {p.token(t, "u", jwt.MapClaims{"sub": 7}), "the claim sub is not a string"},
		"oversized":     {p.token(t, "u", jwt.MapClaims{"pad": strings.Repeat("p", 9000)}), "larger than 8192 bytes"},
	}
	for name, c := range cases {
		r := call(t, env, c.token, "GET", "/api/v1/chats", "")
		ch := r.header.Get("WWW-Authenticate")
		if r.status != 401 || !strings.Contains(ch, `error="invalid_token"`) || !strings.Contains(ch, c.want) ||
			strings.Contains(ch, c.token[len(c.token)-16:]) || strings.Contains(string(r.body), c.token[len(c.token)-16:]) {
			t.Errorf("%s: %d %q %s", name, r.status, ch, r.body)
		}
	}
	if strings.Contains(env.Logs(), cases["expired"].token) {
		t.Fatal("a refused JWT reached the logs")
	}
}

// TestJWTStreamEndsWithTheJWT: a stream opened with a JWT ends with an
// error event once the server stops accepting the JWT (its exp plus the
// leeway), and reconnecting with it is refused.
func TestJWTStreamEndsWithTheJWT(t *testing.T) {
	t.Parallel()
	p, v := newTestIdP(t)
	env := testenv.New(t, testenv.Options{NoRunner: true, JWT: v})
	// Expired 25 s ago: accepted for 5 s more (the leeway is 30 s).
	expiring := p.token(t, "auth0|carol", jwt.MapClaims{"exp": time.Now().Add(-jwtauth.DefaultLeeway + 5*time.Second).Unix()})
	c := client.New(env.API.URL, expiring, env.API.Client())
	chat, err := c.CreateChat(t.Context(), client.CreateChatRequest{Content: text("hi")})
	if err != nil {
		t.Fatal(err)
	}
	stream := collect(t, c.Stream(t.Context(), chat.Chat.ID, 0))
	stream.until(t, "the status", func(ev client.StreamEvent) bool { return ev.Type == client.EventStatus })
	select {
	case err := <-stream.errs:
		if statusOf(err) != 401 {
			t.Fatalf("reconnect with the expired JWT: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the stream outlived its JWT")
	}
	var last client.StreamEvent
	for len(stream.events) > 0 {
		last = <-stream.events
	}
	if last.Error == nil || !strings.Contains(last.Error.Message, "revoked or has expired") {
		t.Fatalf("the last event: %+v", last)
	}
}

// TestJWTTicketStreamEndsWithTheJWT: a stream opened through a ticket that
// a JWT asked for ends with an error event once the server stops accepting
// the JWT, as one opened with the JWT itself does; the ticket expires with
// the JWT, so one left unused is refused after.
func TestJWTTicketStreamEndsWithTheJWT(t *testing.T) {
	t.Parallel()
	p, v := newTestIdP(t)
	env := testenv.New(t, testenv.Options{NoRunner: true, JWT: v})
	// Expired 25 s ago: accepted for 5 s more (the leeway is 30 s).
	exp := time.Now().Add(-jwtauth.DefaultLeeway + 5*time.Second).Truncate(time.Second)
	c := client.New(env.API.URL, p.token(t, "auth0|dave", jwt.MapClaims{"exp": exp.Unix()}), env.API.Client())
	chat, err := c.CreateChat(t.Context(), client.CreateChatRequest{Content: text("hi")})
	if err != nil {
		t.Fatal(err)
	}
	spare, err := c.CreateStreamTicket(t.Context(), chat.Chat.ID)
	if err != nil {
		t.Fatal(err)
	}
	if validUntil := exp.Add(jwtauth.DefaultLeeway); spare.ExpiresAt.After(validUntil) {
		t.Fatalf("the ticket expires at %s, after its JWT (%s)", spare.ExpiresAt, validUntil)
	}
	events := ticketStream(t, env, c, chat.Chat.ID)
	timeout := time.After(60 * time.Second)
	for last := ""; ; {
		select {
		case ev, open := <-events:
			if open {
				last = ev
				continue
			}
			if last != "error" {
				t.Fatalf("the ticket stream ended with %q", last)
			}
		case <-timeout:
			t.Fatal("the ticket stream outlived its JWT")
		}
		break
	}
	if code, _ := openTicketStream(t, env.API.URL, chat.Chat.ID.String(), spare.Ticket); code != 401 {
		t.Fatalf("a ticket of a JWT no longer accepted: %d", code)
	}
}
