package store

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbgen"
)

// TokenCacheTTL is how long a successful token lookup is reused without
// asking the database again. Every request carries a token, so without the
// cache each one cost a database round trip; with it a revoked or deleted
// token still works on this process for at most this long.
const TokenCacheTTL = 5 * time.Second

// tokenCache remembers successful lookups by token digest. Failures are
// never cached: a token created a moment ago works at once. The requests
// that miss a token while a lookup of it is under way wait for that one
// instead of asking the database too: with thousands of clients on one
// token, the entry's expiry otherwise sent thousands of lookups at once,
// which queued for the pool's connections behind each other.
type tokenCache struct {
	mu       sync.Mutex
	m        map[[32]byte]cachedToken
	inFlight map[[32]byte]*tokenLookup
}

// tokenLookup is a lookup under way; done is closed once user and err
// are set.
type tokenLookup struct {
	done chan struct{}
	user User
	err  error
}

type cachedToken struct {
	user    User
	expires time.Time
}

// maxCachedTokens bounds the cache; past it, expired entries go first and
// then everything (the next lookups refill it).
const maxCachedTokens = 10000

func (c *tokenCache) get(key [32]byte, now time.Time) (User, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !now.Before(e.expires) {
		return User{}, false
	}
	return e.user, true
}

func (c *tokenCache) put(key [32]byte, row User, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[32]byte]cachedToken{}
	}
	if len(c.m) >= maxCachedTokens {
		for k, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= maxCachedTokens {
			clear(c.m)
		}
	}
	c.m[key] = cachedToken{user: row, expires: now.Add(TokenCacheTTL)}
}

// drop forgets the token id's lookups (a revocation on this process).
func (c *tokenCache) drop(id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		if e.user.TokenID == id {
			delete(c.m, k)
		}
	}
}

// join returns the lookup of key under way, or starts one (first).
func (c *tokenCache) join(key [32]byte) (l *tokenLookup, first bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.inFlight[key]; ok {
		return l, false
	}
	if c.inFlight == nil {
		c.inFlight = map[[32]byte]*tokenLookup{}
	}
	l = &tokenLookup{done: make(chan struct{})}
	c.inFlight[key] = l
	return l, true
}

// finish ends a lookup started by join, caching what it found.
func (c *tokenCache) finish(key [32]byte, l *tokenLookup, now time.Time) {
	if l.err == nil {
		c.put(key, l.user, now)
	}
	c.mu.Lock()
	delete(c.inFlight, key)
	c.mu.Unlock()
	close(l.done)
}

// dropUser forgets the user's entries (an erasure on this process).
func (c *tokenCache) dropUser(id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		if e.user.ID == id {
			delete(c.m, k)
		}
	}
}

// Authenticate resolves a bearer token to its user, from the cache when it
// was looked up less than TokenCacheTTL ago, or from the lookup of it
// another request has under way.
func (s *Store) Authenticate(ctx context.Context, token string) (User, error) {
	var key [32]byte
	copy(key[:], HashToken(token))
	now := time.Now()
	if row, ok := s.tokens.get(key, now); ok {
		return row, nil
	}
	l, first := s.tokens.join(key)
	if first {
		// Not cancelled with this request: the others wait for it.
		row, err := s.q.TokenAuthenticate(context.WithoutCancel(ctx), s.pool, key[:])
		l.user, l.err = User{ID: row.ID, Name: row.Name, TokenID: row.TokenID, Scopes: scopesOf(row.Scopes), ActAs: row.ActAs}, mapError(err)
		s.tokens.finish(key, l, now)
	}
	select {
	case <-l.done:
		if l.err != nil {
			return User{}, l.err
		}
		return l.user, nil
	case <-ctx.Done():
		return User{}, ctx.Err()
	}
}

// TokenLive says whether a token still exists and has not expired, asking
// the database (no cache): open streams ask every TokenCacheTTL.
func (s *Store) TokenLive(ctx context.Context, id uuid.UUID) (bool, error) {
	live, err := s.q.TokenIsLive(ctx, s.pool, id)
	return live, mapError(err)
}

// TokenInfo describes a token for `chatd token list` and the token API
// (never its secret).
type TokenInfo = dbgen.TokenListRow

