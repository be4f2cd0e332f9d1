package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbgen"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/tracing"
)

// RequestSpec is an admitted structured response format to persist.
type RequestSpec struct {
	Name        string
	Description string
	Schema      json.RawMessage
}

// NewChat describes a chat to create with its first user message.
type NewChat struct {
	OwnerID      uuid.UUID
	Model        string
	SystemPrompt string
	Title        string
	// Mode is normal or plan; a chat with a parent is a child chat.
	Mode         client.ChatMode
	ParentChatID uuid.NullUUID
	DynamicTools json.RawMessage
	// MCPServers are the configured MCP servers the chat opted into.
	MCPServers []string
	// SpawnAgents opts the chat into the spawn_agent tool.
	SpawnAgents bool
	Content     []jsonb.Part
	Request     *RequestSpec
	// Key, when set, keeps Answer's rendering of the result under the
	// client's idempotency key in the same transaction.
	Key    *Idempotency
	Answer func(Chat, Message) (status int, body []byte, err error)
	// Claim, when set, claims the chat for a worker of this process in the
	// admission's transaction (the local hand-off, internal/handoff).
	Claim *LocalClaim
	// MaxRunnable, when positive, refuses the chat (ErrTooManyRunnable)
	// if its owner would have more runnable chats.
	MaxRunnable int
}

// LocalClaim is an admission's claim for an idle worker of the admitting
// process: the chat is written with the worker's id and lease, its first
// provider attempt is counted as a claim counts it, and Turn is read as
// ClaimTurn reads it, all in the admission's transaction. Nothing
// announces the chat to workers (no chatd_work): if the process dies
// before its worker runs, the lease runs out and any worker claims it.
type LocalClaim struct {
	Worker uuid.UUID
	Lease  time.Duration
	// Turn is what the worker decides from, once the admission committed.
	Turn Turn
}

// ErrUnknownParent: the parent chat does not exist or is not the caller's.
var ErrUnknownParent = errors.New("unknown parent chat")

// CreateChat inserts the chat (running), its ledger row when structured, and
// the first user message, in one transaction.
func (s *Store) CreateChat(ctx context.Context, p NewChat) (Chat, Message, error) {
	var chat Chat
	var msg Message
	content, err := jsonb.MarshalParts(p.Content)
	if err != nil {
		return chat, msg, err
	}
	// The admission's statements decide nothing that follows (the chat's
	// id is ours): one batch.
	ins := p.insertParams()
	var pl pipeline
	pipeOne(&pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatInsert(ctx, db, ins) },
		func(_ dbgen.Chat, err error) error { return err })
	reqID := s.queueRequest(ctx, &pl, ins.ID, p.Request)
	admitted := s.admitting(reqID, p.OwnerID, ins.ID)
	defer func() { admitted(err) }()
	pipeOne(&pl, func(db dbgen.DBTX) (dbgen.ChatMessage, error) {
		return s.q.MessageInsert(ctx, db, userMessage(ins.ID, content, reqID))
	}, func(row dbgen.ChatMessage, err error) error {
		msg = messageFrom(row)
		return err
	})
	final := func(row dbgen.Chat, err error) error {
		chat = chatFrom(row)
		return err
	}
	s.queueRunnableWithin(ctx, &pl, p.OwnerID, p.MaxRunnable)
	if p.Claim != nil {
		// The message reset the attempt counter (it moved the
		// history): the claim's attempt is counted after it.
		pipeOne(&pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatCountAttempt(ctx, db, ins.ID) }, final)
		p.Claim.Turn = Turn{Chat: Chat{ID: ins.ID}}
		s.queueTurnRead(ctx, &pl, &p.Claim.Turn)
	} else {
		pipeOne(&pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatGet(ctx, db, ins.ID) }, final)
	}
	err = s.admitChat(ctx, p, ins.ID, &pl, func() (int, []byte, error) { return p.Answer(chat, msg) })
	if err == nil && p.Claim != nil {
		p.Claim.Turn.Chat = chat
	}
	return chat, msg, err
}

