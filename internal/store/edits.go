package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbgen"
	"github.com/chatd/chatd/internal/jsonb"
)

// FormatChange says what an edit does to the edited message's format.
type FormatChange int

const (
	// FormatPreserve keeps the edited message's format (a new request UUID).
	FormatPreserve FormatChange = iota
	// FormatClear makes the replacement an ordinary message.
	FormatClear
	// FormatReplace uses EditParams.Request.
	FormatReplace
)

// EditParams describe an edit of a user message.
type EditParams struct {
	OwnerID   uuid.UUID
	ChatID    uuid.UUID
	MessageID int64
	Content   []jsonb.Part
	Format    FormatChange
	Request   *RequestSpec
	// Check repeats state-dependent admission under the chat lock. It gets
	// the format the replacement will carry (nil: ordinary), so a preserved
	// format is checked too.
	Check func(chat Chat, spec *RequestSpec) error
}

// EditResult is what an edit wrote.
type EditResult struct {
	Chat Chat
	// Message is the replacement.
	Message Message
	// Inserted are the client-visible rows written, in id order: the
	// cancellation receipts, then the replacement.
	Inserted []Message
	// DeletedIDs are the client-visible messages the edit discarded.
	DeletedIDs []int64
}

// ErrNotEditable: the message is not a user message of the chat's history.
var ErrNotEditable = errors.New("only user messages can be edited")

// EditMessage replaces a user message and discards everything after it, in
// one transaction and in this order: collect the pending requests the edit
// discards (in history from the message on, and queued), soft-delete the
// suffix and clear the queue, write a cancelled (superseded) receipt for each
// collected request, then insert the replacement. The chat runs a new turn.
func (s *Store) EditMessage(ctx context.Context, p EditParams) (EditResult, error) {
	var res EditResult
	content, err := jsonb.MarshalParts(p.Content)
	if err != nil {
		return res, err
	}
	var done []finished
	err = s.tx(ctx, "edit", func(tx pgx.Tx) error {
		res, done = EditResult{}, nil
		chat, target, err := s.editTarget(ctx, tx, p)
		if err != nil {
			return err
		}
		spec, err := s.editSpec(ctx, tx, p, target)
		if err != nil {
			return err
		}
		if p.Check != nil {
			if err := p.Check(chatFrom(chat), spec); err != nil {
				return err
			}
		}
		if err := s.discardFrom(ctx, tx, chat, target.ID, &res, &done); err != nil {
			return err
		}
		reqID, err := s.insertRequest(ctx, tx, chat.ID, spec)
		if err != nil {
			return err
		}
		if res.Message, err = s.insertUserMessage(ctx, tx, chat.ID, content, reqID); err != nil {
			return err
		}
		res.Inserted = append(res.Inserted, res.Message)
		// The owner of a running turn keeps the chat: its fence has failed
		// and it decides again from the new history.
		keep := chat.Status.Runnable() && chat.WorkerID.Valid
		return s.setState(ctx, tx, &res.Chat, dbgen.ChatSetStateParams{ID: chat.ID, Status: client.StatusRunning, KeepOwner: keep})
	})
	if err == nil {
		s.finishedCommitted(done)
	}
	return res, err
}

// editTarget locks the owner's chat and finds the user message to edit.
func (s *Store) editTarget(ctx context.Context, tx pgx.Tx, p EditParams) (dbgen.Chat, dbgen.ChatMessage, error) {
	chat, err := s.q.ChatLockForOwner(ctx, tx, dbgen.ChatLockForOwnerParams{ID: p.ChatID, OwnerID: p.OwnerID})
	if err != nil {
		return chat, dbgen.ChatMessage{}, err
	}
	target, err := s.q.MessageGetInChat(ctx, tx, dbgen.MessageGetInChatParams{ChatID: chat.ID, ID: p.MessageID})
	if err != nil {
		return chat, target, err
	}
	if target.Deleted || Visibility(target.Visibility) == VisibleModel {
		return chat, target, pgx.ErrNoRows // not part of what the client sees
	}
	if target.Role != client.RoleUser || MessageKind(target.Kind) != KindMessage {
		return chat, target, ErrNotEditable
	}
	return chat, target, nil
}