// UserInfo describes a user for the user API.
type UserInfo = dbgen.User

func scopesOf(names []string) []client.Scope {
	out := make([]client.Scope, len(names))
	for i, n := range names {
		out[i] = client.Scope(n)
	}
	return out
}

// NormalizeScopes checks a token's scopes and puts them in their canonical
// form: none means read and write (what a token could always do), write
// brings read, duplicates go, and the order is client.Scopes'.
func NormalizeScopes(scopes []client.Scope) ([]client.Scope, error) {
	if len(scopes) == 0 {
		return []client.Scope{client.ScopeRead, client.ScopeWrite}, nil
	}
	want := map[client.Scope]bool{}
	for _, sc := range scopes {
		if !slices.Contains(client.Scopes(), sc) {
			return nil, fmt.Errorf("%w %q (use read, write or admin)", ErrInvalidScope, sc)
		}
		want[sc] = true
	}
	if want[client.ScopeWrite] {
		want[client.ScopeRead] = true
	}
	var out []client.Scope
	for _, sc := range client.Scopes() {
		if want[sc] {
			out = append(out, sc)
		}
	}
	return out, nil
}

// ListUsers returns up to limit users by name, after the name after ("":
// from the first).
func (s *Store) ListUsers(ctx context.Context, after string, limit int) ([]UserInfo, error) {
	var cursor *string
	if after != "" {
		cursor = &after
	}
	rows, err := s.q.UserList(ctx, s.pool, dbgen.UserListParams{After: cursor, MaxRows: int32(limit)})
	return rows, mapError(err)
}

// SubjectUserName is the name of an identity provider's user: "idp:" and
// 26 base32 letters of a digest of (issuer, subject), a form that a given
// name cannot take (users_name_check).
func SubjectUserName(issuer, subject string) string {
	sum := sha256.Sum256([]byte(issuer + "\x00" + subject))
	return "idp:" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}

// UserBySubject is the user an identity provider's (issuer, subject)
// stands for, created on first use. Lookups are cached for TokenCacheTTL,
// as tokens are.
func (s *Store) UserBySubject(ctx context.Context, issuer, subject string) (User, error) {
	return s.cachedUser(ctx, "subject\x00"+issuer+"\x00"+subject, func() (dbgen.User, error) {
		return s.q.UserUpsertBySubject(ctx, s.pool, dbgen.UserUpsertBySubjectParams{
			Name: SubjectUserName(issuer, subject), Issuer: &issuer, Subject: &subject})
	})
}

// UserByName is the user of that name, created on first use (as by
// CreateToken); ErrInvalidUserName for a name outside the pattern.
func (s *Store) UserByName(ctx context.Context, name string) (User, error) {
	u, err := s.cachedUser(ctx, "name\x00"+name, func() (dbgen.User, error) {
		return s.q.UserUpsertByName(ctx, s.pool, name)
	})
	if IsConstraint(err, UsersNameCheck) {
		return User{}, fmt.Errorf("%w %q", ErrInvalidUserName, name)
	}
	return u, err
}

func (s *Store) cachedUser(ctx context.Context, key string, upsert func() (dbgen.User, error)) (User, error) {
	digest := sha256.Sum256([]byte(key))
	now := time.Now()
	if u, ok := s.users.get(digest, now); ok {
		return u, nil
	}
	row, err := upsert()
	if err != nil {
		return User{}, mapError(err)
	}
	u := User{ID: row.ID, Name: row.Name}
	s.users.put(digest, u, now)
	return u, nil
}

// ListTokens lists every token, or userName's (when not empty).
func (s *Store) ListTokens(ctx context.Context, userName string) ([]TokenInfo, error) {
	var name *string
	if userName != "" {
		name = &userName
	}
	rows, err := s.q.TokenList(ctx, s.pool, name)
	return rows, mapError(err)
}

// RevokeToken deletes a token; ErrNotFound when there is none with id.
// This process stops accepting it at once; others that cached it within
// TokenCacheTTL, and its open streams end within that bound too.
func (s *Store) RevokeToken(ctx context.Context, id uuid.UUID) error {
	_, err := s.q.TokenDelete(ctx, s.pool, id)
	if err == nil {
		s.tokens.drop(id)
	}
	return mapError(err)
}
