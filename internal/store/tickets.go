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

// TicketHolder is whom a stream ticket stands for: the user and the
// credential that asked for it, which the stream it opens outlives no more
// than a stream opened with the credential itself.
type TicketHolder struct {
	UserID uuid.UUID
	// TokenID is the API token that asked for the ticket (uuid.Nil for a
	// JWT, or a ticket issued before tickets recorded it).
	TokenID uuid.UUID
	// ValidUntil is when the JWT that asked for the ticket stops being
	// accepted (zero for a token).
	ValidUntil time.Time
}

// CreateStreamTicket issues a single-use ticket to follow one of the
// holder's chats for ttl, or until the holder's ValidUntil when that is
// sooner; ErrNotFound when the chat is not theirs. Only the ticket's digest
// is stored.
func (s *Store) CreateStreamTicket(ctx context.Context, h TicketHolder, chatID uuid.UUID, ttl time.Duration) (string, time.Time, error) {
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", time.Time{}, err
	}
	ticket := TicketPrefix + base64.RawURLEncoding.EncodeToString(secret[:])
	var validUntil *time.Time
	if !h.ValidUntil.IsZero() {
		validUntil = &h.ValidUntil
	}
	expires, err := s.q.StreamTicketInsertIfOwned(ctx, s.pool, dbgen.StreamTicketInsertIfOwnedParams{
		Digest: HashToken(ticket), TtlSeconds: ttl.Seconds(), ChatID: chatID, UserID: h.UserID,
		TokenID: uuid.NullUUID{UUID: h.TokenID, Valid: h.TokenID != uuid.Nil}, CredentialValidUntil: validUntil})
	return ticket, expires, mapError(err)
}

// RedeemStreamTicket uses a ticket up and returns whom it stands for, when
// it was issued for chatID and has not expired; ErrNotFound otherwise
// (also when it was already used, or its token was revoked).
func (s *Store) RedeemStreamTicket(ctx context.Context, ticket string, chatID uuid.UUID) (TicketHolder, error) {
	row, err := s.q.StreamTicketRedeem(ctx, s.pool, HashToken(ticket))
	if err = mapError(err); err != nil {
		return TicketHolder{}, err
	}
	if !row.Valid || row.ChatID != chatID {
		return TicketHolder{}, ErrNotFound
	}
	h := TicketHolder{UserID: row.UserID, TokenID: row.TokenID.UUID}
	if row.CredentialValidUntil != nil {
		h.ValidUntil = *row.CredentialValidUntil
	}
	return h, nil
}
