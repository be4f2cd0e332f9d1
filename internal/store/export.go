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
)

// FindUser returns the named user, never creating one (ErrNotFound: none).
func (s *Store) FindUser(ctx context.Context, name string) (User, error) {
	u, err := s.q.UserGetByName(ctx, s.pool, name)
	return User{ID: u.ID, Name: u.Name}, mapError(err)
}

// ChatExport is a chat as an export carries it: the chat and every row of
// its own (deleted messages included).
type ChatExport struct {
	Chat     Chat
	Requests []Request
	Messages []Message
	Queued   []QueuedMessage
}

// readOnly runs fn in a read-only REPEATABLE READ transaction: one
// consistent snapshot.
func (s *Store) readOnly(ctx context.Context, purpose string, fn func(pgx.Tx) error) error {
	return mapError(pgx.BeginTxFunc(withPurpose(ctx, purpose), s.pool,
		pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn))
}

// ExportPage reads, in one snapshot, up to limit of the owner's top-level
// chats after after in id order, each followed by its descendants, parents
// first. An empty page: there are no more.
func (s *Store) ExportPage(ctx context.Context, owner, after uuid.UUID, limit int) ([]ChatExport, error) {
	var out []ChatExport
	err := s.readOnly(ctx, "export", func(tx pgx.Tx) error {
		roots, err := s.q.ChatListRootsAfter(ctx, tx, dbgen.ChatListRootsAfterParams{OwnerID: owner, AfterID: after, MaxRows: int32(limit)})
		if err != nil {
			return err
		}
		out, err = s.readTrees(ctx, tx, roots)
		return err
	})
	return out, err
}

// ExportChat reads the owner's chat and its descendants, parents first, in
// one snapshot. A deleted chat is a *DeletedError.
func (s *Store) ExportChat(ctx context.Context, owner, chatID uuid.UUID) ([]ChatExport, error) {
	var out []ChatExport
	err := s.readOnly(ctx, "export", func(tx pgx.Tx) error {
		c, err := s.q.ChatGetForOwner(ctx, tx, dbgen.ChatGetForOwnerParams{ID: chatID, OwnerID: owner})
		if err != nil {
			return s.missing(ctx, tx, owner, chatID, err)
		}
		out, err = s.readTrees(ctx, tx, []dbgen.Chat{c})
		return err
	})
	return out, err
}