// insertParams fills in the new chat's defaults and returns its row, with
// the local claim's worker and lease when it has one.
func (p *NewChat) insertParams() dbgen.ChatInsertParams {
	if p.Mode == "" {
		p.Mode = client.ModeNormal
	}
	if p.Title == "" {
		p.Title = titleFrom(p.Content)
	}
	if p.MCPServers == nil {
		p.MCPServers = []string{} // NULL is not an empty list
	}
	if len(p.DynamicTools) == 0 {
		p.DynamicTools = json.RawMessage("[]")
	}
	if p.ParentChatID.Valid {
		p.Mode = client.ModeChild
	}
	ins := dbgen.ChatInsertParams{ID: uuid.New(),
		OwnerID: p.OwnerID, ParentChatID: p.ParentChatID, Title: p.Title, Model: p.Model,
		SystemPrompt: p.SystemPrompt, Mode: p.Mode, DynamicTools: p.DynamicTools, Status: client.StatusRunning,
		McpServers: p.MCPServers, SpawnAgents: p.SpawnAgents,
	}
	if p.Claim != nil {
		ins.WorkerID, ins.LeaseSeconds = uuid.NullUUID{UUID: p.Claim.Worker, Valid: true}, p.Claim.Lease.Seconds()
	}
	return ins
}

// admitChat commits the admission's batch: alone, as one implicit
// transaction, or in a transaction that checks the parent first and saves
// the idempotent answer after.
func (s *Store) admitChat(ctx context.Context, p NewChat, chatID uuid.UUID, pl *pipeline, answer func() (int, []byte, error)) error {
	if !p.ParentChatID.Valid && p.Key == nil {
		// Nothing to read first or to write after: the batch alone is
		// the transaction (PostgreSQL runs a batch sent outside one as
		// one implicit transaction, committed at its end), one round trip.
		return mapError(s.pool.SendBatch(withPurpose(ctx, "admit"), &pl.b).Close())
	}
	return s.tx(ctx, "admit", func(tx pgx.Tx) error {
		if p.ParentChatID.Valid {
			parent, err := s.q.ChatGetForOwner(ctx, tx, dbgen.ChatGetForOwnerParams{ID: p.ParentChatID.UUID, OwnerID: p.OwnerID})
			if errors.Is(err, pgx.ErrNoRows) || (err == nil && parent.Mode == client.ModeChild) {
				return ErrUnknownParent // children are one level deep
			}
			if err != nil {
				return err
			}
		}
		if err := pl.send(ctx, tx); err != nil {
			return err
		}
		if p.Key != nil {
			return s.saveAnswer(ctx, tx, p.OwnerID, chatID, p.Key, answer)
		}
		return nil
	})
}

// queueRequest queues the insert of a structured request's ledger row,
// when spec asks for one, and returns its id.
func (s *Store) queueRequest(ctx context.Context, pl *pipeline, chatID uuid.UUID, spec *RequestSpec) uuid.NullUUID {
	if spec == nil {
		return uuid.NullUUID{}
	}
	// The span of the admission (the API request, or the parent's turn
	// for a spawned child) is the parent of the request's turn.
	p := dbgen.RequestInsertParams{RequestID: uuid.New(), ChatID: chatID, Name: spec.Name, Description: spec.Description,
		AdmittedBy: s.process()}
	// Stored through the codec: its strings may hold U+0000 (requestFrom
	// decodes). A document that is not JSON (never admitted) goes as it
	// is, and the database refuses it.
	p.Schema = spec.Schema
	if schema, err := jsonb.EncodeDocument(spec.Schema); err == nil {
		p.Schema = schema
	}
	if tp := tracing.Traceparent(ctx); tp != "" {
		p.TraceParent = &tp
	}
	pipeOne(pl, func(db dbgen.DBTX) (dbgen.StructuredRequest, error) { return s.q.RequestInsert(ctx, db, p) },
		func(_ dbgen.StructuredRequest, err error) error { return err })
	return uuid.NullUUID{UUID: p.RequestID, Valid: true}
}

func (s *Store) insertRequest(ctx context.Context, tx pgx.Tx, chatID uuid.UUID, spec *RequestSpec) (uuid.NullUUID, error) {
	var pl pipeline
	id := s.queueRequest(ctx, &pl, chatID, spec)
	return id, pl.send(ctx, tx)
}

// MaxTitleBytes bounds a chat title, explicit or derived.
const MaxTitleBytes = 256

// titleFrom derives a chat title from the first line of the first text part.
func titleFrom(parts []jsonb.Part) string {
	for _, p := range parts {
		if p.Type != jsonb.PartText {
			continue
		}
		line, _, _ := strings.Cut(strings.TrimSpace(p.Text), "\n")
		line = strings.ToValidUTF8(strings.ReplaceAll(line, "\x00", ""), "")
		if utf8.RuneCountInString(line) <= 80 && len(line) <= MaxTitleBytes {
			return line
		}
		// At most 79 characters and an ellipsis, within the byte limit of
		// an explicit title, cut on a character boundary.
		cut, runes := 0, 0
		for i, r := range line {
			end := i + utf8.RuneLen(r)
			if runes == 79 || end > MaxTitleBytes-len("…") {
				break
			}
			cut, runes = end, runes+1
		}
		return line[:cut] + "…"
	}
	return ""
}

