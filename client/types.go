package client

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Chat statuses.
const (
	StatusWaiting        = "waiting"
	StatusRunning        = "running"
	StatusRequiresAction = "requires_action"
	StatusInterrupting   = "interrupting"
	StatusError          = "error"
)

// Structured output statuses.
const (
	OutputPending   = "pending"
	OutputSucceeded = "succeeded"
	OutputFailed    = "failed"
	OutputCancelled = "cancelled"
)

// Chat modes.
const (
	ModeNormal = "normal"
	ModePlan   = "plan"
	ModeChild  = "child"
)

// Chat is a conversation owned by one user.
type Chat struct {
	ID     uuid.UUID `json:"id"`
	Title  string    `json:"title"`
	Status string    `json:"status"`
	Model  string    `json:"model"`
	// Mode is normal, plan or child.
	Mode         string     `json:"mode"`
	ParentChatID *uuid.UUID `json:"parent_chat_id,omitempty"`
	// PendingToolCalls are the client tool calls to answer while the chat
	// is requires_action.
	PendingToolCalls []ToolCall `json:"pending_tool_calls,omitempty"`
	// LastError says why the last turn failed while the chat is in error.
	LastError *StreamError `json:"last_error,omitempty"`
	CreatedAt time.Time    `json:"created_at"`
	UpdatedAt time.Time    `json:"updated_at"`
}

// ToolCall is a pending call of a client-executed tool.
type ToolCall struct {
	ToolCallID string          `json:"tool_call_id"`
	ToolName   string          `json:"tool_name"`
	Args       json.RawMessage `json:"args"`
}

// DynamicTool is a client-executed tool declared on a chat.
type DynamicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// MessagePart is one element of a message's content.
type MessagePart struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`

	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolName   string          `json:"tool_name,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	// ArgsDelta is a fragment of a tool call's arguments, in previews only.
	ArgsDelta        string          `json:"args_delta,omitempty"`
	Result           json.RawMessage `json:"result,omitempty"`
	IsError          bool            `json:"is_error,omitempty"`
	ProviderExecuted bool            `json:"provider_executed,omitempty"`

	MediaType string `json:"media_type,omitempty"`
	Name      string `json:"name,omitempty"`
	Data      []byte `json:"data,omitempty"`

	SourceID string `json:"source_id,omitempty"`
	URL      string `json:"url,omitempty"`
	Title    string `json:"title,omitempty"`
}

// TextPart returns a text part.
func TextPart(s string) MessagePart { return MessagePart{Type: "text", Text: s} }

// ChatMessage is a committed message.
type ChatMessage struct {
	ID        int64         `json:"id"`
	ChatID    uuid.UUID     `json:"chat_id"`
	Role      string        `json:"role"`
	Content   []MessagePart `json:"content"`
	CreatedAt time.Time     `json:"created_at"`
	// StructuredOutputRequestID is set on the user message that asked for
	// structured output.
	StructuredOutputRequestID *uuid.UUID `json:"structured_output_request_id,omitempty"`
	// StructuredOutput is set only on a receipt: the terminal outcome of the
	// request it names.
	StructuredOutput *StructuredOutput `json:"structured_output,omitempty"`
}

// StructuredOutput is the outcome carried by a receipt.
type StructuredOutput struct {
	RequestID uuid.UUID `json:"request_id"`
	Status    string    `json:"status"`
	// Value is present (possibly JSON null) exactly when Status is succeeded.
	Value json.RawMessage        `json:"value,omitempty"`
	Error *StructuredOutputError `json:"error,omitempty"`
}

// StructuredOutputError explains a failed or cancelled request.
type StructuredOutputError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// QueuedMessage waits for the running turn to finish.
type QueuedMessage struct {
	ID                        int64         `json:"id"`
	ChatID                    uuid.UUID     `json:"chat_id"`
	Content                   []MessagePart `json:"content"`
	CreatedAt                 time.Time     `json:"created_at"`
	StructuredOutputRequestID *uuid.UUID    `json:"structured_output_request_id,omitempty"`
}

// ResponseFormat asks for structured output ("json_schema") or text.
type ResponseFormat struct {
	Type       string            `json:"type"`
	JSONSchema *JSONSchemaFormat `json:"json_schema,omitempty"`
}

// JSONSchemaFormat names and describes the output schema.
type JSONSchemaFormat struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema"`
}

