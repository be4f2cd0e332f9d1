package store

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbgen"
	"github.com/chatd/chatd/internal/jsonb"
)

// The store's own row types. The generated dbgen rows stay inside this
// package: a column rename or a new sqlc option changes the converters
// below, not the store's callers.

// Chat is a chat as its callers see it.
type Chat struct {
	ID           uuid.UUID
	OwnerID      uuid.UUID
	ParentChatID uuid.NullUUID
	Title        string
	Model        string
	SystemPrompt string
	Mode         client.ChatMode
	DynamicTools json.RawMessage
	// MCPServers are the MCP servers the chat opted into (by name).
	MCPServers []string
	// SpawnAgents: the chat may spawn child chats (the spawn_agent tool).
	SpawnAgents bool
	// SpawnDepth is 0 for a chat created through the API, its parent's
	// plus one for a spawned child.
	SpawnDepth int32
	// A spawned child names the parent's step and tool call that spawned
	// it, and whether the parent still awaits its result.
	SpawnMessageID  *int64
	SpawnToolCallID *string
	SpawnState      SpawnState
	Status          client.ChatStatus
	// WorkerID owns the chat while it runs; LeaseExpiresAt ends that.
	WorkerID       uuid.NullUUID
	LeaseExpiresAt *time.Time
	// SnapshotVersion advances once per transaction that changed the chat;
	// HistoryVersion is the snapshot of the last model-relevant change.
	SnapshotVersion   int64
	HistoryVersion    int64
	GenerationAttempt int32
	// LastError is {"code","message"} while the chat is in error.
	LastError json.RawMessage
	// ProviderRetry is a client.ProviderRetry while the worker waits to
	// call the provider again (00016).
	ProviderRetry          json.RawMessage
	RequiresActionDeadline *time.Time
	CompactionRequestedAt  *time.Time
	CreatedAt              time.Time
	UpdatedAt              time.Time
}

// MessageKind separates ordinary history from receipts and controls.
type MessageKind string

// Message kinds.
const (
	// KindMessage is ordinary history.
	KindMessage MessageKind = "message"
	// KindReceipt is the terminal outcome of a structured request.
	KindReceipt MessageKind = "receipt"
	// KindControl is a client-visible marker never sent to the model.
	KindControl MessageKind = "control"
)

// Visibility says who sees a message.
type Visibility string

// Visibilities.
const (
	// VisibleBoth: clients and the model.
	VisibleBoth Visibility = "both"
	// VisibleUser: clients only.
	VisibleUser Visibility = "user"
	// VisibleModel: the model only.
	VisibleModel Visibility = "model"
)

// Message is a row of a chat's history.
type Message struct {
	ID                  int64
	ChatID              uuid.UUID
	Role                client.Role
	Kind                MessageKind
	Visibility          Visibility
	Content             json.RawMessage
	StructuredRequestID uuid.NullUUID
	FinishReason        *string
	Usage               json.RawMessage
	Compressed          bool
	Deleted             bool
	// Revision is the chat's snapshot_version at the row's last change.
	Revision  int64
	CreatedAt time.Time
}

// UserInput reports whether m is a real user request: client-visible user
// input, not a model-only feedback row.
func (m Message) UserInput() bool { return m.Role == client.RoleUser && m.Visibility != VisibleModel }

// QueuedMessage waits for the running turn to end.
type QueuedMessage struct {
	ID                  int64
	ChatID              uuid.UUID
	Content             json.RawMessage
	StructuredRequestID uuid.NullUUID
	CreatedAt           time.Time
}

// Request is a structured request's ledger row.
type Request struct {
	RequestID            uuid.UUID
	ChatID               uuid.UUID
	Name                 string
	Description          string
	Schema               json.RawMessage
	Status               client.RequestStatus
	Rejections           int32
	ValidationRejections int32
	Steps                int32
	// Candidate is the current validated value (nil: none; JSON null is a
	// value).
	Candidate           json.RawMessage
	CandidateToolCallID *string
	// Attempts is the JSON list of rejected attempts (client.Attempt), one
	// per rejection counted since migration 00009.
	Attempts         json.RawMessage
	ErrorCode        *client.ErrorCode
	ErrorMessage     *string
	ReceiptMessageID *int64
	CreatedAt        time.Time
	UpdatedAt        time.Time
	FinishedAt       *time.Time
	// AdmittedBy is the process that admitted the request
	// (Store.Tell); invalid when unknown.
	AdmittedBy uuid.NullUUID
	// TraceParent is the W3C trace context of the span that admitted the
	// request ("" when tracing was off): its turn continues that trace.
	TraceParent string
}

