package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/google/uuid"
)

type ctxKey int

const userKey ctxKey = 0

// user is the authenticated caller.
type user struct {
	ID   uuid.UUID
	Name string
}

func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, ok, err := s.ticketUser(r); ok {
			if err != nil {
				s.render(w, r, err)
				return
			}
			noteUser(r, id)
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey, user{ID: id})))
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
		ctx := context.WithValue(r.Context(), userKey, user{ID: row.ID, Name: row.Name})
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
