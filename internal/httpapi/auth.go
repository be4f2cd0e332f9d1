package httpapi

import (
	"context"
	"net/http"
	"strings"
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

// tokenRecheck is how often an open stream asks whether its token is still
// valid: a revoked or expired token's streams end within this bound, the
// same as the token cache gives every other request.
const tokenRecheck = store.TokenCacheTTL

// recheckToken returns a ticker for the stream's token re-check, or a nil
// channel when there is no token to check (an old ticket).
func recheckToken(u user) (<-chan time.Time, func()) {
	if u.TokenID == uuid.Nil {
		return nil, func() {}
	}
	t := time.NewTicker(tokenRecheck)
	return t.C, t.Stop
}

// tokenGone says whether the stream's token was revoked or has expired (a
// database error is not an answer: the next check asks again).
func (s *Server) tokenGone(ctx context.Context, u user) bool {
	live, err := s.store.TokenLive(ctx, u.TokenID)
	return err == nil && !live
}

// errTokenGone is the last event of a stream whose token stopped working.
var errTokenGone = client.StreamError{Message: "The token this stream was opened with was revoked or has expired."}
