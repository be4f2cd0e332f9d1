package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jwtauth"
	"github.com/chatd/chatd/internal/store"
)

type ctxKey int

const userKey ctxKey = 0

// ActAsHeader names the user a request acts for: only a token with the
// act-as capability may send it (docs/operations.md#identity). With an
// identity provider configured it takes the user's subject there (the
// value of --jwt-user-claim, so the request is the same user as that user's
// own JWT); without one, a user name (as `chatd token create --user`).
const ActAsHeader = "X-Chatd-User"

// maxActAsLen bounds X-Chatd-User (an OpenID subject is at most 255 ASCII
// characters).
const maxActAsLen = 255

// authMethod says how a request proved who it is (the access log's auth).
type authMethod string

const (
	authToken  authMethod = "token"  // an API token
	authJWT    authMethod = "jwt"    // a JWT of the identity provider
	authTicket authMethod = "ticket" // a stream ticket
)

// user is the authenticated caller.
type user struct {
	ID   uuid.UUID
	Name string
	// TokenID is the token the request was authenticated with, directly
	// or through a stream ticket (uuid.Nil for a JWT or an old ticket).
	TokenID uuid.UUID
	Scopes  []client.Scope
	Via     authMethod
	// ActAs: the token may act for other users (X-Chatd-User).
	ActAs bool
	// ActorID is the token's own user when the request acts for ID.
	ActorID uuid.UUID
	// ValidUntil is when a JWT stops being accepted, used directly or
	// through a stream ticket (zero otherwise).
	ValidUntil time.Time
}

// has says whether the caller holds scope (write includes read).
func (u user) has(scope client.Scope) bool {
	return slices.Contains(u.Scopes, scope) || scope == client.ScopeRead && slices.Contains(u.Scopes, client.ScopeWrite)
}

// authError is a refused credential: a status, its WWW-Authenticate
// challenge (RFC 6750 §3) and the message.
type authError struct {
	status    int
	challenge string
	message   string
}

func (e *authError) Error() string { return e.message }

// unauthorized is a 401 whose challenge names the reason (never the token).
func unauthorized(code, reason string) *authError {
	ch := `Bearer realm="chatd"`
	if code != "" {
		ch += `, error="` + code + `", error_description="` + reason + `"`
	}
	return &authError{status: http.StatusUnauthorized, challenge: ch, message: reason}
}

var (
	errNoToken  = &authError{http.StatusUnauthorized, `Bearer realm="chatd"`, "Authorization: Bearer <token> is required."}
	errBadToken = unauthorized("invalid_token", "The token is not valid.")
)

// authorize authenticates the request and checks that the caller holds
// the route's scope: the one gate every route with a scope passes.
func (s *Server) authorize(scope client.Scope, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := s.identify(r)
		if err == nil && !u.has(scope) {
			err = &authError{status: http.StatusForbidden,
				challenge: `Bearer realm="chatd", error="insufficient_scope", scope="` + string(scope) + `"`,
				message:   fmt.Sprintf("This route needs the %s scope; the token has %s.", scope, scopeList(u.Scopes))}
		}
		if ae, ok := err.(*authError); ok {
			w.Header().Set("WWW-Authenticate", ae.challenge)
			err = errorf(ae.status, "%s", ae.message)
		}
		if err != nil {
			s.render(w, r, err)
			return
		}
		noteIdentity(r, u)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey, u)))
	})
}

func scopeList(scopes []client.Scope) string {
	if len(scopes) == 0 {
		return "none"
	}
	names := make([]string, len(scopes))
	for i, sc := range scopes {
		names[i] = string(sc)
	}
	return strings.Join(names, ", ")
}

// identify finds the caller: a stream ticket, a JWT of the identity
// provider or an API token, then the user it acts for (X-Chatd-User).
func (s *Server) identify(r *http.Request) (user, error) {
	if h, ok, err := s.ticketUser(r); ok {
		if err != nil {
			return user{}, err
		}
		return s.actFor(r, user{ID: h.UserID, TokenID: h.TokenID, Scopes: []client.Scope{client.ScopeRead}, Via: authTicket,
			ValidUntil: h.ValidUntil})
	}
	token, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return user{}, errNoToken
	}
	if s.jwt != nil && looksLikeJWT(token) {
		u, err := s.jwtUser(r, token)
		if err != nil {
			return user{}, err
		}
		return s.actFor(r, u)
	}
	row, err := s.store.Authenticate(r.Context(), token)
	if isNotFound(err) {
		return user{}, errBadToken
	}
	if err != nil {
		return user{}, err
	}
	return s.actFor(r, user{ID: row.ID, Name: row.Name, TokenID: row.TokenID, Scopes: row.Scopes, ActAs: row.ActAs, Via: authToken})
}

