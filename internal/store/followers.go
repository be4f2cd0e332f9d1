package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/dbgen"
)

// The follower registry's statements (table chat_followers), for
// notify.Hub: see internal/notify/registry.go for the protocol.

// FollowKey is what a process follows: one chat of Owner, or with Chat
// uuid.Nil every chat of Owner.
type FollowKey struct{ Owner, Chat uuid.UUID }

// FollowerRegister registers hub as a follower of k and returns once that
// is committed; it is not cancelled mid-flight (pgx would drop the
// connection).
func (s *Store) FollowerRegister(ctx context.Context, hub uuid.UUID, k FollowKey) error {
	return s.q.ChatFollowerRegister(context.WithoutCancel(ctx), s.pool,
		dbgen.ChatFollowerRegisterParams{OwnerID: k.Owner, ChatID: k.Chat, HubID: hub})
}

// FollowerRefresh keeps hub's rows of keys and returns those it still had:
// the others were swept.
func (s *Store) FollowerRefresh(ctx context.Context, hub uuid.UUID, keys []FollowKey) (map[FollowKey]bool, error) {
	p := dbgen.ChatFollowerRefreshManyParams{HubID: hub, OwnerIds: make([]uuid.UUID, len(keys)), ChatIds: make([]uuid.UUID, len(keys))}
	for i, k := range keys {
		p.OwnerIds[i], p.ChatIds[i] = k.Owner, k.Chat
	}
	rows, err := s.q.ChatFollowerRefreshMany(ctx, s.pool, p)
	if err != nil {
		return nil, err
	}
	kept := make(map[FollowKey]bool, len(rows))
	for _, r := range rows {
		kept[FollowKey{r.OwnerID, r.ChatID}] = true
	}
	return kept, nil
}

// FollowerSweep drops every process's rows not refreshed for ttl.
func (s *Store) FollowerSweep(ctx context.Context, ttl time.Duration) error {
	return s.q.ChatFollowerSweep(ctx, s.pool, ttl.Seconds())
}

// FollowerForget drops hub's rows (the process stops).
func (s *Store) FollowerForget(ctx context.Context, hub uuid.UUID) error {
	return s.q.ChatFollowerDeleteByHub(ctx, s.pool, hub)
}
