// Package jwtauth verifies the JWTs an application's identity provider
// issues to its users, against the provider's published keys (a JWKS, found
// through OpenID discovery or given directly), and names the user a valid
// one stands for. It knows no HTTP server and no database: internal/httpapi
// asks it, then maps (issuer, subject) to a chatd user.
//
// golang-jwt/jwt/v5 parses and checks the token (signature, exp, nbf, aud,
// iss, leeway, an allow-list of algorithms) and MicahParks/jwkset turns the
// JWKS's keys into Go keys; the fetching policy is this package's: a body
// of bounded size, keys kept while the endpoint is down, a refresh on a
// schedule and on an unknown key id at most once per interval, shared by
// the requests that wait for it.
package jwtauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Algorithms are the only signature algorithms accepted: asymmetric ones,
// so a key published to verify can never sign (never none, never HS*).
var Algorithms = []string{"RS256", "ES256", "EdDSA"}

// Defaults of Options.
const (
	DefaultLeeway          = 30 * time.Second
	DefaultRefreshInterval = time.Hour
	DefaultMinRefresh      = time.Minute
	DefaultUserClaim       = "sub"
	// MaxTokenBytes bounds a token: identity providers' are a few KiB.
	MaxTokenBytes = 8192
	// maxSubjectBytes bounds the user claim's value (OpenID's sub is at
	// most 255 ASCII characters).
	maxSubjectBytes = 255
	// maxDocumentBytes bounds a discovery document or a JWKS.
	maxDocumentBytes = 1 << 20
	fetchTimeout     = 10 * time.Second
)

// Options configure a Verifier. Issuer and Audience are required, and one
// of Discovery and JWKSURL.
type Options struct {
	// Issuer is the value the tokens' iss must equal, exactly.
	Issuer string
	// Discovery: the keys' URL is the jwks_uri of the issuer's OpenID
	// discovery document (Issuer + /.well-known/openid-configuration).
	Discovery bool
	// JWKSURL is the keys' URL, when not discovered.
	JWKSURL string
	// Audience is a value the tokens' aud must hold.
	Audience string
	// UserClaim is the claim naming the user: a name, or a dotted path
	// into nested objects (default "sub"). Its value must be a string.
	UserClaim string
	// Leeway allows for clock skew on exp and nbf (default 30 s).
	Leeway time.Duration
	// RefreshInterval is how often the keys are fetched again (default 1 h).
	RefreshInterval time.Duration
	// MinRefresh spaces the fetches an unknown key id causes (default 1
	// minute): a flood of made-up key ids fetches at most once per MinRefresh.
	MinRefresh time.Duration
	// HTTPClient fetches the documents (default: one with a 10 s timeout).
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Now is the clock tokens are checked against (tests move it).
	Now func() time.Time
}

// Verifier checks tokens; safe for concurrent use.
type Verifier struct {
	o         Options
	claimPath []string
	parser    *jwt.Parser

	mu       sync.Mutex
	keys     map[string]key // by kid; kept when a fetch fails
	jwksURL  string         // resolved (discovery) or given
	lastKID  time.Time      // the last fetch an unknown kid caused
	inflight chan struct{}  // closed when the fetch under way ends
	fetches  int            // fetches attempted, for tests
}

type key struct {
	alg string // the JWK's alg; "" when it names none
	pub any
}

// New checks o and returns a Verifier with no keys yet: Run fetches them.
func New(o Options) (*Verifier, error) {
	switch {
	case o.Issuer == "":
		return nil, errors.New("jwtauth: the issuer is required")
	case o.Audience == "":
		return nil, errors.New("jwtauth: the audience is required")
	case o.Discovery == (o.JWKSURL != ""):
		return nil, errors.New("jwtauth: give the issuer's discovery or a JWKS URL, one of them")
	}
	if o.UserClaim == "" {
		o.UserClaim = DefaultUserClaim
	}
	if o.Leeway == 0 {
		o.Leeway = DefaultLeeway
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = DefaultRefreshInterval
	}
	if o.MinRefresh <= 0 {
		o.MinRefresh = DefaultMinRefresh
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: fetchTimeout}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	path := strings.Split(o.UserClaim, ".")
	if slices.Contains(path, "") {
		return nil, fmt.Errorf("jwtauth: the user claim %q is not a claim name or a dotted path", o.UserClaim)
	}
	v := &Verifier{o: o, claimPath: path, keys: map[string]key{}, jwksURL: o.JWKSURL}
	v.parser = jwt.NewParser(jwt.WithValidMethods(Algorithms), jwt.WithIssuer(o.Issuer), jwt.WithAudience(o.Audience),
		jwt.WithLeeway(o.Leeway), jwt.WithExpirationRequired(), jwt.WithTimeFunc(o.Now))
	return v, nil
}

