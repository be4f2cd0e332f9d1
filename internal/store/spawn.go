package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbgen"
	"github.com/chatd/chatd/internal/jsonb"
)

// SpawnTool is the server tool that spawns a child chat (docs/tools.md).
// The store writes its results: a child's outcome, delivered to its parent.
const SpawnTool = "spawn_agent"

// SpawnState says whether a spawned child's parent still awaits it.
type SpawnState string

// Spawn states ("" for a chat that was not spawned).
const (
	// SpawnAwaited: the parent's tool call waits for the child's first turn.
	SpawnAwaited SpawnState = "awaited"
	// SpawnDelivered: the child's result was written into the parent.
	SpawnDelivered SpawnState = "delivered"
	// SpawnDetached: the parent's turn ended first; the child was
	// interrupted and its result goes nowhere.
	SpawnDetached SpawnState = "detached"
)

// Spawn is a child chat that a commit creates for a tool call of the
// parent's committed step MessageID: the same owner, the parent's MCP
// servers and spawn opt-in, running with Content as its first message.
type Spawn struct {
	MessageID  int64
	ToolCallID string
	Model      string
	Title      string
	Content    []jsonb.Part
	Request    *RequestSpec
}

// maxSpawnResultBytes bounds a child's text answer as its parent reads it.
const maxSpawnResultBytes = 64 << 10

// insertSpawn creates a spawned child with its first message (and its
// structured request) in the parent's commit.
func (s *Store) insertSpawn(ctx context.Context, tx pgx.Tx, parent uuid.UUID, sp Spawn) error {
	content, err := jsonb.MarshalParts(sp.Content)
	if err != nil {
		return err
	}
	title := sp.Title
	if title == "" {
		title = titleFrom(sp.Content)
	}
	row, err := s.q.ChatInsertSpawn(ctx, tx, dbgen.ChatInsertSpawnParams{Title: title, Model: sp.Model,
		SpawnMessageID: &sp.MessageID, SpawnToolCallID: &sp.ToolCallID, ParentID: parent})
	if err != nil {
		return fmt.Errorf("spawn a child for call %s: %w", sp.ToolCallID, err)
	}
	reqID, err := s.insertRequest(ctx, tx, row.ID, sp.Request)
	if err != nil {
		return err
	}
	_, err = s.insertUserMessage(ctx, tx, row.ID, content, reqID)
	return err
}

// SpawnCounts are what the spawn_agent caps are checked against.
type SpawnCounts struct {
	// Total children of the chat, and those of its current turn.
	Total, ThisTurn int
	// Step maps the calls of the step being answered that already have a
	// child to that child's state.
	Step map[string]SpawnState
}

// SpawnCounts counts chat's children, in all and spawned by steps after
// the message sinceID (the turn's input), and reads which calls of the step
// stepID already have one. Only the chat's owning worker spawns, behind its
// fence, so the counts hold until its commit.
func (s *Store) SpawnCounts(ctx context.Context, chat uuid.UUID, sinceID, stepID int64) (SpawnCounts, error) {
	row, err := s.q.ChatSpawnCounts(ctx, s.pool, dbgen.ChatSpawnCountsParams{ParentID: uuid.NullUUID{UUID: chat, Valid: true}, SinceMessageID: &sinceID, StepMessageID: &stepID})
	if err != nil {
		return SpawnCounts{}, mapError(err)
	}
	out := SpawnCounts{Total: int(row.Total), ThisTurn: int(row.ThisTurn)}
	err = json.Unmarshal(row.StepCalls, &out.Step)
	return out, err
}

// awaitedCalls are the tool calls of chat that wait for a spawned child.
func (s *Store) awaitedCalls(ctx context.Context, tx pgx.Tx, chat dbgen.Chat) (map[string]bool, error) {
	if !chat.SpawnAgents {
		return nil, nil
	}
	ids, err := s.q.ChatListAwaitedCalls(ctx, tx, uuid.NullUUID{UUID: chat.ID, Valid: true})
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, err
}

// withoutAwaited drops the calls answered by children, not by a client.
func withoutAwaited(calls []jsonb.Part, awaited map[string]bool) (client []jsonb.Part, children int) {
	for _, c := range calls {
		if awaited[c.ToolCallID] {
			children++
			continue
		}
		client = append(client, c)
	}
	return client, children
}

// deliver writes a spawned child's outcome into its parent when the child's
// turn has just ended in this transaction (child is its row after the end):
// the tool result of the call that spawned it, if that call is still
// unanswered, and the parent resumes once none of its calls is left. The
// parent's row was locked first (Commit.ToParent).
func (s *Store) deliver(ctx context.Context, tx pgx.Tx, child dbgen.Chat) (dbgen.Chat, error) {
	return s.deliverWith(ctx, tx, child, s.spawnResult)
}

