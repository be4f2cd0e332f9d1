package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/store"
)

// maxTokenExpiresIn bounds expires_in (ten years, in seconds).
const maxTokenExpiresIn = 10 * 365 * 24 * 3600

// createToken is `chatd token create` over HTTP: the secret is in this
// answer only, its digest in the database.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) error {
	var body client.CreateTokenRequest
	if err := decodeBody(w, r, s.maxBody, &body); err != nil {
		return err
	}
	switch {
	case body.User == "":
		return badField("user", "is required: the name of the user the token is for")
	case body.ExpiresIn < 0 || body.ExpiresIn > maxTokenExpiresIn:
		return badField("expires_in", "must be 0 (never) to 315360000 seconds")
	}
	if _, err := store.NormalizeScopes(body.Scopes); err != nil {
		return badField("scopes", err.Error())
	}
	secret, info, err := s.store.CreateScopedToken(r.Context(), store.TokenSpec{User: body.User, Scopes: body.Scopes,
		ActAs: body.ActAs, ExpiresIn: time.Duration(body.ExpiresIn) * time.Second})
	if errors.Is(err, store.ErrInvalidUserName) {
		return badField("user", "use 1-64 letters, digits, '_', '.', '@' or '-', starting with a letter or digit (or an idp: name from GET /api/v1/users)")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, client.CreateTokenResponse{Secret: secret, Token: toToken(info)})
	return nil
}

// listTokens is `chatd token list`: every token, or one user's.
func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) error {
	rows, err := s.store.ListTokens(r.Context(), r.URL.Query().Get("user"))
	if err != nil {
		return err
	}
	out := client.ListTokensResponse{Tokens: make([]client.Token, 0, len(rows))}
	for _, t := range rows {
		out.Tokens = append(out.Tokens, toToken(t))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// revokeToken is `chatd token revoke`: every replica stops accepting the
// token, and ends its open streams, within store.TokenCacheTTL.
func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "token")
	if err != nil {
		return err
	}
	if err := s.store.RevokeToken(r.Context(), id); err != nil {
		if isNotFound(err) {
			return errorf(http.StatusNotFound, "No such token.")
		}
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listUsers pages through every user by name.
func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	// One row more than asked says whether another page exists.
	rows, err := s.store.ListUsers(r.Context(), r.URL.Query().Get("cursor"), limit+1)
	if err != nil {
		return err
	}
	out := client.ListUsersResponse{Users: make([]client.User, 0, min(len(rows), limit))}
	if len(rows) > limit {
		rows = rows[:limit]
		out.NextCursor = rows[limit-1].Name
	}
	for _, u := range rows {
		out.Users = append(out.Users, client.User{ID: u.ID, Name: u.Name, Issuer: u.Issuer, Subject: u.Subject, CreatedAt: u.CreatedAt})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func toToken(t store.TokenInfo) client.Token {
	scopes := make([]client.Scope, len(t.Scopes))
	for i, sc := range t.Scopes {
		scopes[i] = client.Scope(sc)
	}
	return client.Token{ID: t.ID, UserID: t.UserID, User: t.UserName, Scopes: scopes, ActAs: t.ActAs,
		CreatedAt: t.CreatedAt, LastUsedAt: t.LastUsedAt, ExpiresAt: t.ExpiresAt, Expired: t.Expired}
}