// readTrees reads the chats, their descendants and their rows: each chat
// followed by its children's trees, in id order.
func (s *Store) readTrees(ctx context.Context, tx pgx.Tx, roots []dbgen.Chat) ([]ChatExport, error) {
	kids := map[uuid.UUID][]dbgen.Chat{}
	for level := roots; len(level) > 0; {
		next, err := s.q.ChatListChildren(ctx, tx, chatIDs(level))
		if err != nil {
			return nil, err
		}
		for _, c := range next {
			kids[c.ParentChatID.UUID] = append(kids[c.ParentChatID.UUID], c)
		}
		level = next
	}
	var chats []dbgen.Chat
	var walk func(c dbgen.Chat)
	walk = func(c dbgen.Chat) {
		chats = append(chats, c)
		for _, k := range kids[c.ID] {
			walk(k)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	out := make([]ChatExport, len(chats))
	at := make(map[uuid.UUID]*ChatExport, len(chats))
	for i, c := range chats {
		out[i].Chat = chatFrom(c)
		at[c.ID] = &out[i]
	}
	ids := chatIDs(chats)
	var pl pipeline
	pipeMany(&pl, func(db dbgen.DBTX) ([]dbgen.StructuredRequest, error) { return s.q.RequestListForChats(ctx, db, ids) },
		func(rows []dbgen.StructuredRequest, err error) error {
			for _, r := range rows {
				at[r.ChatID].Requests = append(at[r.ChatID].Requests, requestFrom(r))
			}
			return err
		})
	pipeMany(&pl, func(db dbgen.DBTX) ([]dbgen.ChatMessage, error) { return s.q.MessageListForChats(ctx, db, ids) },
		func(rows []dbgen.ChatMessage, err error) error {
			for _, m := range rows {
				at[m.ChatID].Messages = append(at[m.ChatID].Messages, messageFrom(m))
			}
			return err
		})
	pipeMany(&pl, func(db dbgen.DBTX) ([]dbgen.ChatQueuedMessage, error) { return s.q.QueueListForChats(ctx, db, ids) },
		func(rows []dbgen.ChatQueuedMessage, err error) error {
			for _, q := range rows {
				at[q.ChatID].Queued = append(at[q.ChatID].Queued, queuedFrom(q))
			}
			return err
		})
	return out, pl.send(ctx, tx)
}

// Imported counts what an import wrote.
type Imported struct {
	Chats, Messages, Requests int
	// Cancelled counts the requests the export had pending (running or
	// queued): each got a cancelled receipt (interrupted).
	Cancelled int
}

// ErrImport: the export cannot be imported as it is; the message says why.
var ErrImport = errors.New("cannot import")

// Import writes chats of an export for the named user (created if needed)
// in one transaction: each chat after its parent, with its own ids, times
// and rows. A chat comes back at rest: running or waiting for tools in the
// export, it is waiting; its pending requests get a cancelled receipt
// (interrupted); its queued messages are left out. Finished requests keep
// their outcome and finish time, and are owed to no webhook subscribed
// after it. Message ids are new (in the same order): a spawned child names
// its parent's step by the new id. A chat id in use, or of a chat deleted
// here, fails the import.
func (s *Store) Import(ctx context.Context, userName string, chats []ChatExport) (Imported, error) {
	var res Imported
	var done []finished
	err := s.tx(ctx, "import", func(tx pgx.Tx) error {
		res, done = Imported{}, nil
		if err := s.q.ImportBegin(ctx, tx); err != nil {
			return err
		}
		u, err := s.q.UserUpsertByName(ctx, tx, userName)
		if err != nil {
			return err
		}
		return s.importChats(ctx, tx, u.ID, chats, &res, &done)
	})
	if IsConstraint(err, UsersNameCheck) {
		return res, fmt.Errorf("%w %q", ErrInvalidUserName, userName)
	}
	if err == nil {
		s.finishedCommitted(done)
	}
	return res, err
}

// importChats writes the chats of an import: a batch of statements per run
// of chats (one round trip), each chat's statements in order — the chat,
// its requests (pending), its messages, the finishes of those the export
// had finished — and a new batch before a spawned child, which names its
// parent's step by the id the batch before assigned it. The requests the
// export had pending are cancelled last.
func (s *Store) importChats(ctx context.Context, tx pgx.Tx, owner uuid.UUID, chats []ChatExport, res *Imported, done *[]finished) error {
	ids := map[int64]int64{} // exported message id -> imported
	var pl pipeline
	var pending []Request
	for i := range chats {
		c := &chats[i]
		if c.Chat.SpawnMessageID != nil {
			if err := pl.send(ctx, tx); err != nil {
				return err
			}
			pl = pipeline{}
		}
		p, err := importParams(owner, c.Chat, ids)
		if err != nil {
			return fmt.Errorf("chat %s: %w", c.Chat.ID, err)
		}
		if err := s.queueImport(ctx, &pl, p, c, ids); err != nil {
			return err
		}
		res.Chats++
		res.Messages += len(c.Messages)
		res.Requests += len(c.Requests)
		for _, r := range c.Requests {
			if r.Status == client.OutputPending {
				pending = append(pending, r)
			}
		}
	}
	if err := pl.send(ctx, tx); err != nil {
		return err
	}
	for _, r := range pending {
		o := Outcome{RequestID: r.RequestID, Status: client.OutputCancelled, Code: client.CodeInterrupted,
			Message: "the chat was exported while this request was pending"}
		if _, _, err := s.finishRequest(ctx, tx, r.ChatID, o, done); err != nil {
			return err
		}
		res.Cancelled++
	}
	return nil
}

// queueImport queues one chat's statements; their results fill ids and
// check that every finished request found its receipt.
func (s *Store) queueImport(ctx context.Context, pl *pipeline, p dbgen.ChatImportParams, c *ChatExport, ids map[int64]int64) error {
	chat := c.Chat.ID
	fail := func(err error) error {
		if err != nil {
			return fmt.Errorf("chat %s: %w", chat, err)
		}
		return nil
	}
	reqs, finishes, want := importRequests(c.Requests)
	rows, err := importMessages(c.Messages)
	if err != nil {
		return fail(err)
	}
	pipeOne(pl, func(db dbgen.DBTX) (uuid.UUID, error) { return s.q.ChatImport(ctx, db, p) },
		func(_ uuid.UUID, err error) error { return fail(err) })
	pipeExec(pl, func(db dbgen.DBTX) error {
		return s.q.RequestImportMany(ctx, db, dbgen.RequestImportManyParams{ChatID: chat, Rows: reqs})
	}, fail)
	msgs := c.Messages
	pipeMany(pl, func(db dbgen.DBTX) ([]int64, error) {
		return s.q.MessageImportMany(ctx, db, dbgen.MessageImportManyParams{ChatID: chat, Rows: rows})
	}, func(got []int64, err error) error {
		for i := range got {
			ids[msgs[i].ID] = got[i]
		}
		return fail(err)
	})
	pipeMany(pl, func(db dbgen.DBTX) ([]uuid.UUID, error) {
		return s.q.RequestImportFinishMany(ctx, db, dbgen.RequestImportFinishManyParams{ChatID: chat, Rows: finishes})
	}, func(got []uuid.UUID, err error) error {
		if err == nil && len(got) != want {
			err = fmt.Errorf("%w: %d of its %d finished requests have their receipt", ErrImport, len(got), want)
		}
		return fail(err)
	})
	return nil
}

// importParams is an exported chat as it is inserted: at rest, a spawned
// child no longer awaited, its spawning step named by its imported id.
func importParams(owner uuid.UUID, c Chat, ids map[int64]int64) (dbgen.ChatImportParams, error) {
	p := dbgen.ChatImportParams{ID: c.ID, OwnerID: owner, ParentChatID: c.ParentChatID, Title: c.Title, Model: c.Model,
		SystemPrompt: c.SystemPrompt, Mode: c.Mode, DynamicTools: c.DynamicTools, McpServers: c.MCPServers,
		SpawnAgents: c.SpawnAgents, SpawnDepth: c.SpawnDepth, SpawnToolCallID: c.SpawnToolCallID,
		Status: client.StatusWaiting, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
	if p.McpServers == nil {
		p.McpServers = []string{}
	}
	if len(p.DynamicTools) == 0 {
		p.DynamicTools = json.RawMessage("[]")
	}
	if c.Status == client.StatusError {
		p.Status, p.LastError = c.Status, c.LastError
	}
	if c.SpawnMessageID != nil {
		id, ok := ids[*c.SpawnMessageID]
		if !ok {
			return p, fmt.Errorf("%w: its spawning message %d is not in the export before it", ErrImport, *c.SpawnMessageID)
		}
		state := string(c.SpawnState)
		if c.SpawnState == SpawnAwaited {
			state = string(SpawnDetached) // its parent's turn is over
		}
		p.SpawnMessageID, p.SpawnState = &id, &state
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = time.Now()
	}
	if p.UpdatedAt.IsZero() {
		p.UpdatedAt = p.CreatedAt
	}
	return p, nil
}

// importRequests are RequestImportMany's rows and RequestImportFinishMany's,
// and how many of them are finished.
func importRequests(reqs []Request) (json.RawMessage, json.RawMessage, int) {
	type request struct {
		RequestID   uuid.UUID       `json:"request_id"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		TraceParent string          `json:"trace_parent,omitempty"`
		CreatedAt   time.Time       `json:"created_at"`
	}
	type finish struct {
		RequestID            uuid.UUID            `json:"request_id"`
		Status               client.RequestStatus `json:"status"`
		ErrorCode            *client.ErrorCode    `json:"error_code"`
		ErrorMessage         *string              `json:"error_message"`
		Rejections           int32                `json:"rejections"`
		ValidationRejections int32                `json:"validation_rejections"`
		Steps                int32                `json:"steps"`
		Attempts             json.RawMessage      `json:"attempts,omitempty"`
		FinishedAt           *time.Time           `json:"finished_at"`
	}
	rows, fins := []request{}, []finish{}
	for _, r := range reqs {
		rows = append(rows, request{RequestID: r.RequestID, Name: r.Name, Description: r.Description, Schema: r.Schema,
			TraceParent: r.TraceParent, CreatedAt: r.CreatedAt})
		if r.Status != client.OutputPending {
			fins = append(fins, finish{RequestID: r.RequestID, Status: r.Status, ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage,
				Rejections: r.Rejections, ValidationRejections: r.ValidationRejections, Steps: r.Steps, Attempts: r.Attempts,
				FinishedAt: r.FinishedAt})
		}
	}
	a, _ := json.Marshal(rows) // plain values: cannot fail
	b, _ := json.Marshal(fins)
	return a, b, len(fins)
}

// importMessages are MessageImportMany's rows.
func importMessages(msgs []Message) (json.RawMessage, error) {
	type message struct {
		Role                client.Role     `json:"role"`
		Kind                MessageKind     `json:"kind"`
		Visibility          Visibility      `json:"visibility"`
		Content             json.RawMessage `json:"content"`
		StructuredRequestID *uuid.UUID      `json:"structured_request_id,omitempty"`
		FinishReason        *string         `json:"finish_reason,omitempty"`
		Usage               json.RawMessage `json:"usage,omitempty"`
		Compressed          bool            `json:"compressed"`
		Deleted             bool            `json:"deleted"`
		CreatedAt           time.Time       `json:"created_at"`
	}
	rows := make([]message, len(msgs))
	for i, m := range msgs {
		rows[i] = message{Role: m.Role, Kind: m.Kind, Visibility: m.Visibility, Content: m.Content, FinishReason: m.FinishReason,
			Usage: m.Usage, Compressed: m.Compressed, Deleted: m.Deleted, CreatedAt: m.CreatedAt}
		if m.StructuredRequestID.Valid {
			rows[i].StructuredRequestID = &m.StructuredRequestID.UUID
		}
		if len(m.Content) == 0 {
			return nil, fmt.Errorf("%w: message %d has no content", ErrImport, m.ID)
		}
	}
	return json.Marshal(rows)
}
