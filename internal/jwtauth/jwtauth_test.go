package jwtauth_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/internal/jwtauth"
)

const (
	issuer   = "https://idp.example/"
	audience = "chatd-api"
)

// idp is a test identity provider: signing keys by kid, a JWKS endpoint
// that counts its fetches and can be taken down, and a discovery document.
type idp struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	keys   map[string]crypto.Signer
	algs   map[string]jwt.SigningMethod
	down   atomic.Bool
	served atomic.Int64
}

func newIdP(t *testing.T) *idp {
	p := &idp{t: t, keys: map[string]crypto.Signer{}, algs: map[string]jwt.SigningMethod{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(map[string]string{"issuer": p.srv.URL + "/", "jwks_uri": p.srv.URL + "/keys"})
		case "/keys":
			p.served.Add(1)
			_, _ = w.Write(p.jwks())
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// addKey makes a key of the algorithm's kind and publishes it under kid.
func (p *idp) addKey(kid string, m jwt.SigningMethod) {
	var k crypto.Signer
	var err error
	switch m {
	case jwt.SigningMethodRS256:
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	case jwt.SigningMethodES256:
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		_, k, err = ed25519.GenerateKey(rand.Reader)
	}
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys[kid], p.algs[kid] = k, m
}

func (p *idp) jwks() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	set := jwkset.JWKSMarshal{}
	for kid, k := range p.keys {
		jwk, err := jwkset.NewJWKFromKey(k.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{
			KID: kid, USE: jwkset.UseSig, ALG: jwkset.ALG(p.algs[kid].Alg())}})
		if err != nil {
			p.t.Fatal(err)
		}
		set.Keys = append(set.Keys, jwk.Marshal())
	}
	b, _ := json.Marshal(set)
	return b
}

// sign makes a token signed by kid's key with claims over the defaults
// (iss, aud, sub, exp in an hour); a nil value removes a claim.
func (p *idp) sign(kid string, over jwt.MapClaims) string {
	p.mu.Lock()
	k, m := p.keys[kid], p.algs[kid]
	p.mu.Unlock()
	if m == nil {
		m = jwt.SigningMethodRS256
	}
	claims := jwt.MapClaims{"iss": issuer, "aud": audience, "sub": "user-1", "exp": time.Now().Add(time.Hour).Unix()}
	for name, v := range over {
		if v == nil {
			delete(claims, name)
		} else {
			claims[name] = v
		}
	}
	tok := jwt.NewWithClaims(m, claims)
	tok.Header["kid"] = kid
	if k == nil { // an unknown kid: sign with a key nobody publishes
		k = strangerKey()
	}
	s, err := tok.SignedString(k)
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

// strangerKey is an RSA key no provider publishes (made once: RSA keys
// are slow to make).
var strangerKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

func newVerifier(t *testing.T, p *idp, o jwtauth.Options) *jwtauth.Verifier {
	t.Helper()
	if o.Issuer == "" {
		o.Issuer = issuer
	}
	if !o.Discovery && o.JWKSURL == "" {
		o.JWKSURL = p.srv.URL + "/keys"
	}
	o.Audience = audience
	v, err := jwtauth.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func reason(err error) string {
	var e *jwtauth.Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return fmt.Sprintf("not a refusal: %v", err)
}

// TestAcceptsTheProvidersTokens: RS256, ES256 and EdDSA tokens of the
// published keys are accepted, with the user from sub or a dotted claim,
// within the leeway.
func TestAcceptsTheProvidersTokens(t *testing.T) {
	t.Parallel()
	p := newIdP(t)
	for kid, m := range map[string]jwt.SigningMethod{"rsa": jwt.SigningMethodRS256, "ec": jwt.SigningMethodES256, "ed": jwt.SigningMethodEdDSA} {
		p.addKey(kid, m)
	}
	v := newVerifier(t, p, jwtauth.Options{})
	for _, kid := range []string{"rsa", "ec", "ed"} {
		id, err := v.Verify(t.Context(), p.sign(kid, jwt.MapClaims{"sub": "u-" + kid}))
		if err != nil || id.Subject != "u-"+kid {
			t.Errorf("%s: %+v %v", kid, id, err)
		}
	}
	// exp 10 s ago is within the 30 s leeway; an audience list holding ours.
	if _, err := v.Verify(t.Context(), p.sign("rsa", jwt.MapClaims{"exp": time.Now().Add(-10 * time.Second).Unix(),
		"aud": []string{"other", audience}})); err != nil {
		t.Errorf("within the leeway: %v", err)
	}
	nested := newVerifier(t, p, jwtauth.Options{UserClaim: "app_metadata.user_id"})
	id, err := nested.Verify(t.Context(), p.sign("rsa", jwt.MapClaims{"app_metadata": map[string]any{"user_id": "nested-7"}}))
	if err != nil || id.Subject != "nested-7" {
		t.Errorf("a dotted claim: %+v %v", id, err)
	}
}

// TestHostileTokens: each is refused with a reason that names it and never
// repeats the token.
func TestHostileTokens(t *testing.T) {
	t.Parallel()
	p := newIdP(t)
	p.addKey("k1", jwt.SigningMethodRS256)
	v := newVerifier(t, p, jwtauth.Options{})
	good := p.sign("k1", nil)
	parts := strings.Split(good, ".")

	rsaKey := p.keys["k1"].(*rsa.PrivateKey)
	der, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": issuer, "aud": audience, "sub": "x", "exp": time.Now().Add(time.Hour).Unix()})
	hs.Header["kid"] = "k1"
	hsToken, _ := hs.SignedString(pubPEM) // the public key as an HMAC secret
	none := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"iss": issuer, "aud": audience, "sub": "x", "exp": time.Now().Add(time.Hour).Unix()})
	none.Header["kid"] = "k1"
	noneToken, _ := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(claims), `"user-1"`, `"admin-1"`, 1))) + "." + parts[2]

	cases := []struct{ name, token, want string }{
		{"alg none", noneToken, "algorithm is not allowed"},
		{"HS256 with the public key", hsToken, "algorithm is not allowed"},
		{"wrong aud", p.sign("k1", jwt.MapClaims{"aud": "someone-else"}), "another audience"},
		{"wrong iss", p.sign("k1", jwt.MapClaims{"iss": "https://evil.example/"}), "another issuer"},
		{"expired", p.sign("k1", jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()}), "has expired"},
		{"no exp", p.sign("k1", jwt.MapClaims{"exp": nil}), "no expiry"},
		{"not yet valid", p.sign("k1", jwt.MapClaims{"nbf": time.Now().Add(time.Hour).Unix()}), "not valid yet"},
		{"tampered", tampered, "signature is not valid"},
		{"oversized", p.sign("k1", jwt.MapClaims{"pad": strings.Repeat("x", jwtauth.MaxTokenBytes)}), "larger than 8192 bytes"},
		{"exp of the wrong type", p.sign("k1", jwt.MapClaims{"exp": "tomorrow"}), "wrong type"},
		{"sub of the wrong type", p.sign("k1", jwt.MapClaims{"sub": 42}), "claim sub is not a string"},
		{"no sub", p.sign("k1", jwt.MapClaims{"sub": nil}), "claim sub is missing"},
		{"no kid", strings.Replace(good, parts[0], base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)), 1), "names no key"},
		{"not a JWT", "a.b.c", "malformed"},
	}
	for _, c := range cases {
		_, err := v.Verify(t.Context(), c.token)
		r := reason(err)
		if !strings.Contains(r, c.want) {
			t.Errorf("%s: %q, want %q", c.name, r, c.want)
		}
		if strings.Contains(r, c.token) || len(c.token) > 20 && strings.Contains(r, c.token[len(c.token)-20:]) {
			t.Errorf("%s: the reason repeats the token", c.name)
		}
	}
}

