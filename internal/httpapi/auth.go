package httpapi

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/store"
)

type ctxKey int

const userKey ctxKey = 0

// user is the authenticated caller.
type user struct {
	ID   uuid.UUID
	Name string
	// TokenID is the token the request was authenticated with, directly
	// or through a stream ticket (uuid.Nil for an old ticket).
	TokenID uuid.UUID
}

func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, ok, err := s.ticketUser(r); ok {
			if err != nil {
				s.render(w, r, err)
				return
			}
			noteUser(r, u.ID)
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey, user{ID: u.ID, TokenID: u.TokenID})))
			return
		}
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="chatd"`)
			s.render(w, r, errorf(http.StatusUnauthorized, "Authorization: Bearer <token> is required."))
			return
		}
		row, err := s.store.Authenticate(r.Context(), token)
		if err != nil {
			if isNotFound(err) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="chatd", error="invalid_token"`)
				s.render(w, r, errorf(http.StatusUnauthorized, "The token is not valid."))
				return
			}
			s.render(w, r, err)
			return
		}
		ctx := context.WithValue(r.Context(), userKey, user{ID: row.ID, Name: row.Name, TokenID: row.TokenID})
		noteUser(r, row.ID)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
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
		if tw.s.tokenGone(context.Background(), user{TokenID: w.id}) {
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
func (s *Server) tokenGone(ctx context.Context, u user) bool {
	s.signals.TokenChecked.Signal(struct{}{})
	live, err := s.store.TokenLive(ctx, u.TokenID)
	return err == nil && !live
}

// errTokenGone is the last event of a stream whose token stopped working.
var errTokenGone = client.StreamError{Message: "The token this stream was opened with was revoked or has expired."}