// actFor makes the request X-Chatd-User's when it names one: the same
// user in every respect (ownership, limits, streams), reached with the
// token's scopes less admin, and logged with the token's own user.
func (s *Server) actFor(r *http.Request, u user) (user, error) {
	names := r.Header.Values(ActAsHeader)
	if len(names) == 0 {
		return u, nil
	}
	if !u.ActAs {
		return user{}, &authError{status: http.StatusForbidden, challenge: `Bearer realm="chatd", error="insufficient_scope"`,
			message: ActAsHeader + " needs a token with the act-as capability (chatd token create --act-as, or act_as in POST /api/v1/tokens)."}
	}
	name := names[0]
	if len(names) > 1 || name == "" || len(name) > maxActAsLen || strings.ContainsFunc(name, unicode.IsControl) {
		return user{}, badField(ActAsHeader, "give one user: 1 to 255 bytes, no control characters")
	}
	var target store.User
	var err error
	if s.jwt != nil {
		target, err = s.store.UserBySubject(r.Context(), s.jwt.Issuer(), name)
	} else {
		target, err = s.store.UserByName(r.Context(), name)
	}
	if errors.Is(err, store.ErrInvalidUserName) {
		return user{}, badField(ActAsHeader, "is not a user name: 1-64 letters, digits, '_', '.', '@' or '-', starting with a letter or digit")
	}
	if err != nil {
		return user{}, err
	}
	scopes := slices.DeleteFunc(slices.Clone(u.Scopes), func(sc client.Scope) bool { return sc == client.ScopeAdmin })
	return user{ID: target.ID, Name: target.Name, TokenID: u.TokenID, Scopes: scopes, Via: u.Via, ActorID: u.ID,
		ValidUntil: u.ValidUntil}, nil
}

// looksLikeJWT: three dot-separated parts; an API token has none.
func looksLikeJWT(token string) bool {
	return !strings.HasPrefix(token, store.TokenPrefix) && strings.Count(token, ".") == 2
}

// jwtUser verifies a JWT of the identity provider and finds its user,
// (issuer, subject), created on first use. A refused token is a 401 whose
// challenge says why; the token itself is never logged or stored.
func (s *Server) jwtUser(r *http.Request, token string) (user, error) {
	id, err := s.jwt.Verify(r.Context(), token)
	var refused *jwtauth.Error
	if errors.As(err, &refused) {
		return user{}, unauthorized("invalid_token", "The JWT is not valid: "+refused.Reason+".")
	}
	if err != nil {
		return user{}, err
	}
	u, err := s.store.UserBySubject(r.Context(), s.jwt.Issuer(), id.Subject)
	if err != nil {
		return user{}, err
	}
	return user{ID: u.ID, Name: u.Name, Scopes: []client.Scope{client.ScopeRead, client.ScopeWrite}, Via: authJWT,
		ValidUntil: id.ValidUntil}, nil
}

// bearerToken reads "Bearer <token>"; the scheme is case-insensitive (RFC
// 7235 §2.1).
func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

func currentUser(r *http.Request) user { return r.Context().Value(userKey).(user) }

// tokenRecheck is how often the server asks whether the token of open
// streams is still valid: a revoked or expired token's streams end within this bound, the
// same as the token cache gives every other request.
const tokenRecheck = store.TokenCacheTTL

// tokenWatches share the re-check of a token among all the streams and
// watches opened with it on this server: one query per token every
// tokenRecheck, not one per stream (1,000 streams of one token asked 200
// times a second, in bursts, since streams open together).
type tokenWatches struct {
	s  *Server
	mu sync.Mutex
	m  map[uuid.UUID]*tokenWatch
}

type tokenWatch struct {
	id   uuid.UUID
	n    int           // streams watching; guarded by tokenWatches.mu
	gone chan struct{} // closed once the token was found revoked or expired
	stop chan struct{} // closed when the last stream left
}

// watchToken returns a channel closed when the stream's token stops
// working (nil when there is no token to check: an old ticket), and the
// function that stops watching.
func (s *Server) watchToken(u user) (<-chan struct{}, func()) {
	if !u.ValidUntil.IsZero() { // a JWT: its streams end when the server stops accepting it
		gone := make(chan struct{})
		t := time.AfterFunc(time.Until(u.ValidUntil), func() { close(gone) })
		return gone, func() { t.Stop() }
	}
	if u.TokenID == uuid.Nil {
		return nil, func() {}
	}
	tw := s.tokens
	tw.mu.Lock()
	defer tw.mu.Unlock()
	w := tw.m[u.TokenID]
	if w == nil {
		w = &tokenWatch{id: u.TokenID, gone: make(chan struct{}), stop: make(chan struct{})}
		tw.m[u.TokenID] = w
		go tw.run(w)
	}
	w.n++
	return w.gone, func() {
		tw.mu.Lock()
		defer tw.mu.Unlock()
		if w.n--; w.n == 0 {
			if tw.m[w.id] == w {
				delete(tw.m, w.id)
			}
			close(w.stop)
		}
	}
}

// run re-checks w's token every tokenRecheck until it is gone or nobody
// watches it. The query is not cancelled: the last stream leaving stops
// the loop after it.
func (tw *tokenWatches) run(w *tokenWatch) {
	t := time.NewTicker(tokenRecheck)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		if tw.s.tokenGone(context.Background(), w.id) {
			tw.mu.Lock()
			if tw.m[w.id] == w {
				delete(tw.m, w.id) // a stream opened from now on watches anew
			}
			tw.mu.Unlock()
			close(w.gone)
			return
		}
	}
}

// tokenGone says whether the stream's token was revoked or has expired (a
// database error is not an answer: the next check asks again).
func (s *Server) tokenGone(ctx context.Context, tokenID uuid.UUID) bool {
	s.signals.TokenChecked.Signal(struct{}{})
	live, err := s.store.TokenLive(ctx, tokenID)
	return err == nil && !live
}

// errTokenGone is the last event of a stream whose token stopped working.
var errTokenGone = client.StreamError{Message: "The token this stream was opened with was revoked or has expired."}