// editSpec is the replacement's structured request: the edit's own, none,
// or the edited message's when the edit preserves it.
func (s *Store) editSpec(ctx context.Context, tx pgx.Tx, p EditParams, target dbgen.ChatMessage) (*RequestSpec, error) {
	switch p.Format {
	case FormatClear:
		return nil, nil
	case FormatPreserve:
		if !target.StructuredRequestID.Valid {
			return nil, nil
		}
		r, err := s.q.RequestGet(ctx, tx, target.StructuredRequestID.UUID)
		if err != nil {
			return nil, err
		}
		return &RequestSpec{Name: r.Name, Description: r.Description, Schema: storedSchema(r.Schema)}, nil
	}
	return p.Request, nil
}

// discardFrom soft-deletes the history from message fromID on and clears
// the queue, interrupts the discarded turn's children, and writes a
// cancelled (superseded) receipt for every pending request discarded.
func (s *Store) discardFrom(ctx context.Context, tx pgx.Tx, chat dbgen.Chat, fromID int64, res *EditResult, done *[]finished) error {
	discarded, err := s.q.RequestListPendingFrom(ctx, tx, dbgen.RequestListPendingFromParams{ChatID: chat.ID, FromID: fromID})
	if err != nil {
		return err
	}
	deleted, err := s.q.MessageSoftDeleteFrom(ctx, tx, dbgen.MessageSoftDeleteFromParams{ChatID: chat.ID, FromID: fromID})
	if err != nil {
		return err
	}
	for _, d := range deleted {
		if Visibility(d.Visibility) != VisibleModel {
			res.DeletedIDs = append(res.DeletedIDs, d.ID)
		}
	}
	if _, err := s.q.QueueClear(ctx, tx, chat.ID); err != nil {
		return err
	}
	if chat.SpawnAgents {
		// The discarded turn's children are interrupted (docs/tools.md).
		if _, err := s.q.ChatDetachChildren(ctx, tx, uuid.NullUUID{UUID: chat.ID, Valid: true}); err != nil {
			return err
		}
	}
	for _, r := range discarded {
		rows, _, err := s.finishRequest(ctx, tx, chat.ID, Outcome{RequestID: r.RequestID, Status: client.OutputCancelled,
			Code: client.CodeSuperseded, Message: "the message that asked for it was edited"}, done)
		if err != nil {
			return err
		}
		res.Inserted = append(res.Inserted, rows...)
	}
	return nil
}

// DeleteQueued removes a queued message; a structured one gets its
// cancelled (queue_deleted) receipt in the same transaction. The receipt is
// a receipt-only insert, so a turn running meanwhile is not disturbed.
func (s *Store) DeleteQueued(ctx context.Context, owner, chatID uuid.UUID, queuedID int64) (QueuedMessage, []Message, error) {
	var q dbgen.ChatQueuedMessage
	var receipts []Message
	var done []finished
	err := s.tx(ctx, "delete_queued", func(tx pgx.Tx) error {
		receipts, done = nil, nil
		chat, err := s.q.ChatLockForOwner(ctx, tx, dbgen.ChatLockForOwnerParams{ID: chatID, OwnerID: owner})
		if err != nil {
			return err
		}
		if q, err = s.q.QueueDelete(ctx, tx, dbgen.QueueDeleteParams{ChatID: chat.ID, ID: queuedID}); err != nil {
			return err
		}
		if q.StructuredRequestID.Valid {
			receipts, _, err = s.finishRequest(ctx, tx, chat.ID, Outcome{RequestID: q.StructuredRequestID.UUID,
				Status: client.OutputCancelled, Code: client.CodeQueueDeleted, Message: "the queued message was deleted"}, &done)
		}
		return err
	})
	if err == nil {
		s.finishedCommitted(done)
	}
	return queuedFrom(q), receipts, err
}

