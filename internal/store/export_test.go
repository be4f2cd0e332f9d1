package store

import (
	"context"

	"github.com/google/uuid"
)

// WithPurpose is withPurpose, for the tests of package store_test.
var WithPurpose = withPurpose

// ReadStreamOneByOne is ReadStream without its one-round-trip read of
// changes.
func (s *Store) ReadStreamOneByOne(ctx context.Context, owner, chatID uuid.UUID, watermark int64) (StreamRead, error) {
	return s.readStream(ctx, owner, chatID, watermark, 0, false)
}

// ApplyOneByOne is Apply with each statement of the commit's plan in a
// round trip of its own.
func (s *Store) ApplyOneByOne(ctx context.Context, c Commit) (Committed, error) {
	return s.apply(ctx, c, oneByOne)
}