// SendParams describe a user message sent to an existing chat.
type SendParams struct {
	OwnerID uuid.UUID
	ChatID  uuid.UUID
	Content []jsonb.Part
	Request *RequestSpec
	// Interrupt stops a running turn instead of waiting for it; the message
	// is queued and runs next.
	Interrupt bool
	// PlanMode, when set, switches the chat's plan mode first.
	PlanMode *bool
	// Check repeats cheap state-dependent admission checks under the chat
	// lock, given the chat and its effective mode for this message; an
	// error aborts the transaction unchanged.
	Check func(chat Chat, mode client.ChatMode) error
	// Key, when set, keeps Answer's rendering of the result under the
	// client's idempotency key in the same transaction.
	Key    *Idempotency
	Answer func(SendResult) (status int, body []byte, err error)
	// Claim, when set, claims the chat for a worker of this process if the
	// message starts a turn (SendResult.Claimed), as NewChat.Claim does.
	Claim *LocalClaim
	// MaxRunnable is NewChat.MaxRunnable, for a message that starts a turn.
	MaxRunnable int
}

// SendResult says where the message went.
type SendResult struct {
	Chat    Chat
	Message *Message
	Queued  *QueuedMessage
	// Claimed: the turn started was claimed for SendParams.Claim's worker,
	// and Claim.Turn holds what it decides from.
	Claimed bool
}

// SendMessage puts the message into history when the chat is idle (waiting
// or error) and starts a turn, or queues it behind the running turn.
func (s *Store) SendMessage(ctx context.Context, p SendParams) (SendResult, error) {
	var res SendResult
	content, err := jsonb.MarshalParts(p.Content)
	if err != nil {
		return res, err
	}
	admitted := func(error) {}
	defer func() { admitted(err) }()
	err = s.tx(ctx, "send", func(tx pgx.Tx) error {
		if err := s.send(ctx, tx, p, content, &res); err != nil {
			return err
		}
		// Before COMMIT: nothing can finish the request before it.
		switch {
		case res.Message != nil:
			admitted = s.admitting(res.Message.StructuredRequestID, p.OwnerID, p.ChatID)
		case res.Queued != nil:
			admitted = s.admitting(res.Queued.StructuredRequestID, p.OwnerID, p.ChatID)
		}
		if p.Key != nil {
			return s.saveAnswer(ctx, tx, p.OwnerID, p.ChatID, p.Key, func() (int, []byte, error) { return p.Answer(res) })
		}
		return nil
	})
	return res, err
}

