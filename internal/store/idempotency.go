package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/dbgen"
)

// ErrKeyTaken: another request with the same idempotency key committed
// first (or is committing); read its answer with IdempotentAnswer.
var ErrKeyTaken = errors.New("idempotency key taken")

// Idempotency names a request by an Idempotency-Key: the key the client
// chose and a digest of the request (method, path, body).
type Idempotency struct {
	Key         string
	Fingerprint []byte // SHA-256
}

// Answer is what a request with a key was answered.
type Answer struct {
	Fingerprint []byte
	Status      int
	Body        []byte
}

// IdempotentAnswer returns the live answer stored under the user's key, or
// ErrNotFound.
func (s *Store) IdempotentAnswer(ctx context.Context, owner uuid.UUID, key string) (Answer, error) {
	row, err := s.q.IdempotencyKeyGet(ctx, s.pool, dbgen.IdempotencyKeyGetParams{UserID: owner, Key: key})
	if err != nil {
		return Answer{}, mapError(err)
	}
	return Answer{Fingerprint: row.Fingerprint, Status: int(row.Status), Body: row.Response}, nil
}

// saveAnswer records the answer of the work done in tx on chat under the
// key. If a live answer is there already the work must not commit:
// ErrKeyTaken.
func (s *Store) saveAnswer(ctx context.Context, tx pgx.Tx, owner, chat uuid.UUID, key *Idempotency, answer func() (int, []byte, error)) error {
	status, body, err := answer()
	if err != nil {
		return fmt.Errorf("render the answer to keep: %w", err)
	}
	n, err := s.q.IdempotencyKeyInsertIfFree(ctx, tx, dbgen.IdempotencyKeyInsertIfFreeParams{
		UserID: owner, Key: key.Key, Fingerprint: key.Fingerprint, Status: int32(status), Response: body,
		ChatID: uuid.NullUUID{UUID: chat, Valid: true}})
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrKeyTaken
	}
	return nil
}

// DeleteExpiredKeys removes up to max idempotency keys older than 24 hours.
func (s *Store) DeleteExpiredKeys(ctx context.Context, max int32) (int64, error) {
	n, err := s.q.IdempotencyKeysDeleteExpired(ctx, s.pool, max)
	return n, mapError(err)
}
