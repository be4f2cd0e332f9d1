package jstest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/console"
	"github.com/chatd/chatd/internal/jwtauth"
	"github.com/chatd/chatd/internal/oidctest"
	"github.com/chatd/chatd/internal/testenv"
)

// consoleServer serves env's API and console, plus more routes; pages of
// its own origin may frame the console.
func consoleServer(t *testing.T, env *testenv.Env, more map[string]http.HandlerFunc) *httptest.Server {
	t.Helper()
	var h atomic.Pointer[http.ServeMux]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.Load().ServeHTTP(w, r) }))
	mux := http.NewServeMux()
	mux.Handle("/", console.MountWith(env.Server, console.Config{FrameAncestors: []string{srv.URL}}))
	for path, h := range more {
		mux.HandleFunc(path, h)
	}
	h.Store(mux)
	t.Cleanup(func() {
		env.Server.Shutdown() // end the streams first: Close waits for them
		srv.Close()
	})
	return srv
}

// TestConsoleSignsInWithJWT: a user of the app's identity provider (a real
// OpenID provider, signed in through its login form) signs in to the
// console with the ID token it issued and follows a chat live.
func TestConsoleSignsInWithJWT(t *testing.T) {
	t.Parallel()
	idp, verifier := startIdP(t)
	env := testenv.New(t, testenv.Options{JWT: verifier})
	srv := consoleServer(t, env, nil)
	idToken := login(t, idp, oidctest.User)
	api := client.New(srv.URL, idToken, nil)
	chat, err := api.CreateChat(t.Context(), client.CreateChatRequest{Title: "Signed in at the identity provider",
		Content: []client.MessagePart{client.TextPart("Hello from a user of the app's identity provider.")}})
	if err != nil {
		t.Fatal(err)
	}

	const wait = 60 * time.Second
	p := newTab(t, 1100, 800)
	p.navigate(srv.URL + "/console/")
	p.waitFor(`document.querySelector("#signin-token")`, wait)
	p.typeInto("#signin-token", idToken)
	p.press("Enter")
	p.waitFor(`document.querySelector(".chats a[href='#/chats/`+chat.Chat.ID.String()+`']")`, wait)
	p.run(`location.hash = "#/chats/` + chat.Chat.ID.String() + `"`)
	p.waitFor(`document.querySelector(".chat .conn")?.dataset.state === "live" &&
		document.querySelectorAll(".history li").length >= 2 && document.querySelector(".chat-head")?.dataset.status === "waiting"`, wait)
	t.Logf("screenshot %s", p.screenshot(t.ArtifactDir(), "17-signed-in-with-jwt"))

	// A refused JWT says why.
	p.run(`sessionStorage.clear(); location.hash = ""`)
	p.navigate(srv.URL + "/console/")
	p.waitFor(`document.querySelector("#signin-token")`, wait)
	p.typeInto("#signin-token", idToken[:len(idToken)-4]+"AAAA")
	p.press("Enter")
	p.waitFor(`document.body.innerText.includes("The JWT is not valid: the token's signature is not valid.")`, wait)
}

// shortIdP is an identity provider of the test's own, whose tokens may
// expire in a minute (a real provider's live an hour).
type shortIdP struct {
	issuer string
	key    *rsa.PrivateKey
}

func newShortIdP(t *testing.T) (*shortIdP, *jwtauth.Verifier) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := jwkset.NewJWKFromKey(&k.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "k", USE: jwkset.UseSig}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{jwk.Marshal()}})
	keys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) }))
	t.Cleanup(keys.Close)
	p := &shortIdP{issuer: keys.URL + "/", key: k}
	v, err := jwtauth.New(jwtauth.Options{Issuer: p.issuer, JWKSURL: keys.URL, Audience: "console-test"})
	if err != nil {
		t.Fatal(err)
	}
	return p, v
}

func (p *shortIdP) token(t *testing.T, sub string, life time.Duration) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": p.issuer, "aud": "console-test", "sub": sub,
		"exp": time.Now().Add(life).Unix()})
	tok.Header["kid"] = "k"
	s, err := tok.SignedString(p.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConsoleEmbeddedTakesTokensFromThePage: embedded in an app's page, the
// console asks the page for a JWT (signing in without a form), and asks
// again a minute before it expires, then uses the fresh one.
func TestConsoleEmbeddedTakesTokensFromThePage(t *testing.T) {
	t.Parallel()
	idp, verifier := newShortIdP(t)
	env := testenv.New(t, testenv.Options{JWT: verifier, NoRunner: true})
	fresh := idp.token(t, "app-user-9", time.Hour)
	// The page hands out a token that expires 70 s after the page loads,
	// then a fresh one.
	host := `<!doctype html><title>An app</title><iframe id="console" src="/console/" width="1000" height="700"></iframe>
<script>
const tokens = [FIRST, FRESH];
window.asked = 0;
addEventListener("message", (e) => {
  if (e.data?.type !== "chatd-token-request") return;
  const t = tokens[window.asked++];
  if (t) e.source.postMessage({ type: "chatd-token", token: t }, "*");
});
</script>`
	srv := consoleServer(t, env, map[string]http.HandlerFunc{"GET /app.html": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		page := strings.NewReplacer("FIRST", jsString(idp.token(t, "app-user-9", 70*time.Second)), "FRESH", jsString(fresh)).Replace(host)
		_, _ = w.Write([]byte(page))
	}})
	api := client.New(srv.URL, fresh, nil)
	chat, err := api.CreateChat(t.Context(), client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("embedded")}})
	if err != nil {
		t.Fatal(err)
	}
	p := newTab(t, 1100, 800)
	p.navigate(srv.URL + "/app.html")
	inFrame := `document.getElementById("console").contentWindow`
	// Signed in by the page: the user's chat is listed.
	p.waitFor(inFrame+`?.document.querySelector(".chats a[href='#/chats/`+chat.Chat.ID.String()+`']") && window.asked >= 1`, 60*time.Second)
	// 70 s from its exp, the console asks for a new token within 10 s.
	p.waitFor(`window.asked === 2 && `+inFrame+`.sessionStorage.getItem("chatd.token") === `+jsString(fresh), 60*time.Second)
	p.run(inFrame + `.location.hash = "#/chats/` + chat.Chat.ID.String() + `"`)
	p.waitFor(inFrame+`.document.querySelector(".chat .conn")?.dataset.state === "live"`, 60*time.Second)
}
