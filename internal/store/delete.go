package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbgen"
	"github.com/chatd/chatd/internal/jsonb"
)

// DeleteReason says why a chat was deleted (chat_tombstones.reason).
type DeleteReason string

// Delete reasons.
const (
	// DeletedByOwner: its owner deleted it (or an operator, by hand).
	DeletedByOwner DeleteReason = "deleted"
	// DeletedExpired: the retention sweep expired it (--retain-chats).
	DeletedExpired DeleteReason = "expired"
	// DeletedErased: its user was erased.
	DeletedErased DeleteReason = "erased"
)

// cancelMessage is the error message of the receipt a pending request of
// a chat deleted for r gets (code chat_deleted).
func (r DeleteReason) cancelMessage() string {
	switch r {
	case DeletedExpired:
		return "the chat expired under the retention policy"
	case DeletedErased:
		return "the chat's user was erased"
	}
	return "the chat was deleted"
}

// ErrChatDeleted: the chat was deleted; its *DeletedError says when and why.
var ErrChatDeleted = errors.New("chat deleted")

// DeletedError is an ErrChatDeleted: the chat's tombstone.
type DeletedError struct {
	ChatID uuid.UUID
	Reason DeleteReason
	At     time.Time
}

func (e *DeletedError) Error() string {
	return fmt.Sprintf("chat %s was deleted (%s) at %s", e.ChatID, e.Reason, e.At.UTC().Format(time.RFC3339))
}
func (e *DeletedError) Unwrap() error { return ErrChatDeleted }

// Tombstone is what is left of a structured request whose chat was
// deleted: its outcome (in RequestState.Request: status, error code and
// message, times) and these.
type Tombstone struct {
	Reason    DeleteReason
	DeletedAt time.Time
	// Usage is the request's token sum, as its receipt held it.
	Usage json.RawMessage
}

// Deletion is what deleting chats removed.
type Deletion struct {
	// Chats are the chats deleted: each one asked for and its descendants.
	Chats []uuid.UUID
	// Cancelled are the requests that were pending, as the deletion
	// finished them (cancelled, chat_deleted), in the order it did.
	Cancelled []RequestState
	// Messages, Queued and Requests count the rows that went with the
	// chats (the receipts of Cancelled included).
	Messages, Queued, Requests int64
}

// DeleteChat deletes the owner's chat and its descendants in one
// transaction: it takes their row locks (a running turn's commit, on any
// replica, then finds no row and misses its fence), gives every pending
// structured request its cancelled receipt (chat_deleted: committed, with
// its webhook deliveries, in the same transaction, and told to this
// process's long polls), delivers an error result to the parent that
// awaits the chat, if any, and deletes the rows. Tombstones remain
// (sql/triggers/070_deletion.sql). A chat deleted before is a
// *DeletedError; one that never was the owner's, ErrNotFound.
func (s *Store) DeleteChat(ctx context.Context, owner, chatID uuid.UUID) (Deletion, error) {
	var d Deletion
	var done []finished
	err := s.tx(ctx, "delete_chat", func(tx pgx.Tx) error {
		d, done = Deletion{}, nil
		tree, err := s.lockForDelete(ctx, tx, owner, chatID)
		if err != nil {
			return err
		}
		return s.deleteTrees(ctx, tx, tree, DeletedByOwner, &d, &done)
	})
	if err == nil {
		s.finishedCommitted(done)
	}
	return d, err
}

// lockForDelete locks the chat's parent, if it has one (parents are locked
// before their children: a delete delivers to the parent that awaits the
// chat), then the chat and its descendants.
func (s *Store) lockForDelete(ctx context.Context, tx pgx.Tx, owner, chatID uuid.UUID) ([]dbgen.Chat, error) {
	c, err := s.q.ChatGetForOwner(ctx, tx, dbgen.ChatGetForOwnerParams{ID: chatID, OwnerID: owner})
	if err != nil {
		return nil, s.missing(ctx, tx, owner, chatID, err)
	}
	if c.ParentChatID.Valid {
		if _, err := s.q.ChatLockByID(ctx, tx, c.ParentChatID.UUID); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, err
		}
	}
	roots, err := s.q.ChatLockManyForOwner(ctx, tx, dbgen.ChatLockManyForOwnerParams{Ids: []uuid.UUID{chatID}, OwnerID: owner})
	if err != nil {
		return nil, err
	}
	if len(roots) == 0 { // deleted meanwhile (with its parent)
		return nil, s.missing(ctx, tx, owner, chatID, pgx.ErrNoRows)
	}
	return s.lockTree(ctx, tx, roots)
}

// missing turns the owner's chat not found into its *DeletedError when it
// has a tombstone.
func (s *Store) missing(ctx context.Context, tx pgx.Tx, owner, chatID uuid.UUID, err error) error {
	if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	t, terr := s.q.ChatTombstoneGetForOwner(ctx, tx, dbgen.ChatTombstoneGetForOwnerParams{ChatID: chatID, OwnerID: owner})
	if terr != nil {
		if errors.Is(terr, pgx.ErrNoRows) {
			return err
		}
		return terr
	}
	return &DeletedError{ChatID: t.ChatID, Reason: DeleteReason(t.Reason), At: t.DeletedAt}
}