// deliverWith is deliver with the child's result made by result.
func (s *Store) deliverWith(ctx context.Context, tx pgx.Tx, child dbgen.Chat,
	result func(context.Context, pgx.Tx, dbgen.Chat) (jsonb.Part, error)) (dbgen.Chat, error) {
	if child.SpawnState == nil || SpawnState(*child.SpawnState) != SpawnAwaited || !child.ParentChatID.Valid {
		return child, nil
	}
	parent, err := s.q.ChatLockByID(ctx, tx, child.ParentChatID.UUID)
	if err != nil {
		return child, fmt.Errorf("lock the parent of spawned chat %s: %w", child.ID, err)
	}
	step, pending, err := s.unresolved(ctx, tx, parent.ID)
	if err != nil {
		return child, err
	}
	callID := ptrOr(child.SpawnToolCallID)
	answered, rest := false, 0
	for _, p := range pending {
		if step == *child.SpawnMessageID && p.ToolCallID == callID {
			answered = true
		} else {
			rest++
		}
	}
	if answered {
		part, err := result(ctx, tx, child)
		if err != nil {
			return child, err
		}
		latest, err := s.latestRequest(ctx, tx, parent.ID)
		if err != nil {
			return child, err
		}
		if _, err := s.insertMessage(ctx, tx, parent.ID, NewMessage{Role: client.RoleTool, Parts: []jsonb.Part{part}, RequestID: latest}); err != nil {
			return child, err
		}
		if rest == 0 && parent.Status == client.StatusRequiresAction {
			if _, err := s.q.ChatSetState(ctx, tx, dbgen.ChatSetStateParams{ID: parent.ID, Status: client.StatusRunning}); err != nil {
				return child, err
			}
		}
	}
	return s.q.ChatSetSpawnDelivered(ctx, tx, child.ID)
}

// spawnResult is a child's outcome as its parent's tool result: for a
// structured child its receipt ({"chat_id", "request_id", "status",
// "value" | "error"}, an error result unless it succeeded), otherwise its
// last assistant text (an error result when the turn failed).
func (s *Store) spawnResult(ctx context.Context, tx pgx.Tx, child dbgen.Chat) (jsonb.Part, error) {
	part := jsonb.Part{Type: jsonb.PartToolResult, ToolCallID: ptrOr(child.SpawnToolCallID), ToolName: SpawnTool}
	r, err := s.q.RequestLatestOfChat(ctx, tx, child.ID)
	switch {
	case err == nil:
		type receipt struct {
			ChatID uuid.UUID `json:"chat_id"`
			jsonb.Outcome
		}
		out := receipt{ChatID: child.ID, Outcome: jsonb.Outcome{RequestID: r.RequestID.String(), Status: string(r.Status)}}
		if r.Status == client.OutputPending || r.ReceiptMessageID == nil {
			out.Status = string(client.OutputFailed)
			out.Error = &jsonb.OutcomeError{Code: string(client.CodeNotProduced), Message: "the child's turn ended without a result"}
		} else {
			m, err := s.q.MessageGetByID(ctx, tx, *r.ReceiptMessageID)
			if err != nil {
				return part, err
			}
			parts, err := jsonb.ParseContent(m.Content)
			if err != nil {
				return part, err
			}
			for _, p := range parts {
				if p.Type == jsonb.PartOutcome && p.Outcome != nil {
					out.Outcome = *p.Outcome
				}
			}
		}
		part.IsError = out.Status != string(client.OutputSucceeded)
		part.Result, err = json.Marshal(out)
		return part, err
	case !errors.Is(err, pgx.ErrNoRows):
		return part, err
	}
	if child.Status == client.StatusError {
		var e client.StreamError
		_ = json.Unmarshal(child.LastError, &e)
		part.IsError = true
		part.Result = jsonText(fmt.Sprintf("The child chat %s failed (%s): %s", child.ID, e.Code, e.Message))
		return part, nil
	}
	text := ""
	m, err := s.q.MessageLastAssistant(ctx, tx, child.ID)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return part, err
	}
	if err == nil {
		parts, err := jsonb.ParseContent(m.Content)
		if err != nil {
			return part, err
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Type == jsonb.PartText {
				b.WriteString(p.Text)
			}
		}
		text = b.String()
		if m.FinishReason != nil && *m.FinishReason == "interrupted" {
			part.IsError = true
			text = "The child chat was interrupted. Its partial answer: " + text
		}
	}
	if len(text) > maxSpawnResultBytes {
		text = truncateText(text, maxSpawnResultBytes) + " [cut at 64 KiB]"
	}
	if text == "" {
		text = "(the child chat ended without a text answer)"
	}
	part.Result = jsonText(text)
	return part, nil
}

// jsonText encodes s as a JSON string, without HTML escaping.
func jsonText(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimRight(b.Bytes(), "\n")
}

// truncateText cuts s to at most n bytes on a character boundary.
func truncateText(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
