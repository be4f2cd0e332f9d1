package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/dbgen"
)

// Expiry is what one batch of the retention sweep did.
type Expiry struct {
	// Found counts the chats the batch considered (at most its limit):
	// none when another replica holds the sweep's lock (sql.LockSweep).
	Found int
	// Deletion: the chats it deleted, with their descendants.
	Deletion
}

// ExpireChats deletes up to limit chats (with their descendants) whose
// last visible change is older than olderThan and that are at rest: idle
// (waiting or error), with no pending structured request, and so is every
// descendant, changed before olderThan too. A chat another transaction
// holds is skipped (it is busy), and a tree with a descendant not at rest
// is kept whole. Chats without children go first, in one statement
// (ChatExpireMany); chats with children, if the batch has room left, in a
// transaction that locks each tree. Only one replica sweeps at a time: the
// others find nothing.
func (s *Store) ExpireChats(ctx context.Context, olderThan time.Duration, limit int) (Expiry, error) {
	row, err := s.q.ChatExpireMany(withPurpose(ctx, "expire_chats"), s.pool,
		dbgen.ChatExpireManyParams{OlderThanSeconds: olderThan.Seconds(), MaxRows: int32(limit)})
	if err != nil {
		return Expiry{}, mapError(err)
	}
	e := Expiry{Found: len(row.Ids), Deletion: Deletion{Chats: row.Ids, Messages: row.Messages}}
	if !row.Locked || e.Found == limit {
		return e, nil
	}
	trees, err := s.expireTrees(ctx, olderThan, limit-e.Found)
	e.Found += trees.Found
	e.Chats = append(e.Chats, trees.Chats...)
	e.Messages += trees.Messages
	e.Queued += trees.Queued
	e.Requests += trees.Requests
	return e, err
}

// expireTrees is ExpireChats for chats with children.
func (s *Store) expireTrees(ctx context.Context, olderThan time.Duration, limit int) (Expiry, error) {
	var e Expiry
	var done []finished
	err := s.tx(ctx, "expire_trees", func(tx pgx.Tx) error {
		e, done = Expiry{}, nil
		secs := olderThan.Seconds()
		roots, err := s.q.ChatListExpiredLock(ctx, tx, dbgen.ChatListExpiredLockParams{OlderThanSeconds: secs, MaxRows: int32(limit)})
		if err != nil || len(roots) == 0 {
			return err
		}
		e.Found = len(roots)
		tree, err := s.lockTree(ctx, tx, roots)
		if err != nil {
			return err
		}
		busy, err := s.q.ChatListBusy(ctx, tx, dbgen.ChatListBusyParams{Ids: chatIDs(tree[len(roots):]), OlderThanSeconds: secs})
		if err != nil {
			return err
		}
		if tree = withoutTreesOf(tree, busy); len(tree) == 0 {
			return nil
		}
		return s.deleteTrees(ctx, tx, tree, DeletedExpired, &e.Deletion, &done)
	})
	if err == nil {
		s.finishedCommitted(done)
	}
	return e, err
}

// withoutTreesOf drops from tree (parents first) every tree that holds one
// of the busy chats.
func withoutTreesOf(tree []dbgen.Chat, busy []uuid.UUID) []dbgen.Chat {
	if len(busy) == 0 {
		return tree
	}
	root := make(map[uuid.UUID]uuid.UUID, len(tree))
	for _, c := range tree {
		root[c.ID] = c.ID
		if r, ok := root[c.ParentChatID.UUID]; c.ParentChatID.Valid && ok {
			root[c.ID] = r
		}
	}
	kept := map[uuid.UUID]bool{}
	for _, c := range tree {
		kept[root[c.ID]] = true
	}
	for _, id := range busy {
		kept[root[id]] = false
	}
	out := tree[:0:0]
	for _, c := range tree {
		if kept[root[c.ID]] {
			out = append(out, c)
		}
	}
	return out
}

// OldestChatAge is how long ago, on the database clock, the least recently
// changed chat last changed visibly (0 without chats).
func (s *Store) OldestChatAge(ctx context.Context) (time.Duration, error) {
	secs, err := s.q.ChatOldestAge(withPurpose(ctx, "oldest_chat"), s.pool)
	return time.Duration(secs * float64(time.Second)), mapError(err)
}

// SweepTombstones deletes up to limit chat tombstones older than ttl (with
// their requests' tombstones and webhook deliveries), keeping those a
// pending delivery still needs. Skipped: another replica sweeps.
func (s *Store) SweepTombstones(ctx context.Context, ttl time.Duration, limit int) (n int64, skipped bool, err error) {
	err = s.tx(ctx, "sweep_tombstones", func(tx pgx.Tx) error {
		locked, err := s.q.SweepTryLock(ctx, tx)
		if err != nil || !locked {
			skipped = !locked
			return err
		}
		n, err = s.q.TombstonesSweep(ctx, tx, dbgen.TombstonesSweepParams{TtlSeconds: ttl.Seconds(), MaxRows: int32(limit)})
		return err
	})
	return n, skipped, err
}