// CreateChatRequest is the body of POST /api/v1/chats.
type CreateChatRequest struct {
	Model          string          `json:"model,omitempty"`
	SystemPrompt   string          `json:"system_prompt,omitempty"`
	Title          string          `json:"title,omitempty"`
	Content        []MessagePart   `json:"content"`
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	PlanMode       bool            `json:"plan_mode,omitempty"`
	// ParentChatID makes a child chat of one of the caller's chats.
	ParentChatID *uuid.UUID    `json:"parent_chat_id,omitempty"`
	DynamicTools []DynamicTool `json:"dynamic_tools,omitempty"`
}

// Busy behaviours of SendMessageRequest.
const (
	BusyQueue     = "queue"
	BusyInterrupt = "interrupt"
)

// CreateChatResponse answers POST /api/v1/chats.
type CreateChatResponse struct {
	Chat     Chat          `json:"chat"`
	Messages []ChatMessage `json:"messages"`
}

// SendMessageRequest is the body of POST /api/v1/chats/{chat}/messages.
type SendMessageRequest struct {
	Content        []MessagePart   `json:"content"`
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// BusyBehavior says what happens while a turn runs: queue (default)
	// or interrupt.
	BusyBehavior string `json:"busy_behavior,omitempty"`
	// PlanMode switches the chat's plan mode before the message is taken.
	PlanMode *bool `json:"plan_mode,omitempty"`
}

// UpdateChatRequest is the body of PATCH /api/v1/chats/{chat}.
type UpdateChatRequest struct {
	Title    *string `json:"title,omitempty"`
	PlanMode *bool   `json:"plan_mode,omitempty"`
}

// EditMessageRequest is the body of PATCH /api/v1/chats/{chat}/messages/{message}.
// An omitted or null ResponseFormat keeps the edited message's format,
// {"type":"text"} clears it, and a json_schema format replaces it.
type EditMessageRequest struct {
	Content        []MessagePart   `json:"content"`
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
}

// EditMessageResponse answers an edit.
type EditMessageResponse struct {
	// Message is the replacement.
	Message ChatMessage `json:"message"`
	// Messages are every client-visible row the edit inserted, in id order:
	// cancellation receipts of discarded requests, then the replacement.
	Messages          []ChatMessage `json:"messages"`
	DeletedMessageIDs []int64       `json:"deleted_message_ids"`
}

// DeleteQueuedResponse answers DELETE /api/v1/chats/{chat}/queue/{queued}.
type DeleteQueuedResponse struct {
	QueuedMessageID int64 `json:"queued_message_id"`
	// Messages holds the cancelled receipt of a structured queued request.
	Messages []ChatMessage `json:"messages"`
}

// ToolResultsRequest answers every pending client tool call.
type ToolResultsRequest struct {
	Results []ToolResult `json:"results"`
}

// ToolResult is the output of one client tool call (any JSON value).
type ToolResult struct {
	ToolCallID string          `json:"tool_call_id"`
	Output     json.RawMessage `json:"output"`
	IsError    bool            `json:"is_error,omitempty"`
}

// SendMessageResponse answers POST /api/v1/chats/{chat}/messages.
type SendMessageResponse struct {
	Message       *ChatMessage   `json:"message,omitempty"`
	QueuedMessage *QueuedMessage `json:"queued_message,omitempty"`
	Queued        bool           `json:"queued"`
}

// ListChatsResponse answers GET /api/v1/chats.
type ListChatsResponse struct {
	Chats []Chat `json:"chats"`
	// NextCursor, when set, fetches the next (older) page: pass it as
	// `cursor`. Absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// ListMessagesResponse answers GET /api/v1/chats/{chat}/messages.
type ListMessagesResponse struct {
	Messages       []ChatMessage   `json:"messages"`
	QueuedMessages []QueuedMessage `json:"queued_messages"`
	HasMore        bool            `json:"has_more"`
}

// StructuredOutputResult answers GET /api/v1/structured-outputs/{request_id}.
type StructuredOutputResult struct {
	RequestID        uuid.UUID              `json:"request_id"`
	ChatID           uuid.UUID              `json:"chat_id"`
	Status           string                 `json:"status"`
	Value            json.RawMessage        `json:"value,omitempty"`
	Error            *StructuredOutputError `json:"error,omitempty"`
	ReceiptMessageID *int64                 `json:"receipt_message_id,omitempty"`
}

// Error is the body of every error response.
type Error struct {
	Message     string            `json:"message"`
	Validations []ValidationError `json:"validations,omitempty"`
}

// ValidationError names a request field at fault.
type ValidationError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// Health answers GET /healthz ("ok") and GET /readyz ("ready").
type Health struct {
	Status string `json:"status"`
}
