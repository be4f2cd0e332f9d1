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
func (s *Store) CreateStreamTicket(ctx context.Context, userID, chatID uuid.UUID, ttl time.Duration) (string, time.Time, error) {
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", time.Time{}, err
	}
	ticket := TicketPrefix + base64.RawURLEncoding.EncodeToString(secret[:])
	expires, err := s.q.StreamTicketInsertIfOwned(ctx, s.pool, dbgen.StreamTicketInsertIfOwnedParams{
		Digest: HashToken(ticket), TtlSeconds: ttl.Seconds(), ChatID: chatID, UserID: userID})
	return ticket, expires, mapError(err)
}

// RedeemStreamTicket uses a ticket up and returns its user when it was
// issued for chatID and has not expired; ErrNotFound otherwise (also when it
// was already used).
func (s *Store) RedeemStreamTicket(ctx context.Context, ticket string, chatID uuid.UUID) (uuid.UUID, error) {
	row, err := s.q.StreamTicketRedeem(ctx, s.pool, HashToken(ticket))
	if err = mapError(err); err != nil {
		return uuid.Nil, err
	}
	if !row.Valid || row.ChatID != chatID {
		return uuid.Nil, ErrNotFound
	}
	return row.UserID, nil
}
