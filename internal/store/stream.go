package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbgen"
	"github.com/chatd/chatd/internal/jsonb"
)

// StreamRead is what a live stream reads on a wake-up, all from one
// snapshot of the chat.
type StreamRead struct {
	Chat dbgen.Chat
	// Changed are client-visible rows whose revision is above the
	// watermark (deleted ones included), or, on a full read, every
	// non-deleted client-visible row with id > afterID.
	Changed []dbgen.ChatMessage
	Queue   []dbgen.ChatQueuedMessage
	Pending []jsonb.Part
	// Reset reports that Changed held a deleted row: the client must drop
	// its history; Changed is then the full history.
	Reset bool
}

// ReadStream reads the chat under FOR SHARE. With full set it returns the
// whole client-visible history after afterID; otherwise the rows changed
// after watermark (and the full history again if any of them was deleted).
// The caller advances its watermark to Chat.SnapshotVersion only after this
// succeeded.
func (s *Store) ReadStream(ctx context.Context, owner, chatID uuid.UUID, watermark, afterID int64, full bool) (StreamRead, error) {
	var out StreamRead
	err := s.tx(ctx, "stream_read", func(tx pgx.Tx) error {
		out = StreamRead{}
		var err error
		if out.Chat, err = s.q.ChatShareLockForOwner(ctx, tx, dbgen.ChatShareLockForOwnerParams{ID: chatID, OwnerID: owner}); err != nil {
			return err
		}
		if !full {
			if out.Chat.SnapshotVersion <= watermark {
				return nil
			}
			if out.Changed, err = s.q.MessageListChangedForStream(ctx, tx, dbgen.MessageListChangedForStreamParams{
				ChatID: chatID, AfterRevision: watermark}); err != nil {
				return err
			}
			for _, m := range out.Changed {
				if m.Deleted {
					out.Reset, full, afterID = true, true, 0
					break
				}
			}
		}
		if full {
			if out.Changed, err = s.q.MessageListForClient(ctx, tx, dbgen.MessageListForClientParams{
				ChatID: chatID, AfterID: afterID, MaxRows: 1 << 30}); err != nil {
				return err
			}
		}
		if out.Queue, err = s.q.QueueList(ctx, tx, chatID); err != nil {
			return err
		}
		if out.Chat.Status == client.StatusRequiresAction {
			out.Pending, err = s.pendingCalls(ctx, tx, chatID)
		}
		return err
	})
	return out, err
}