// Interrupt asks the running turn to stop. The worker that owns it (or, if
// none, the next to claim it) keeps the partial output, cancels the governing
// request and lets the queue move on.
func (s *Store) Interrupt(ctx context.Context, owner, chatID uuid.UUID) (Chat, error) {
	var chat Chat
	err := s.tx(ctx, "interrupt", func(tx pgx.Tx) error {
		c, err := s.q.ChatLockForOwner(ctx, tx, dbgen.ChatLockForOwnerParams{ID: chatID, OwnerID: owner})
		if err != nil {
			return err
		}
		switch c.Status {
		case client.StatusInterrupting:
			chat = chatFrom(c)
			return nil
		case client.StatusRunning, client.StatusRequiresAction:
		default:
			return &StateError{Op: OpInterrupt, Status: c.Status, Mode: c.Mode}
		}
		chat, err = s.setInterrupting(ctx, tx, c)
		return err
	})
	return chat, err
}

func (s *Store) setInterrupting(ctx context.Context, tx pgx.Tx, c dbgen.Chat) (Chat, error) {
	var out Chat
	err := s.setState(ctx, tx, &out, dbgen.ChatSetStateParams{ID: c.ID, Status: client.StatusInterrupting, KeepOwner: c.Status == client.StatusRunning})
	return out, err
}

// ToolResult is a client's answer to a pending client-executed tool call.
type ToolResult struct {
	ToolCallID string
	Output     json.RawMessage
	IsError    bool
}

// ResultProblem says what is wrong with submitted tool results.
type ResultProblem int

// Problems of submitted tool results.
const (
	// ResultDuplicate: a second result for the same call.
	ResultDuplicate ResultProblem = iota + 1
	// ResultForFinalizer: a result for the server-owned finalizer's call.
	ResultForFinalizer
	// ResultUnknownCall: a result for a call that is not pending.
	ResultUnknownCall
	// ResultMissing: a pending call without a result.
	ResultMissing
	// ResultForChild: a result for a call that a spawned child answers.
	ResultForChild
)

// ToolResultsError explains why submitted results do not match the
// pending calls. Index is the result at fault (-1 for ResultMissing);
// ToolName is the pending call's tool, when known.
type ToolResultsError struct {
	Problem    ResultProblem
	Index      int
	ToolCallID string
	ToolName   string
}

func (e *ToolResultsError) Error() string {
	return fmt.Sprintf("tool result %d (%s): problem %d", e.Index, e.ToolCallID, e.Problem)
}

// SubmitToolResults answers every pending client tool call at once and
// resumes the turn. The results must match the pending calls exactly.
// finalizer names the server-owned tool whose calls clients never answer.
func (s *Store) SubmitToolResults(ctx context.Context, owner, chatID uuid.UUID, results []ToolResult, finalizer string) (Chat, Message, error) {
	var chat Chat
	var msg Message
	err := s.tx(ctx, "tool_results", func(tx pgx.Tx) error {
		c, err := s.q.ChatLockForOwner(ctx, tx, dbgen.ChatLockForOwnerParams{ID: chatID, OwnerID: owner})
		if err != nil {
			return err
		}
		if c.Status != client.StatusRequiresAction {
			return &StateError{Op: OpSubmitToolResults, Status: c.Status, Mode: c.Mode}
		}
		pending, err := s.pendingCalls(ctx, tx, c.ID)
		if err != nil {
			return err
		}
		awaited, err := s.awaitedCalls(ctx, tx, c)
		if err != nil {
			return err
		}
		byID := map[string]jsonb.Part{}
		for _, p := range pending {
			byID[p.ToolCallID] = p
		}
		seen := map[string]bool{}
		var parts []jsonb.Part
		for i, r := range results {
			call, ok := byID[r.ToolCallID]
			bad := &ToolResultsError{Index: i, ToolCallID: r.ToolCallID, ToolName: call.ToolName}
			switch {
			case seen[r.ToolCallID]:
				bad.Problem = ResultDuplicate
			case ok && call.ToolName == finalizer:
				bad.Problem = ResultForFinalizer
			case ok && awaited[r.ToolCallID]:
				bad.Problem = ResultForChild
			case !ok:
				bad.Problem = ResultUnknownCall
			}
			if bad.Problem != 0 {
				return bad
			}
			seen[r.ToolCallID] = true
			parts = append(parts, jsonb.Part{Type: jsonb.PartToolResult, ToolCallID: r.ToolCallID, ToolName: call.ToolName,
				Result: r.Output, IsError: r.IsError})
		}
		clientCalls, children := withoutAwaited(pending, awaited)
		for _, p := range clientCalls {
			if !seen[p.ToolCallID] {
				return &ToolResultsError{Problem: ResultMissing, Index: -1, ToolCallID: p.ToolCallID, ToolName: p.ToolName}
			}
		}
		latest, err := s.latestRequest(ctx, tx, c.ID)
		if err != nil {
			return err
		}
		if msg, err = s.insertMessage(ctx, tx, c.ID, NewMessage{Role: client.RoleTool, Parts: parts, RequestID: latest}); err != nil {
			return err
		}
		if children > 0 {
			// Spawned children still answer calls of the step: the chat
			// keeps waiting, now without a deadline.
			return s.setState(ctx, tx, &chat, dbgen.ChatSetStateParams{ID: c.ID, Status: client.StatusRequiresAction})
		}
		return s.setState(ctx, tx, &chat, dbgen.ChatSetStateParams{ID: c.ID, Status: client.StatusRunning})
	})
	return chat, msg, err
}

