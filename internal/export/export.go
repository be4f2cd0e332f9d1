// Package export writes and reads chatd's export format: JSON Lines, one
// object per line, each with its "type" (docs/operations.md#export-and-import).
// An export is a header, then each chat followed by its structured
// requests, messages and queued messages, a chat's children after it, and
// an end line that counts what came before (so a cut export is told from a
// whole one). It is written a page of chats at a time and read a tree of
// chats at a time: memory does not grow with the number of chats.
package export

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/store"
)

// Version is the format's version, in the header.
const Version = 1

// The lines' types.
const (
	TypeHeader  = "chatd_export"
	TypeChat    = "chat"
	TypeRequest = "structured_request"
	TypeMessage = "message"
	TypeQueued  = "queued_message"
	TypeEnd     = "end"
)

// Header is the first line.
type Header struct {
	Type    string `json:"type"`
	Version int    `json:"version"`
	// User is the name of the chats' owner.
	User       string    `json:"user"`
	ExportedAt time.Time `json:"exported_at"`
}

// Chat is a chat's line; its rows follow it.
type Chat struct {
	Type            string            `json:"type"`
	ID              uuid.UUID         `json:"id"`
	ParentChatID    *uuid.UUID        `json:"parent_chat_id,omitempty"`
	Title           string            `json:"title"`
	Model           string            `json:"model"`
	SystemPrompt    string            `json:"system_prompt"`
	Mode            client.ChatMode   `json:"mode"`
	DynamicTools    json.RawMessage   `json:"dynamic_tools"`
	MCPServers      []string          `json:"mcp_servers"`
	SpawnAgents     bool              `json:"spawn_agents"`
	SpawnDepth      int32             `json:"spawn_depth"`
	SpawnMessageID  *int64            `json:"spawn_message_id,omitempty"`
	SpawnToolCallID *string           `json:"spawn_tool_call_id,omitempty"`
	SpawnState      store.SpawnState  `json:"spawn_state,omitempty"`
	Status          client.ChatStatus `json:"status"`
	LastError       json.RawMessage   `json:"last_error,omitempty"`
	CreatedAt       time.Time         `json:"created_at"`
	UpdatedAt       time.Time         `json:"updated_at"`
}

// Request is a structured request's line: its definition and outcome.
type Request struct {
	Type                 string               `json:"type"`
	ChatID               uuid.UUID            `json:"chat_id"`
	RequestID            uuid.UUID            `json:"request_id"`
	Name                 string               `json:"name"`
	Description          string               `json:"description"`
	Schema               json.RawMessage      `json:"schema"`
	Status               client.RequestStatus `json:"status"`
	Rejections           int32                `json:"rejections"`
	ValidationRejections int32                `json:"validation_rejections"`
	Steps                int32                `json:"steps"`
	Attempts             json.RawMessage      `json:"attempts"`
	ErrorCode            *client.ErrorCode    `json:"error_code,omitempty"`
	ErrorMessage         *string              `json:"error_message,omitempty"`
	ReceiptMessageID     *int64               `json:"receipt_message_id,omitempty"`
	TraceParent          string               `json:"trace_parent,omitempty"`
	CreatedAt            time.Time            `json:"created_at"`
	FinishedAt           *time.Time           `json:"finished_at,omitempty"`
}

// Message is a line of a chat's history, as stored (docs/codec.md):
// model-only rows, receipts and deleted rows included.
type Message struct {
	Type                string            `json:"type"`
	ChatID              uuid.UUID         `json:"chat_id"`
	ID                  int64             `json:"id"`
	Role                client.Role       `json:"role"`
	Kind                store.MessageKind `json:"kind"`
	Visibility          store.Visibility  `json:"visibility"`
	Content             json.RawMessage   `json:"content"`
	StructuredRequestID *uuid.UUID        `json:"structured_request_id,omitempty"`
	FinishReason        *string           `json:"finish_reason,omitempty"`
	Usage               json.RawMessage   `json:"usage,omitempty"`
	Compressed          bool              `json:"compressed"`
	Deleted             bool              `json:"deleted"`
	CreatedAt           time.Time         `json:"created_at"`
}

// Queued is a queued message's line.
type Queued struct {
	Type                string          `json:"type"`
	ChatID              uuid.UUID       `json:"chat_id"`
	ID                  int64           `json:"id"`
	Content             json.RawMessage `json:"content"`
	StructuredRequestID *uuid.UUID      `json:"structured_request_id,omitempty"`
	CreatedAt           time.Time       `json:"created_at"`
}

// End is the last line: what the export holds.
type End struct {
	Type string `json:"type"`
	Counts
}

// Counts are what an export holds, or what an import wrote.
type Counts struct {
	Chats    int `json:"chats"`
	Requests int `json:"structured_requests"`
	Messages int `json:"messages"`
	Queued   int `json:"queued_messages"`
}

func (c *Counts) add(e store.ChatExport) {
	c.Chats++
	c.Requests += len(e.Requests)
	c.Messages += len(e.Messages)
	c.Queued += len(e.Queued)
}

func nullUUID(u uuid.NullUUID) *uuid.UUID {
	if !u.Valid {
		return nil
	}
	return &u.UUID
}

func fromNull(u *uuid.UUID) uuid.NullUUID {
	if u == nil {
		return uuid.NullUUID{}
	}
	return uuid.NullUUID{UUID: *u, Valid: true}
}

// lines are a chat's lines in export order.
func lines(e store.ChatExport) []any {
	c := e.Chat
	out := []any{Chat{Type: TypeChat, ID: c.ID, ParentChatID: nullUUID(c.ParentChatID), Title: c.Title, Model: c.Model,
		SystemPrompt: c.SystemPrompt, Mode: c.Mode, DynamicTools: c.DynamicTools, MCPServers: c.MCPServers,
		SpawnAgents: c.SpawnAgents, SpawnDepth: c.SpawnDepth, SpawnMessageID: c.SpawnMessageID, SpawnToolCallID: c.SpawnToolCallID,
		SpawnState: c.SpawnState, Status: c.Status, LastError: c.LastError, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}}
	for _, r := range e.Requests {
		out = append(out, Request{Type: TypeRequest, ChatID: c.ID, RequestID: r.RequestID, Name: r.Name, Description: r.Description,
			Schema: r.Schema, Status: r.Status, Rejections: r.Rejections, ValidationRejections: r.ValidationRejections, Steps: r.Steps,
			Attempts: r.Attempts, ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage, ReceiptMessageID: r.ReceiptMessageID,
			TraceParent: r.TraceParent, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt})
	}
	for _, m := range e.Messages {
		out = append(out, Message{Type: TypeMessage, ChatID: c.ID, ID: m.ID, Role: m.Role, Kind: m.Kind, Visibility: m.Visibility,
			Content: m.Content, StructuredRequestID: nullUUID(m.StructuredRequestID), FinishReason: m.FinishReason, Usage: m.Usage,
			Compressed: m.Compressed, Deleted: m.Deleted, CreatedAt: m.CreatedAt})
	}
	for _, q := range e.Queued {
		out = append(out, Queued{Type: TypeQueued, ChatID: c.ID, ID: q.ID, Content: q.Content,
			StructuredRequestID: nullUUID(q.StructuredRequestID), CreatedAt: q.CreatedAt})
	}
	return out
}
