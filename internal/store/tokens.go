package store

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/dbgen"
)

// TokenCacheTTL is how long a successful token lookup is reused without
// asking the database again. Every request carries a token, so without the
// cache each one cost a database round trip; with it a revoked or deleted
// token still works on this process for at most this long.
const TokenCacheTTL = 5 * time.Second

// tokenCache remembers successful lookups by token digest. Failures are
// never cached: a token created a moment ago works at once.
type tokenCache struct {
	mu sync.Mutex
	m  map[[32]byte]cachedToken
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

// Authenticate resolves a bearer token to its user, from the cache when it
// was looked up less than TokenCacheTTL ago.
func (s *Store) Authenticate(ctx context.Context, token string) (User, error) {
	var key [32]byte
	copy(key[:], HashToken(token))
	now := time.Now()
	if row, ok := s.tokens.get(key, now); ok {
		return row, nil
	}
	row, err := s.q.TokenAuthenticate(ctx, s.pool, key[:])
	if err != nil {
		return User{}, mapError(err)
	}
	u := User{ID: row.ID, Name: row.Name, TokenID: row.TokenID}
	s.tokens.put(key, u, now)
	return u, nil
}

// TokenLive says whether a token still exists and has not expired, asking
// the database (no cache): open streams ask every TokenCacheTTL.
func (s *Store) TokenLive(ctx context.Context, id uuid.UUID) (bool, error) {
	live, err := s.q.TokenIsLive(ctx, s.pool, id)
	return live, mapError(err)
}

// TokenInfo describes a token for `chatd token list` (never its secret).
type TokenInfo = dbgen.TokenListRow

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
// Processes that cached it stop accepting it within TokenCacheTTL, and its
// open streams end within that bound too.
func (s *Store) RevokeToken(ctx context.Context, id uuid.UUID) error {
	_, err := s.q.TokenDelete(ctx, s.pool, id)
	return mapError(err)
}
