package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/dbgen"
)

// TicketPrefix marks stream tickets, so they are not mistaken for tokens.
const TicketPrefix = "cst_"

// CreateStreamTicket issues a single-use ticket to follow one of the
// user's chats for ttl; ErrNotFound when the chat is not theirs. Only the
// ticket's digest is stored.
func (s *Store) CreateStreamTicket(ctx context.Context, userID, tokenID, chatID uuid.UUID, ttl time.Duration) (string, time.Time, error) {
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", time.Time{}, err
	}
	ticket := TicketPrefix + base64.RawURLEncoding.EncodeToString(secret[:])
	expires, err := s.q.StreamTicketInsertIfOwned(ctx, s.pool, dbgen.StreamTicketInsertIfOwnedParams{
		Digest: HashToken(ticket), TtlSeconds: ttl.Seconds(), ChatID: chatID, UserID: userID,
		TokenID: uuid.NullUUID{UUID: tokenID, Valid: tokenID != uuid.Nil}})
	return ticket, expires, mapError(err)
}

// RedeemStreamTicket uses a ticket up and returns its user, with the token
// that asked for it (uuid.Nil for a ticket issued before tickets recorded
// it), when it was issued for chatID and has not expired; ErrNotFound
// otherwise (also when it was already used, or its token was revoked).
func (s *Store) RedeemStreamTicket(ctx context.Context, ticket string, chatID uuid.UUID) (User, error) {
	row, err := s.q.StreamTicketRedeem(ctx, s.pool, HashToken(ticket))
	if err = mapError(err); err != nil {
		return User{}, err
	}
	if !row.Valid || row.ChatID != chatID {
		return User{}, ErrNotFound
	}
	return User{ID: row.UserID, TokenID: row.TokenID.UUID}, nil
}