// latestRequest is the governing request id of the current turn, if pending.
func (s *Store) latestRequest(ctx context.Context, tx pgx.Tx, chatID uuid.UUID) (uuid.NullUUID, error) {
	m, err := s.q.MessageGetLatestUserRequest(ctx, tx, chatID)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !m.StructuredRequestID.Valid) {
		return uuid.NullUUID{}, nil
	}
	if err != nil {
		return uuid.NullUUID{}, err
	}
	r, err := s.q.RequestGet(ctx, tx, m.StructuredRequestID.UUID)
	if err != nil || r.Status != client.OutputPending {
		return uuid.NullUUID{}, err
	}
	return m.StructuredRequestID, nil
}

// pendingCalls reads the chat's model-visible history and returns the tool
// calls of the last assistant step that are still unanswered.
func (s *Store) pendingCalls(ctx context.Context, tx pgx.Tx, chatID uuid.UUID) ([]jsonb.Part, error) {
	_, calls, err := s.unresolved(ctx, tx, chatID)
	return calls, err
}

// unresolved is pendingCalls with the id of the assistant step they belong to.
func (s *Store) unresolved(ctx context.Context, tx pgx.Tx, chatID uuid.UUID) (int64, []jsonb.Part, error) {
	rows, err := s.q.MessageListForPrompt(ctx, tx, chatID)
	if err != nil {
		return 0, nil, err
	}
	roles := make([]string, len(rows))
	contents := make([][]jsonb.Part, len(rows))
	var step int64
	for i, r := range rows {
		roles[i] = string(r.Role)
		if r.Role == client.RoleAssistant {
			step = r.ID
		}
		if contents[i], err = jsonb.ParseContent(r.Content); err != nil {
			return 0, nil, err
		}
	}
	return step, jsonb.Unresolved(roles, contents), nil
}

// PendingToolCalls returns the client tool calls a chat in requires_action
// waits for (nil in any other status); calls that spawned children answer
// are not the client's.
func (s *Store) PendingToolCalls(ctx context.Context, chat Chat) ([]jsonb.Part, error) {
	if chat.Status != client.StatusRequiresAction {
		return nil, nil
	}
	var out []jsonb.Part
	err := pgx.BeginTxFunc(withPurpose(ctx, "pending_calls"), s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if out, err = s.pendingCalls(ctx, tx, chat.ID); err != nil {
			return err
		}
		awaited, err := s.awaitedCalls(ctx, tx, dbgen.Chat{ID: chat.ID, SpawnAgents: chat.SpawnAgents})
		out, _ = withoutAwaited(out, awaited)
		return err
	})
	return out, mapError(err)
}