// Issuer is the issuer the tokens come from.
func (v *Verifier) Issuer() string { return v.o.Issuer }

// UserClaim is the claim that names the user.
func (v *Verifier) UserClaim() string { return v.o.UserClaim }

// Run fetches the keys now and then every RefreshInterval (every
// MinRefresh while fetches fail) until ctx ends. Requests are verified
// meanwhile with the keys last fetched.
func (v *Verifier) Run(ctx context.Context) {
	for {
		wait := v.o.RefreshInterval
		if err := v.refresh(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			v.o.Logger.WarnContext(ctx, "jwt: fetching the identity provider's keys failed; the keys fetched before still verify",
				slog.String("error", err.Error()))
			wait = v.o.MinRefresh
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Fetches counts the fetches of keys attempted (a discovery document
// fetched on the way counts with its JWKS).
func (v *Verifier) Fetches() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.fetches
}

// Identity is what a valid token says of its user.
type Identity struct {
	Subject string // the user claim's value
	// ValidUntil is when the token stops being accepted: its exp plus the
	// leeway (streams opened with it end then).
	ValidUntil time.Time
}

// Error is a refused token: Reason says why in words that never repeat
// the token (for WWW-Authenticate's error_description).
type Error struct{ Reason string }

func (e *Error) Error() string { return "jwt: " + e.Reason }

func refuse(reason string) error { return &Error{Reason: reason} }

// Verify checks token and returns who it stands for, or an *Error.
func (v *Verifier) Verify(ctx context.Context, token string) (Identity, error) {
	if len(token) > MaxTokenBytes {
		return Identity{}, refuse(fmt.Sprintf("the token is larger than %d bytes", MaxTokenBytes))
	}
	if alg, ok := headerAlg(token); !ok {
		return Identity{}, refuse("the token is malformed")
	} else if !slices.Contains(Algorithms, alg) {
		return Identity{}, refuse("the token's algorithm is not allowed (RS256, ES256 and EdDSA are)")
	}
	claims := jwt.MapClaims{}
	_, err := v.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) { return v.keyFor(ctx, t) })
	if err != nil {
		return Identity{}, reasonOf(err)
	}
	subject, err := v.subject(claims)
	if err != nil {
		return Identity{}, err
	}
	exp, _ := claims.GetExpirationTime() // required and checked by the parser
	return Identity{Subject: subject, ValidUntil: exp.Add(v.o.Leeway)}, nil
}

// headerAlg reads the alg of the token's header without trusting it.
func headerAlg(token string) (string, bool) {
	head, _, ok := strings.Cut(token, ".")
	if !ok {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return "", false
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(raw, &h) != nil {
		return "", false
	}
	return h.Alg, true
}

// reasonOf turns the parser's error into a reason (the keyfunc's own
// *Error when it refused).
func reasonOf(err error) error {
	var own *Error
	if errors.As(err, &own) {
		return own
	}
	reasons := []struct {
		err    error
		reason string
	}{
		{jwt.ErrTokenMalformed, "the token is malformed"},
		{jwt.ErrInvalidType, "a registered claim (exp, nbf, iat, aud or iss) has the wrong type"},
		{jwt.ErrTokenRequiredClaimMissing, "the token has no expiry (exp)"},
		{jwt.ErrTokenExpired, "the token has expired"},
		{jwt.ErrTokenNotValidYet, "the token is not valid yet (nbf)"},
		{jwt.ErrTokenUsedBeforeIssued, "the token was issued in the future (iat)"},
		{jwt.ErrTokenInvalidAudience, "the token is for another audience"},
		{jwt.ErrTokenInvalidIssuer, "the token is from another issuer"},
		{jwt.ErrTokenSignatureInvalid, "the token's signature is not valid"},
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return refuse(r.reason)
		}
	}
	return refuse("the token is not valid")
}

// subject reads the user claim: a non-empty string of at most 255 bytes.
func (v *Verifier) subject(claims jwt.MapClaims) (string, error) {
	var at any = map[string]any(claims)
	for _, name := range v.claimPath {
		obj, ok := at.(map[string]any)
		if !ok {
			return "", refuse("the claim " + v.o.UserClaim + " is missing")
		}
		if at, ok = obj[name]; !ok {
			return "", refuse("the claim " + v.o.UserClaim + " is missing")
		}
	}
	s, ok := at.(string)
	switch {
	case !ok:
		return "", refuse("the claim " + v.o.UserClaim + " is not a string")
	case s == "" || len(s) > maxSubjectBytes:
		return "", refuse(fmt.Sprintf("the claim %s must have 1 to %d bytes", v.o.UserClaim, maxSubjectBytes))
	}
	return s, nil
}
