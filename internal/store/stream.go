package store

import (
	"context"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbgen"
	"github.com/chatd/chatd/internal/jsonb"
)

// StreamRead is what a live stream reads on a wake-up, all from one
// snapshot of the chat.
type StreamRead struct {
	Chat Chat
	// Changed are client-visible rows whose revision is above the
	// watermark (deleted ones included), or, on a full read, every
	// non-deleted client-visible row with id > afterID.
	Changed []Message
	Queue   []QueuedMessage
	Pending []jsonb.Part
	// Reset reports that Changed held a deleted row: the client must drop
	// its history; Changed is then the full history.
	Reset bool
}

// ReadStream reads the chat in one read-only repeatable-read snapshot. The
// snapshot needs no lock: every change of a chat's rows bumps its
// snapshot_version under the chat's row lock, so the chat's committed
// changes are totally ordered and a snapshot holds exactly those up to the
// version it shows. With full set it returns the
// whole client-visible history after afterID; otherwise the rows changed
// after watermark (and the full history again if any of them was deleted).
// The caller advances its watermark to Chat.SnapshotVersion only after this
// succeeded.
func (s *Store) ReadStream(ctx context.Context, owner, chatID uuid.UUID, watermark, afterID int64, full bool) (StreamRead, error) {
	if !full {
		if out, ok, err := s.readChanges(ctx, owner, chatID, watermark); ok || err != nil {
			return out, err
		}
	}
	return s.readStream(ctx, owner, chatID, watermark, afterID, full)
}

// readStream is ReadStream one statement at a time: the full reads, and the
// changes readChanges declines.
func (s *Store) readStream(ctx context.Context, owner, chatID uuid.UUID, watermark, afterID int64, full bool) (StreamRead, error) {
	var out StreamRead
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := pgx.BeginTxFunc(withPurpose(ctx, "stream_read"), s.pool, opts, func(tx pgx.Tx) error {
		out = StreamRead{}
		c, err := s.q.ChatGetForOwner(ctx, tx, dbgen.ChatGetForOwnerParams{ID: chatID, OwnerID: owner})
		if err != nil {
			return err
		}
		out.Chat = chatFrom(c)
		var changed []dbgen.ChatMessage
		if !full {
			if out.Chat.SnapshotVersion <= watermark {
				return nil
			}
			if changed, err = s.q.MessageListChangedForStream(ctx, tx, dbgen.MessageListChangedForStreamParams{
				ChatID: chatID, AfterRevision: watermark}); err != nil {
				return err
			}
			for _, m := range changed {
				if m.Deleted {
					out.Reset, full, afterID = true, true, 0
					break
				}
			}
		}
		if full {
			if changed, err = s.q.MessageListForClient(ctx, tx, dbgen.MessageListForClientParams{
				ChatID: chatID, AfterID: afterID, MaxRows: 1 << 30}); err != nil {
				return err
			}
		}
		out.Changed = mapRows(changed, messageFrom)
		queue, err := s.q.QueueList(ctx, tx, chatID)
		if err != nil {
			return err
		}
		out.Queue = mapRows(queue, queuedFrom)
		if out.Chat.Status == client.StatusRequiresAction {
			out.Pending, err = s.pendingCalls(ctx, tx, chatID)
		}
		return err
	})
	return out, mapError(err)
}

// readChanges is ReadStream's usual case, a live stream's read after a
// change, in one round trip: the chat, the rows changed after watermark and
// the queue, from one snapshot. It declines (ok false) when ReadStream has
// more to read: a deleted row (the full history again) or pending tool
// calls.
func (s *Store) readChanges(ctx context.Context, owner, chatID uuid.UUID, watermark int64) (out StreamRead, ok bool, err error) {
	var (
		c       dbgen.Chat
		changed []dbgen.ChatMessage
		queue   []dbgen.ChatQueuedMessage
	)
	// BEGIN and COMMIT ride in the batch too: one round trip in all.
	var p pipeline
	p.b.Queue("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
	pipeOne(&p, func(db dbgen.DBTX) (dbgen.Chat, error) {
		return s.q.ChatGetForOwner(ctx, db, dbgen.ChatGetForOwnerParams{ID: chatID, OwnerID: owner})
	}, func(r dbgen.Chat, err error) error { c = r; return err })
	pipeMany(&p, func(db dbgen.DBTX) ([]dbgen.ChatMessage, error) {
		return s.q.MessageListChangedForStream(ctx, db, dbgen.MessageListChangedForStreamParams{ChatID: chatID, AfterRevision: watermark})
	}, func(r []dbgen.ChatMessage, err error) error { changed = r; return err })
	pipeMany(&p, func(db dbgen.DBTX) ([]dbgen.ChatQueuedMessage, error) {
		return s.q.QueueList(ctx, db, chatID)
	}, func(r []dbgen.ChatQueuedMessage, err error) error { queue = r; return err })
	p.b.Queue("COMMIT")
	// A failed callback (no such chat) stops reading results, not the
	// statements: PostgreSQL runs them all, COMMIT included.
	err = s.pool.SendBatch(withPurpose(ctx, "stream_read"), &p.b).Close()
	if err != nil {
		return StreamRead{}, false, mapError(err)
	}
	out.Chat = chatFrom(c)
	if out.Chat.SnapshotVersion <= watermark {
		return out, true, nil
	}
	if out.Chat.Status == client.StatusRequiresAction || slices.ContainsFunc(changed, func(m dbgen.ChatMessage) bool { return m.Deleted }) {
		return StreamRead{}, false, nil
	}
	out.Changed = mapRows(changed, messageFrom)
	out.Queue = mapRows(queue, queuedFrom)
	return out, true, nil
}
