package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbgen"
)

// Erasure is what erasing a user removed.
type Erasure struct {
	UserID uuid.UUID
	Name   string
	// Chats deleted (descendants included), and the rows that went with
	// them.
	Chats, Messages, QueuedMessages, Requests int64
	// Cancelled counts the requests that were pending: each got its
	// cancelled receipt (chat_deleted) before its chat went.
	Cancelled int64
	// Tokens, IdempotencyKeys, StreamTickets and Followers (the user's
	// rows in chat_followers) deleted.
	Tokens, IdempotencyKeys, StreamTickets, Followers int64
	// WebhookDeliveries deleted, of which Unsent were still pending.
	WebhookDeliveries, Unsent int64
	// Tombstones: the chat tombstones deleted, those of chats deleted
	// before the erasure included.
	Tombstones int64
}

// eraseBatch is how many of the user's top-level chats (each with its
// descendants) one transaction of an erasure deletes.
const eraseBatch = 100

// EraseUser deletes the named user and everything of theirs: their tokens
// and stream tickets first (nothing new starts once the token caches
// expire), then their chats in batches, each as DeleteChat does (pending
// requests cancelled with chat_deleted, told to long polls), and in a last
// transaction, which holds the user's row against new chats, keys and
// tokens, what is left: chats created meanwhile, idempotency keys, follower
// rows, the webhook deliveries owed for their deleted chats (sent or not),
// the tombstones and the user row. ErrNotFound: no such user.
func (s *Store) EraseUser(ctx context.Context, name string) (Erasure, error) {
	u, err := s.q.UserGetByName(ctx, s.pool, name)
	if err != nil {
		return Erasure{}, mapError(err)
	}
	e := Erasure{UserID: u.ID, Name: u.Name}
	err = s.tx(ctx, "erase_tokens", func(tx pgx.Tx) error {
		var err error
		if e.StreamTickets, err = s.q.UserStreamTicketsDelete(ctx, tx, u.ID); err != nil {
			return err
		}
		e.Tokens, err = s.q.UserTokensDelete(ctx, tx, u.ID) // their tickets would go with them, uncounted
		return err
	})
	if err != nil {
		return e, err
	}
	// This process stops at once; the others within TokenCacheTTL.
	s.tokens.dropUser(u.ID)
	s.users.dropUser(u.ID)
	for {
		var d Deletion
		var done []finished
		err := s.tx(ctx, "erase_chats", func(tx pgx.Tx) error {
			d, done = Deletion{}, nil
			_, err := s.eraseChats(ctx, tx, u.ID, &d, &done)
			return err
		})
		if err != nil {
			return e, err
		}
		s.finishedCommitted(done)
		e.add(d)
		if len(d.Chats) == 0 {
			break
		}
	}
	return e, s.eraseRest(ctx, u.ID, &e)
}

// eraseChats deletes a batch of the owner's top-level chats with their
// descendants; found counts the top-level ones.
func (s *Store) eraseChats(ctx context.Context, tx pgx.Tx, owner uuid.UUID, d *Deletion, done *[]finished) (found int, err error) {
	ids, err := s.q.ChatListRootsForOwner(ctx, tx, dbgen.ChatListRootsForOwnerParams{OwnerID: owner, MaxRows: eraseBatch})
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	roots, err := s.q.ChatLockManyForOwner(ctx, tx, dbgen.ChatLockManyForOwnerParams{Ids: ids, OwnerID: owner})
	if err != nil || len(roots) == 0 {
		return len(ids), err
	}
	tree, err := s.lockTree(ctx, tx, roots)
	if err != nil {
		return len(ids), err
	}
	return len(ids), s.deleteTrees(ctx, tx, tree, DeletedErased, d, done)
}

// eraseRest is an erasure's last transaction.
func (s *Store) eraseRest(ctx context.Context, owner uuid.UUID, e *Erasure) error {
	var d Deletion
	var done []finished
	var counts Erasure
	err := s.tx(ctx, "erase_user", func(tx pgx.Tx) error {
		d, done, counts = Deletion{}, nil, Erasure{}
		if _, err := s.q.UserLockByID(ctx, tx, owner); err != nil {
			return err
		}
		for {
			n, err := s.eraseChats(ctx, tx, owner, &d, &done)
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
		}
		return s.eraseRows(ctx, tx, owner, &counts)
	})
	if err != nil {
		return err
	}
	s.finishedCommitted(done)
	e.add(d)
	e.Tokens += counts.Tokens
	e.StreamTickets += counts.StreamTickets
	e.IdempotencyKeys, e.Followers, e.Tombstones = counts.IdempotencyKeys, counts.Followers, counts.Tombstones
	e.WebhookDeliveries, e.Unsent = counts.WebhookDeliveries, counts.Unsent
	return nil
}

// eraseRows deletes the user's rows other than chats, and the user.
func (s *Store) eraseRows(ctx context.Context, tx pgx.Tx, owner uuid.UUID, c *Erasure) error {
	deliveries, err := s.q.UserWebhookDeliveriesDelete(ctx, tx, owner)
	if err != nil {
		return err
	}
	for _, r := range deliveries {
		c.WebhookDeliveries += r.Deliveries
		if DeliveryState(r.State) == DeliveryPending {
			c.Unsent += r.Deliveries
		}
	}
	for _, step := range []struct {
		n   *int64
		del func(context.Context, dbgen.DBTX, uuid.UUID) (int64, error)
	}{
		{&c.IdempotencyKeys, s.q.UserIdempotencyKeysDelete},
		{&c.Followers, s.q.UserFollowersDelete},
		{&c.Tokens, s.q.UserTokensDelete},
		{&c.StreamTickets, s.q.UserStreamTicketsDelete},
		{&c.Tombstones, s.q.UserTombstonesDelete},
		{new(int64), s.q.UserDelete},
	} {
		if *step.n, err = step.del(ctx, tx, owner); err != nil {
			return err
		}
	}
	return nil
}

func (e *Erasure) add(d Deletion) {
	e.Chats += int64(len(d.Chats))
	e.Messages += d.Messages
	e.QueuedMessages += d.Queued
	e.Requests += d.Requests
	e.Cancelled += int64(len(d.Cancelled))
}

// Report is the erasure as the API and chatd user erase print it.
func (e Erasure) Report() client.ErasureReport {
	return client.ErasureReport{UserID: e.UserID, User: e.Name, Chats: e.Chats, Messages: e.Messages,
		QueuedMessages: e.QueuedMessages, StructuredRequests: e.Requests, CancelledRequests: e.Cancelled, Tokens: e.Tokens,
		IdempotencyKeys: e.IdempotencyKeys, StreamTickets: e.StreamTickets, Followers: e.Followers,
		WebhookDeliveries: e.WebhookDeliveries, UnsentWebhookDeliveries: e.Unsent, Tombstones: e.Tombstones}
}