// User is an authenticated caller.
type User struct {
	ID   uuid.UUID
	Name string
	// TokenID is the token that authenticated the user (Authenticate).
	TokenID uuid.UUID
	// Scopes and ActAs are the token's (Authenticate).
	Scopes []client.Scope
	ActAs  bool
}

// Depths are the gauges /metrics reads from the database.
type Depths struct {
	QueuedMessages  int64
	RunnableChats   int64
	UnclaimedChats  int64
	PendingRequests int64
	// WebhookDeliveriesPending counts outbox rows not yet delivered or dead.
	WebhookDeliveriesPending int64
}

func chatFrom(c dbgen.Chat) Chat {
	return Chat{
		ID: c.ID, OwnerID: c.OwnerID, ParentChatID: c.ParentChatID, Title: c.Title, Model: c.Model,
		SystemPrompt: c.SystemPrompt, Mode: c.Mode, DynamicTools: c.DynamicTools, MCPServers: c.McpServers, Status: c.Status,
		WorkerID: c.WorkerID, LeaseExpiresAt: c.LeaseExpiresAt, SnapshotVersion: c.SnapshotVersion,
		HistoryVersion: c.HistoryVersion, GenerationAttempt: c.GenerationAttempt, LastError: c.LastError,
		ProviderRetry: c.ProviderRetry, RequiresActionDeadline: c.RequiresActionDeadline, CompactionRequestedAt: c.CompactionRequestedAt,
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
		SpawnAgents: c.SpawnAgents, SpawnDepth: c.SpawnDepth, SpawnMessageID: c.SpawnMessageID,
		SpawnToolCallID: c.SpawnToolCallID, SpawnState: SpawnState(ptrOr(c.SpawnState)),
	}
}

func ptrOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func messageFrom(m dbgen.ChatMessage) Message {
	return Message{
		ID: m.ID, ChatID: m.ChatID, Role: m.Role, Kind: MessageKind(m.Kind), Visibility: Visibility(m.Visibility),
		Content: m.Content, StructuredRequestID: m.StructuredRequestID, FinishReason: m.FinishReason, Usage: m.Usage,
		Compressed: m.Compressed, Deleted: m.Deleted, Revision: m.Revision, CreatedAt: m.CreatedAt,
	}
}

func queuedFrom(q dbgen.ChatQueuedMessage) QueuedMessage {
	return QueuedMessage{ID: q.ID, ChatID: q.ChatID, Content: q.Content, StructuredRequestID: q.StructuredRequestID, CreatedAt: q.CreatedAt}
}

// storedSchema reads a request's schema as its caller wrote it: stored
// through the JSONB-safe codec (queueRequest), so that U+0000 in it
// survives. jsonb always returns a JSON document, which decodes.
func storedSchema(stored json.RawMessage) json.RawMessage {
	if schema, err := jsonb.DecodeDocument(stored); err == nil {
		return schema
	}
	return stored
}

func requestFrom(r dbgen.StructuredRequest) Request {
	return Request{
		RequestID: r.RequestID, ChatID: r.ChatID, Name: r.Name, Description: r.Description, Schema: storedSchema(r.Schema),
		Status: r.Status, Rejections: r.Rejections, ValidationRejections: r.ValidationRejections, Steps: r.Steps,
		Candidate: r.Candidate, CandidateToolCallID: r.CandidateToolCallID, ErrorCode: r.ErrorCode,
		ErrorMessage: r.ErrorMessage, ReceiptMessageID: r.ReceiptMessageID, CreatedAt: r.CreatedAt,
		UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt, Attempts: r.Attempts, AdmittedBy: r.AdmittedBy,
		TraceParent: ptrOr(r.TraceParent),
	}
}

// mapRows converts a slice of generated rows.
func mapRows[R, T any](rows []R, conv func(R) T) []T {
	if rows == nil {
		return nil
	}
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = conv(r)
	}
	return out
}