// send is SendMessage's transaction.
func (s *Store) send(ctx context.Context, tx pgx.Tx, p SendParams, content []byte, res *SendResult) error {
	chat, err := s.q.ChatLockForOwner(ctx, tx, dbgen.ChatLockForOwnerParams{ID: p.ChatID, OwnerID: p.OwnerID})
	if err != nil {
		return err
	}
	mode := chat.Mode
	if p.PlanMode != nil {
		if mode, err = s.planMode(ctx, tx, chat, *p.PlanMode); err != nil {
			return err
		}
	}
	if p.Check != nil {
		if err := p.Check(chatFrom(chat), mode); err != nil {
			return err
		}
	}
	if mode != chat.Mode {
		if chat, err = s.q.ChatSetSettings(ctx, tx, dbgen.ChatSetSettingsParams{ID: chat.ID, Mode: mode, Title: chat.Title}); err != nil {
			return err
		}
	}
	if chat.Status.Idle() {
		// The turn's start decides nothing that follows: one round trip.
		var pl pipeline
		reqID := s.queueRequest(ctx, &pl, chat.ID, p.Request)
		pipeOne(&pl, func(db dbgen.DBTX) (dbgen.ChatMessage, error) {
			return s.q.MessageInsert(ctx, db, userMessage(chat.ID, content, reqID))
		}, func(row dbgen.ChatMessage, err error) error {
			msg := messageFrom(row)
			res.Message = &msg
			return err
		})
		started := func(row dbgen.Chat, err error) error {
			res.Chat = chatFrom(row)
			return err
		}
		if p.Claim == nil {
			sp := dbgen.ChatSetStateParams{ID: chat.ID, Status: client.StatusRunning}
			pipeOne(&pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatSetState(ctx, db, sp) }, started)
			s.queueRunnableWithin(ctx, &pl, p.OwnerID, p.MaxRunnable)
			return pl.send(ctx, tx)
		}
		sp := dbgen.ChatStartTurnForParams{ID: chat.ID,
			WorkerID: uuid.NullUUID{UUID: p.Claim.Worker, Valid: true}, LeaseSeconds: p.Claim.Lease.Seconds()}
		pipeOne(&pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatStartTurnFor(ctx, db, sp) }, started)
		s.queueRunnableWithin(ctx, &pl, p.OwnerID, p.MaxRunnable)
		p.Claim.Turn = Turn{Chat: Chat{ID: chat.ID}}
		s.queueTurnRead(ctx, &pl, &p.Claim.Turn)
		if err := pl.send(ctx, tx); err != nil {
			return err
		}
		p.Claim.Turn.Chat, res.Claimed = res.Chat, true
		return nil
	}
	reqID, err := s.insertRequest(ctx, tx, chat.ID, p.Request)
	if err != nil {
		return err
	}
	q, err := s.q.QueueInsert(ctx, tx, dbgen.QueueInsertParams{ChatID: chat.ID, Content: content, StructuredRequestID: reqID})
	if err != nil {
		return err
	}
	queued := queuedFrom(q)
	res.Queued = &queued
	if p.Interrupt && (chat.Status == client.StatusRunning || chat.Status == client.StatusRequiresAction) {
		res.Chat, err = s.setInterrupting(ctx, tx, chat)
		return err
	}
	row, err := s.q.ChatGet(ctx, tx, chat.ID)
	res.Chat = chatFrom(row)
	return err
}

// insertUserMessage adds a user message to history.
func (s *Store) insertUserMessage(ctx context.Context, tx pgx.Tx, chatID uuid.UUID, content []byte, reqID uuid.NullUUID) (Message, error) {
	m, err := s.q.MessageInsert(ctx, tx, userMessage(chatID, content, reqID))
	return messageFrom(m), err
}

// userMessage is the row of a user message.
func userMessage(chatID uuid.UUID, content []byte, reqID uuid.NullUUID) dbgen.MessageInsertParams {
	return dbgen.MessageInsertParams{
		ChatID: chatID, Role: client.RoleUser, Kind: string(KindMessage), Visibility: string(VisibleBoth),
		Content: content, StructuredRequestID: reqID,
	}
}

// setState runs ChatSetState and stores the chat it returns in dst.
func (s *Store) setState(ctx context.Context, tx pgx.Tx, dst *Chat, p dbgen.ChatSetStateParams) error {
	row, err := s.q.ChatSetState(ctx, tx, p)
	*dst = chatFrom(row)
	return err
}

// GetChat returns the owner's chat.
func (s *Store) GetChat(ctx context.Context, owner, id uuid.UUID) (Chat, error) {
	c, err := s.q.ChatGetForOwner(ctx, s.pool, dbgen.ChatGetForOwnerParams{ID: id, OwnerID: owner})
	return chatFrom(c), mapError(err)
}

// LoadChat returns a chat by id alone: the worker's view, whoever owns it.
func (s *Store) LoadChat(ctx context.Context, id uuid.UUID) (Chat, error) {
	c, err := s.q.ChatGet(ctx, s.pool, id)
	return chatFrom(c), mapError(err)
}

// ListChats returns the owner's chats, most recently active first; with a
// valid parent, only that chat's children.
func (s *Store) ListChats(ctx context.Context, owner uuid.UUID, limit int32, before *Chat, parent uuid.NullUUID) ([]Chat, error) {
	p := dbgen.ChatListForOwnerParams{OwnerID: owner, MaxRows: limit, ParentChatID: parent}
	if before != nil {
		t := before.UpdatedAt
		p.BeforeUpdatedAt = &t
		p.BeforeID = uuid.NullUUID{UUID: before.ID, Valid: true}
	}
	cs, err := s.q.ChatListForOwner(ctx, s.pool, p)
	return mapRows(cs, chatFrom), mapError(err)
}

// History is a page of client-visible messages plus the queue.
type History struct {
	Messages []Message
	Queue    []QueuedMessage
	HasMore  bool
}