// TestUnknownKeys: an unknown kid fetches the keys once, then is refused;
// a flood of unknown kids fetches at most once per MinRefresh; a key
// published since (rotation) is found by that fetch; with the JWKS down,
// tokens of the keys held still verify.
func TestUnknownKeys(t *testing.T) {
	t.Parallel()
	p := newIdP(t)
	p.addKey("old", jwt.SigningMethodRS256)
	now := time.Now()
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	v := newVerifier(t, p, jwtauth.Options{Discovery: true, Issuer: p.srv.URL + "/", MinRefresh: time.Minute,
		Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	signAt := func(kid string) string { return p.sign(kid, jwt.MapClaims{"iss": p.srv.URL + "/"}) }

	// The first token fetches (discovery, then keys).
	if _, err := v.Verify(t.Context(), signAt("old")); err != nil {
		t.Fatal(err)
	}
	if v.Fetches() != 1 || p.served.Load() != 1 {
		t.Fatalf("fetches %d, served %d", v.Fetches(), p.served.Load())
	}
	// An unknown kid within the minute: refused without a fetch.
	if _, err := v.Verify(t.Context(), signAt("made-up")); !strings.Contains(reason(err), "not among the identity provider's keys") {
		t.Fatalf("unknown kid: %v", err)
	}
	if p.served.Load() != 1 {
		t.Fatalf("an unknown kid within MinRefresh fetched: served %d", p.served.Load())
	}
	// A minute later the provider has rotated: the new kid fetches once.
	p.addKey("new", jwt.SigningMethodES256)
	clock.Add(int64(time.Minute))
	if _, err := v.Verify(t.Context(), signAt("new")); err != nil {
		t.Fatalf("the rotated key: %v", err)
	}
	if p.served.Load() != 2 {
		t.Fatalf("served %d after the rotation, want 2", p.served.Load())
	}
	// A flood of made-up kids, concurrently, a minute on: one fetch. The
	// tokens are signed first, so that the fetch does not compete with 200
	// signatures for the CPU (under -race on a loaded machine it timed out).
	clock.Add(int64(time.Minute))
	flood := make([]string, 200)
	for i := range flood {
		flood[i] = signAt(fmt.Sprintf("flood-%d", i))
	}
	var wg sync.WaitGroup
	for _, tok := range flood {
		wg.Go(func() {
			if _, err := v.Verify(t.Context(), tok); err == nil {
				t.Error("a made-up kid was accepted")
			}
		})
	}
	wg.Wait()
	if got := v.Fetches(); got != 3 || p.served.Load() != 3 {
		t.Fatalf("a flood of 200 unknown kids: %d fetches (%d served), want 1", got-2, p.served.Load()-2)
	}
	// The JWKS goes down: keys held still verify; an unknown kid is refused.
	p.down.Store(true)
	clock.Add(int64(time.Minute))
	if _, err := v.Verify(t.Context(), signAt("old")); err != nil {
		t.Fatalf("a cached key with the JWKS down: %v", err)
	}
	if _, err := v.Verify(t.Context(), signAt("other")); err == nil {
		t.Fatal("an unknown kid with the JWKS down was accepted")
	}
	if _, err := v.Verify(t.Context(), signAt("new")); err != nil {
		t.Fatalf("a cached key after a failed fetch: %v", err)
	}
}

// TestDiscoveryIssuerMustMatch: a discovery document naming another issuer
// gives no keys.
func TestDiscoveryIssuerMustMatch(t *testing.T) {
	t.Parallel()
	p := newIdP(t)
	p.addKey("k", jwt.SigningMethodRS256)
	v := newVerifier(t, p, jwtauth.Options{Discovery: true, Issuer: p.srv.URL + "/other/"})
	tok := p.sign("k", jwt.MapClaims{"iss": p.srv.URL + "/other/"})
	if _, err := v.Verify(t.Context(), tok); err == nil || p.served.Load() != 0 {
		t.Fatalf("verified through a document of another issuer: %v, served %d", err, p.served.Load())
	}
}

// TestOptions: the issuer, the audience and one source of keys are
// required; the user claim must be a name or a dotted path.
func TestOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []jwtauth.Options{
		{Audience: audience, JWKSURL: "https://x/keys"},
		{Issuer: issuer, JWKSURL: "https://x/keys"},
		{Issuer: issuer, Audience: audience},
		{Issuer: issuer, Audience: audience, JWKSURL: "https://x/keys", Discovery: true},
		{Issuer: issuer, Audience: audience, JWKSURL: "https://x/keys", UserClaim: "a..b"},
	} {
		if _, err := jwtauth.New(o); err == nil {
			t.Errorf("%+v: accepted", o)
		}
	}
}