// lockTree locks the descendants of the chats level holds, level by level,
// and returns them all, parents before children.
func (s *Store) lockTree(ctx context.Context, tx pgx.Tx, level []dbgen.Chat) ([]dbgen.Chat, error) {
	tree := level
	for len(level) > 0 {
		next, err := s.q.ChatLockChildren(ctx, tx, chatIDs(level))
		if err != nil {
			return nil, err
		}
		tree, level = append(tree, next...), next
	}
	return tree, nil
}

func chatIDs(chats []dbgen.Chat) []uuid.UUID {
	ids := make([]uuid.UUID, len(chats))
	for i, c := range chats {
		ids[i] = c.ID
	}
	return ids
}

// deleteTrees deletes locked chats, each with its descendants (tree holds
// them all, parents first): pending requests are cancelled first, an
// awaiting parent outside the trees gets its result, then the rows go.
func (s *Store) deleteTrees(ctx context.Context, tx pgx.Tx, tree []dbgen.Chat, reason DeleteReason, d *Deletion, done *[]finished) error {
	ids := chatIDs(tree)
	var counts dbgen.ChatContentCountsRow
	var pending []dbgen.StructuredRequest
	var pl pipeline
	pipeOne(&pl, func(db dbgen.DBTX) (dbgen.ChatContentCountsRow, error) { return s.q.ChatContentCounts(ctx, db, ids) },
		func(row dbgen.ChatContentCountsRow, err error) error {
			counts = row
			return err
		})
	pipeMany(&pl, func(db dbgen.DBTX) ([]dbgen.StructuredRequest, error) {
		return s.q.RequestListPendingInChats(ctx, db, ids)
	},
		func(rows []dbgen.StructuredRequest, err error) error {
			pending = rows
			return err
		})
	if err := pl.send(ctx, tx); err != nil {
		return err
	}
	first := len(*done)
	for _, r := range pending {
		o := Outcome{RequestID: r.RequestID, Status: client.OutputCancelled, Code: client.CodeChatDeleted, Message: reason.cancelMessage()}
		if _, _, err := s.finishRequest(ctx, tx, r.ChatID, o, done); err != nil {
			return err
		}
	}
	in := make(map[uuid.UUID]bool, len(tree))
	for _, c := range tree {
		in[c.ID] = true
	}
	var roots []uuid.UUID
	for _, c := range tree {
		if c.ParentChatID.Valid && in[c.ParentChatID.UUID] {
			continue // goes with its parent
		}
		roots = append(roots, c.ID)
		if c.SpawnState != nil && SpawnState(*c.SpawnState) == SpawnAwaited {
			if _, err := s.deliverWith(ctx, tx, c, s.deletedChildResult); err != nil {
				return err
			}
		}
	}
	// The tombstones first, for the chats and their finished requests; then
	// the rows, in one round trip.
	pl = pipeline{}
	pipeExec(&pl, func(db dbgen.DBTX) error {
		return s.q.TombstonesInsert(ctx, db, dbgen.TombstonesInsertParams{ChatIds: ids, Reason: string(reason)})
	}, func(err error) error { return err })
	pipeMany(&pl, func(db dbgen.DBTX) ([]uuid.UUID, error) { return s.q.ChatDeleteMany(ctx, db, roots) },
		func(_ []uuid.UUID, err error) error { return err })
	if err := pl.send(ctx, tx); err != nil {
		return err
	}
	d.Chats = append(d.Chats, ids...)
	for _, f := range (*done)[first:] {
		d.Cancelled = append(d.Cancelled, f.state)
	}
	d.Messages += counts.Messages
	d.Queued += counts.Queued
	d.Requests += counts.Requests
	return nil
}

// deletedChildResult is a deleted child's result, as the parent that
// awaited it reads it: a structured child's receipt (cancelled,
// chat_deleted, written just before), otherwise an error saying so.
func (s *Store) deletedChildResult(ctx context.Context, tx pgx.Tx, child dbgen.Chat) (jsonb.Part, error) {
	if _, err := s.q.RequestLatestOfChat(ctx, tx, child.ID); err == nil {
		return s.spawnResult(ctx, tx, child)
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return jsonb.Part{}, err
	}
	return jsonb.Part{Type: jsonb.PartToolResult, ToolCallID: ptrOr(child.SpawnToolCallID), ToolName: SpawnTool, IsError: true,
		Result: jsonText(fmt.Sprintf("The child chat %s was deleted before it answered.", child.ID))}, nil
}

// requestTombstone reads a deleted chat's request: its outcome and
// tombstone, and its owner.
func (s *Store) requestTombstone(ctx context.Context, db dbgen.DBTX, requestID uuid.UUID) (RequestState, uuid.UUID, error) {
	t, err := s.q.RequestTombstoneGet(ctx, db, requestID)
	if err != nil {
		return RequestState{}, uuid.Nil, err
	}
	finished := t.FinishedAt
	st := RequestState{
		Request: Request{RequestID: t.RequestID, ChatID: t.ChatID, Status: t.Status, ErrorCode: t.ErrorCode,
			ErrorMessage: t.ErrorMessage, CreatedAt: t.CreatedAt, UpdatedAt: t.FinishedAt, FinishedAt: &finished,
			TraceParent: ptrOr(t.TraceParent), Attempts: json.RawMessage(`[]`)},
		Deleted: &Tombstone{Reason: DeleteReason(t.Reason), DeletedAt: t.DeletedAt, Usage: t.Usage},
	}
	return st, t.OwnerID, nil
}