// ExpireActions answers overdue client tool calls with errors and resumes
// their turns, so a client that went away cannot hold a request forever.
// It returns how many chats it resumed.
func (s *Store) ExpireActions(ctx context.Context, limit int32) (int, error) {
	ids, err := s.q.ChatListExpiredActions(ctx, s.pool, limit)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		err := s.tx(ctx, "expire_actions", func(tx pgx.Tx) error {
			c, err := s.q.ChatLockIfActionExpired(ctx, tx, id)
			if err != nil {
				return err
			}
			pending, err := s.pendingCalls(ctx, tx, c.ID)
			if err != nil {
				return err
			}
			awaited, err := s.awaitedCalls(ctx, tx, c)
			if err != nil {
				return err
			}
			pending, children := withoutAwaited(pending, awaited)
			var parts []jsonb.Part
			for _, p := range pending {
				msg, _ := json.Marshal("The client did not return a result for this tool call in time.")
				parts = append(parts, jsonb.Part{Type: jsonb.PartToolResult, ToolCallID: p.ToolCallID, ToolName: p.ToolName, Result: msg, IsError: true})
			}
			if len(parts) > 0 {
				latest, err := s.latestRequest(ctx, tx, c.ID)
				if err != nil {
					return err
				}
				if _, err := s.insertMessage(ctx, tx, c.ID, NewMessage{Role: client.RoleTool, Parts: parts, RequestID: latest}); err != nil {
					return err
				}
			}
			next := client.StatusRunning
			if children > 0 {
				next = client.StatusRequiresAction // children still answer, without a deadline
			}
			_, err = s.q.ChatSetState(ctx, tx, dbgen.ChatSetStateParams{ID: c.ID, Status: next})
			return err
		})
		if errors.Is(err, ErrNotFound) {
			continue // answered or taken meanwhile
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// ChatUpdate changes chat settings; nil fields are kept.
type ChatUpdate struct {
	Title    *string
	PlanMode *bool
}

// PlanModeConflictError: the chat has a structured request that plan mode
// would silently drop.
type PlanModeConflictError struct{ RequestID uuid.UUID }

func (e *PlanModeConflictError) Error() string {
	return fmt.Sprintf("structured request %s is pending", e.RequestID)
}
func (e *PlanModeConflictError) Unwrap() error { return ErrConflict }

// UpdateChat changes settings under the chat lock. Switching into plan mode
// is refused while a structured request is pending (active or queued).
func (s *Store) UpdateChat(ctx context.Context, owner, chatID uuid.UUID, u ChatUpdate) (Chat, error) {
	var chat Chat
	err := s.tx(ctx, "update_chat", func(tx pgx.Tx) error {
		c, err := s.q.ChatLockForOwner(ctx, tx, dbgen.ChatLockForOwnerParams{ID: chatID, OwnerID: owner})
		if err != nil {
			return err
		}
		mode, title := c.Mode, c.Title
		if u.Title != nil {
			title = *u.Title
		}
		if u.PlanMode != nil {
			if mode, err = s.planMode(ctx, tx, c, *u.PlanMode); err != nil {
				return err
			}
		}
		if mode != c.Mode || title != c.Title {
			c, err = s.q.ChatSetSettings(ctx, tx, dbgen.ChatSetSettingsParams{ID: c.ID, Mode: mode, Title: title})
		}
		chat = chatFrom(c)
		return err
	})
	return chat, err
}

// planMode returns the chat mode after a plan-mode switch.
func (s *Store) planMode(ctx context.Context, tx pgx.Tx, c dbgen.Chat, on bool) (client.ChatMode, error) {
	switch {
	case c.Mode == client.ModeChild:
		if on {
			return "", &StateError{Op: OpPlanMode, Status: c.Status, Mode: c.Mode}
		}
		return c.Mode, nil
	case !on:
		return client.ModeNormal, nil
	case c.Mode == client.ModePlan:
		return client.ModePlan, nil
	}
	pending, err := s.q.RequestListPendingForChat(ctx, tx, c.ID)
	if err != nil {
		return "", err
	}
	if len(pending) > 0 {
		return "", &PlanModeConflictError{RequestID: pending[0].RequestID}
	}
	return client.ModePlan, nil
}