// ListMessages returns client-visible messages with id > afterID, and the
// queue, read in one read-only repeatable-read snapshot (no lock: see
// ReadStream).
func (s *Store) ListMessages(ctx context.Context, owner, chatID uuid.UUID, afterID int64, limit int32) (History, error) {
	var h History
	err := pgx.BeginTxFunc(withPurpose(ctx, "list_messages"), s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := s.q.ChatGetForOwner(ctx, tx, dbgen.ChatGetForOwnerParams{ID: chatID, OwnerID: owner}); err != nil {
			return err
		}
		msgs, err := s.q.MessageListForClient(ctx, tx, dbgen.MessageListForClientParams{ChatID: chatID, AfterID: afterID, MaxRows: limit + 1})
		if err != nil {
			return err
		}
		if int32(len(msgs)) > limit {
			h.HasMore = true
			msgs = msgs[:limit]
		}
		h.Messages = mapRows(msgs, messageFrom)
		q, err := s.q.QueueList(ctx, tx, chatID)
		h.Queue = mapRows(q, queuedFrom)
		return err
	})
	return h, mapError(err)
}

// RequestState is a ledger row with its receipt, if finished.
type RequestState struct {
	Request Request
	Receipt *Message
	// ProviderRetry is the chat's provider retry (Chat.ProviderRetry)
	// while the request is pending and its turn runs.
	ProviderRetry json.RawMessage
	// Deleted is set when the request's chat was deleted: Request then
	// holds only the outcome (no schema, attempts or receipt).
	Deleted *Tombstone
}

// GetRequest returns the owner's structured request and its receipt, read
// in one statement; once its chat was deleted, its tombstone.
func (s *Store) GetRequest(ctx context.Context, owner, requestID uuid.UUID) (RequestState, error) {
	row, err := s.q.RequestGetForOwnerWithReceipt(ctx, s.pool, dbgen.RequestGetForOwnerWithReceiptParams{RequestID: requestID, OwnerID: owner})
	if errors.Is(err, pgx.ErrNoRows) {
		st, by, terr := s.requestTombstone(ctx, s.pool, requestID)
		if terr == nil && by != owner {
			terr = pgx.ErrNoRows
		}
		return st, mapError(terr)
	}
	if err != nil {
		return RequestState{}, mapError(err)
	}
	return requestStateFrom(row), nil
}

// PendingRequests counts the structured requests not finished yet, queued
// ones included, on every replica.
func (s *Store) PendingRequests(ctx context.Context) (int64, error) {
	n, err := s.q.RequestCountPending(ctx, s.pool)
	return n, mapError(err)
}

// RequestCompaction asks for the chat's older history to be summarised at
// the start of its next step (or of its next turn, if it is idle).
func (s *Store) RequestCompaction(ctx context.Context, owner, chatID uuid.UUID) (Chat, error) {
	c, err := s.q.ChatRequestCompaction(ctx, s.pool, dbgen.ChatRequestCompactionParams{ID: chatID, OwnerID: owner})
	return chatFrom(c), mapError(err)
}

// requestStateFrom is a request with its receipt, as the lookup (and the
// webhook payload, whose row has the same columns) reads it.
func requestStateFrom(row dbgen.RequestGetForOwnerWithReceiptRow) RequestState {
	st := RequestState{ProviderRetry: row.ProviderRetry}
	st.Request = requestFrom(dbgen.StructuredRequest{RequestID: row.RequestID, ChatID: row.ChatID, Name: row.Name,
		Description: row.Description, Schema: row.Schema, Status: row.Status, Rejections: row.Rejections,
		ValidationRejections: row.ValidationRejections, Steps: row.Steps, Candidate: row.Candidate,
		CandidateToolCallID: row.CandidateToolCallID, ErrorCode: row.ErrorCode, ErrorMessage: row.ErrorMessage,
		ReceiptMessageID: row.ReceiptMessageID, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, FinishedAt: row.FinishedAt,
		Attempts: row.Attempts, AdmittedBy: row.AdmittedBy, TraceParent: row.TraceParent})
	if row.ReceiptID != nil {
		receipt := messageFrom(dbgen.ChatMessage{ID: *row.ReceiptID, ChatID: row.ChatID, Role: client.Role(row.ReceiptRole),
			Kind: row.ReceiptKind, Visibility: string(VisibleUser), Content: row.ReceiptContent,
			StructuredRequestID: uuid.NullUUID{UUID: row.RequestID, Valid: true}, CreatedAt: *row.ReceiptCreatedAt})
		st.Receipt = &receipt
	}
	return st
}
