package client

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"
)

// FinalizerName is the server-owned tool through which a structured request
// is answered: offered to the model, refused as a client tool's or an MCP
// server's name, and never answered by a client.
const FinalizerName = "coder_structured_output"

// ChatStatus is where a chat is in its life: the value of Chat.Status, of
// the chats.status column and of the runner's decisions alike.
type ChatStatus string

// Chat statuses.
const (
	StatusWaiting        ChatStatus = "waiting"
	StatusRunning        ChatStatus = "running"
	StatusRequiresAction ChatStatus = "requires_action"
	StatusInterrupting   ChatStatus = "interrupting"
	StatusError          ChatStatus = "error"
)

// ChatStatuses lists every ChatStatus; the chats.status CHECK constraint
// allows exactly these.
func ChatStatuses() []ChatStatus {
	return []ChatStatus{StatusWaiting, StatusRunning, StatusRequiresAction, StatusInterrupting, StatusError}
}

// Runnable reports whether a worker may own the chat (running or
// interrupting).
func (s ChatStatus) Runnable() bool { return s == StatusRunning || s == StatusInterrupting }

// Idle reports whether the chat waits for a user message (waiting or error).
func (s ChatStatus) Idle() bool { return s == StatusWaiting || s == StatusError }

// Word is the status as people read it, the same in the console and the
// CLI: an idle chat has finished its turn, an error is a turn that failed.
func (s ChatStatus) Word() string {
	switch s {
	case StatusWaiting:
		return "finished"
	case StatusError:
		return "failed"
	}
	return strings.ReplaceAll(string(s), "_", " ")
}

// RequestStatus is where a structured output request is: pending until its
// receipt commits one of the three terminal statuses.
type RequestStatus string

// Structured output statuses.
const (
	OutputPending   RequestStatus = "pending"
	OutputSucceeded RequestStatus = "succeeded"
	OutputFailed    RequestStatus = "failed"
	OutputCancelled RequestStatus = "cancelled"
)

// RequestStatuses lists every RequestStatus; the structured_requests.status
// CHECK constraint allows exactly these.
func RequestStatuses() []RequestStatus {
	return []RequestStatus{OutputPending, OutputSucceeded, OutputFailed, OutputCancelled}
}

// ErrorCode says why a structured output request failed or was cancelled,
// and why a chat's last turn failed.
type ErrorCode string

// Error codes of failed requests.
const (
	// CodeValidationExhausted: the repairs were spent on values that failed
	// the schema.
	CodeValidationExhausted ErrorCode = "validation_exhausted"
	// CodeNotProduced: the model never submitted a value.
	CodeNotProduced ErrorCode = "not_produced"
	// CodeConfiguration: the model, its tools or the schema cannot be used
	// as the server is configured now.
	CodeConfiguration ErrorCode = "configuration_error"
	// CodeProviderError: the model provider failed.
	CodeProviderError ErrorCode = "provider_error"
	// CodeRefused: the model refused, or its provider's filter stopped it.
	CodeRefused ErrorCode = "refused"
	// CodeHookFailed: no stop hook could vet the candidate.
	CodeHookFailed ErrorCode = "hook_failed"
)

// Error codes of cancelled requests.
const (
	// CodeInterrupted: the turn was interrupted.
	CodeInterrupted ErrorCode = "interrupted"
	// CodeQueueDeleted: the queued message that asked for it was deleted.
	CodeQueueDeleted ErrorCode = "queue_deleted"
	// CodeSuperseded: the message that asked for it was edited.
	CodeSuperseded ErrorCode = "superseded"
	// CodeChatDeleted: its chat was deleted (by its owner, by retention or
	// with its user).
	CodeChatDeleted ErrorCode = "chat_deleted"
)

// ErrorCodes lists every ErrorCode; the structured_requests.error_code CHECK
// constraint allows exactly these.
func ErrorCodes() []ErrorCode {
	return []ErrorCode{CodeValidationExhausted, CodeNotProduced, CodeConfiguration, CodeProviderError,
		CodeRefused, CodeHookFailed, CodeInterrupted, CodeQueueDeleted, CodeSuperseded, CodeChatDeleted}
}

// ChatMode says how the agent works in a chat.
type ChatMode string

// Chat modes.
const (
	ModeNormal ChatMode = "normal"
	ModePlan   ChatMode = "plan"
	ModeChild  ChatMode = "child"
)

// ChatModes lists every ChatMode; the chats.mode CHECK constraint allows
// exactly these.
func ChatModes() []ChatMode { return []ChatMode{ModeNormal, ModePlan, ModeChild} }

// Scope is what a token may do. A route needs one scope; a token holds a
// set of them.
type Scope string

// Token scopes.
const (
	// ScopeRead: the GET routes and event streams of the caller's chats.
	ScopeRead Scope = "read"
	// ScopeWrite: everything else a user does to their chats (create, send,
	// edit, interrupt, ...). A write token can read too.
	ScopeWrite Scope = "write"
	// ScopeAdmin: the token and user API (/api/v1/tokens, /api/v1/users).
	ScopeAdmin Scope = "admin"
)

// Scopes lists every Scope; the api_tokens.scopes CHECK constraint allows
// exactly these.
func Scopes() []Scope { return []Scope{ScopeRead, ScopeWrite, ScopeAdmin} }

// Role is who wrote a message.
type Role string

// Message roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Roles lists every Role; the chat_messages.role CHECK constraint allows
// exactly these.
func Roles() []Role { return []Role{RoleSystem, RoleUser, RoleAssistant, RoleTool} }

// Chat is a conversation owned by one user.
type Chat struct {
	ID     uuid.UUID  `json:"id"`
	Title  string     `json:"title"`
	Status ChatStatus `json:"status"`
	Model  string     `json:"model"`
	// Mode is normal, plan or child.
	Mode         ChatMode   `json:"mode"`
	ParentChatID *uuid.UUID `json:"parent_chat_id,omitempty"`
	// ParentToolCallID is the parent's spawn_agent call that spawned the
	// chat (set on a spawned child chat).
	ParentToolCallID *string `json:"parent_tool_call_id,omitempty"`
	// SpawnAgents: the chat may spawn child chats with spawn_agent.
	SpawnAgents bool `json:"spawn_agents,omitempty"`
	// SpawnDepth is how many spawns deep the chat is (0 for a chat
	// created through the API).
	SpawnDepth int `json:"spawn_depth,omitempty"`
	// MCPServers are the MCP servers the chat opted into at creation.
	MCPServers []string `json:"mcp_servers,omitempty"`
	// PendingToolCalls are the client tool calls to answer while the chat
	// is requires_action.
	PendingToolCalls []ToolCall `json:"pending_tool_calls,omitempty"`
	// LastError says why the last turn failed while the chat is in error.
	LastError *StreamError `json:"last_error,omitempty"`
	// ProviderRetry is set while the running turn waits to call its model
	// provider again after a failed call; cleared once a step is
	// committed or the turn ends.
	ProviderRetry *ProviderRetry `json:"provider_retry,omitempty"`
	CreatedAt     time.Time      `json:"created_at"`
	UpdatedAt     time.Time      `json:"updated_at"`
}

// ProviderRetry is a provider call that failed and will be made again: the
// chat's provider_retry field and the stream's provider_retry event.
type ProviderRetry struct {
	// Attempt is the attempt that failed, from 1; MaxAttempts the last one
	// chatd makes before the turn fails.
	Attempt     int `json:"attempt"`
	MaxAttempts int `json:"max_attempts"`
	// NextTryAt is when the next attempt starts.
	NextTryAt time.Time `json:"next_try_at"`
	// LastError says why the attempt failed, in chatd's words (never the
	// provider's body).
	LastError string `json:"last_error"`
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
	Role      Role          `json:"role"`
	Content   []MessagePart `json:"content"`
	CreatedAt time.Time     `json:"created_at"`
	// StructuredOutputRequestID is set on the user message that asked for
	// structured output.
	StructuredOutputRequestID *uuid.UUID `json:"structured_output_request_id,omitempty"`
	// StructuredOutput is set only on a receipt: the terminal outcome of the
	// request it names.
	StructuredOutput *StructuredOutput `json:"structured_output,omitempty"`
	// Usage is set on an assistant message that a provider step produced:
	// the tokens the provider reported for that step.
	Usage *Usage `json:"usage,omitempty"`
}

// Usage counts the tokens of provider steps, by kind. A nil field (JSON
// null) is a figure the provider did not report, which is not zero. Input
// tokens exclude the cached ones: the prompt was InputTokens +
// CacheReadTokens + CacheWriteTokens. Reasoning tokens are part of the
// output tokens.
type Usage struct {
	InputTokens      *int64 `json:"input_tokens"`
	OutputTokens     *int64 `json:"output_tokens"`
	CacheReadTokens  *int64 `json:"cache_read_tokens"`
	CacheWriteTokens *int64 `json:"cache_write_tokens"`
	ReasoningTokens  *int64 `json:"reasoning_tokens"`
}

// StructuredOutput is the outcome carried by a receipt.
type StructuredOutput struct {
	RequestID uuid.UUID     `json:"request_id"`
	Status    RequestStatus `json:"status"`
	// Value is present (possibly JSON null) exactly when Status is succeeded.
	Value json.RawMessage        `json:"value,omitempty"`
	Error *StructuredOutputError `json:"error,omitempty"`
	// Usage sums the tokens of every provider step the request governed,
	// repairs included (absent on receipts written before chatd recorded
	// usage).
	Usage *Usage `json:"usage,omitempty"`
}

// StructuredOutputError explains a failed or cancelled request.
type StructuredOutputError struct {
	Code ErrorCode `json:"code"`
	// Message is the reason in one sentence, for people; for
	// validation_exhausted and not_produced it says how many attempts were
	// rejected and what the last did wrong.
	Message string `json:"message"`
	// Attempts are the request's rejected attempts, in order; set on a
	// failed receipt that had any. The lookup (StructuredOutputResult)
	// lists them as its own Attempts instead, never here.
	Attempts []Attempt `json:"attempts,omitempty"`
}

// Attempt is one rejected attempt at a structured request's result: a
// finalization batch the server refused, with why.
type Attempt struct {
	// Attempt numbers the request's rejected attempts from 1.
	Attempt int `json:"attempt"`
	// Reason is the kind of rejection.
	Reason AttemptReason `json:"reason"`
	// Errors are the first AttemptMaxErrors errors.
	Errors []AttemptError `json:"errors"`
	// ErrorsTotal counts all the errors found; Truncated says it is more
	// than Errors holds.
	ErrorsTotal int  `json:"errors_total"`
	Truncated   bool `json:"truncated"`
}

// AttemptMaxErrors bounds Attempt.Errors.
const AttemptMaxErrors = 20

// AttemptError is one reason an attempt was rejected: a JSON Schema
// keyword the value failed at InstancePath (a JSON Pointer into the value,
// "" for the whole value), or a code for an attempt refused before
// validation.
type AttemptError struct {
	InstancePath string `json:"instance_path"`
	Keyword      string `json:"keyword"`
	Message      string `json:"message"`
}

// AttemptReason says why an attempt was rejected.
type AttemptReason string

const (
	// AttemptInvalidValue: the value failed the schema (keywords are the
	// schema's, or a code for a value refused before validation).
	AttemptInvalidValue AttemptReason = "invalid_value"
	// AttemptInvalidArguments: the finalizer's arguments were not
	// {"output": <value>} in acceptable JSON.
	AttemptInvalidArguments AttemptReason = "invalid_arguments"
	// AttemptTextOnly: the model ended its step without calling the
	// finalizer.
	AttemptTextOnly AttemptReason = "text_only"
	// AttemptIneligibleStep: the step ended by length, filter or refusal,
	// so its arguments may be incomplete.
	AttemptIneligibleStep AttemptReason = "ineligible_step"
	// AttemptInvalidBatch: the finalizer beside other calls, or twice.
	AttemptInvalidBatch AttemptReason = "invalid_batch"
	// AttemptProviderTools: the finalizer beside provider-executed tools.
	AttemptProviderTools AttemptReason = "provider_tools"
	// AttemptSchemaUnavailable: the stored schema could not be compiled.
	AttemptSchemaUnavailable AttemptReason = "schema_unavailable"
)

// AttemptReasons lists every AttemptReason.
func AttemptReasons() []AttemptReason {
	return []AttemptReason{AttemptInvalidValue, AttemptInvalidArguments, AttemptTextOnly, AttemptIneligibleStep,
		AttemptInvalidBatch, AttemptProviderTools, AttemptSchemaUnavailable}
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
	// Strict is accepted as true for requests written for OpenAI's
	// response_format, and changes nothing: chatd always validates the
	// result against the whole schema. False is refused.
	Strict bool `json:"strict,omitempty"`
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
	// MCPServers opts the chat into operator-configured MCP servers by
	// name (servers configured for all chats need no opt-in).
	MCPServers []string `json:"mcp_servers,omitempty"`
	// SpawnAgents opts the chat into the spawn_agent tool (when the
	// server enables it): the agent may start child chats.
	SpawnAgents bool `json:"spawn_agents,omitempty"`
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
	// Warnings list what the response_format schema holds that chatd
	// admitted but does not check; absent when there is nothing.
	Warnings []SchemaWarning `json:"warnings,omitempty"`
}

// SchemaWarning is one thing in a response_format schema that chatd
// admitted but does not check: an unknown keyword or format (an
// annotation, as the JSON Schema specification says), a key named as an
// annotation ("_format", "x-order", a comment), a keyword the document's
// dialect does not have, or a keyword beside a Draft-04/06/07 "$ref",
// which those dialects ignore. A typo is visible here.
type SchemaWarning struct {
	// Location is the JSON Pointer of the keyword in the schema.
	Location string `json:"location"`
	Keyword  string `json:"keyword"`
	Message  string `json:"message"`
}

// MaxSchemaWarnings bounds the warnings listed for one schema: the first
// ones, in document order.
const MaxSchemaWarnings = 32

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
	// Warnings: as CreateChatResponse.Warnings, for a format the edit set.
	Warnings []SchemaWarning `json:"warnings,omitempty"`
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
	// Warnings: as CreateChatResponse.Warnings.
	Warnings []SchemaWarning `json:"warnings,omitempty"`
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
	Status           RequestStatus          `json:"status"`
	Value            json.RawMessage        `json:"value,omitempty"`
	Error            *StructuredOutputError `json:"error,omitempty"`
	ReceiptMessageID *int64                 `json:"receipt_message_id,omitempty"`
	// Usage is the receipt's: the tokens of every provider step the
	// request governed, once terminal.
	Usage *Usage `json:"usage,omitempty"`
	// Attempts are the request's rejected attempts so far, whatever its
	// status: the repairs a succeeded request needed, or why a failed one
	// failed (the receipt's Error.Attempts, which the lookup's Error
	// leaves out).
	Attempts []Attempt `json:"attempts,omitempty"`
	// TraceID is the OpenTelemetry trace the request belongs to (its
	// admission, turn and webhook deliveries), when the server traces.
	TraceID string `json:"trace_id,omitempty"`
	// ProviderRetry is the chat's provider retry while the request is
	// pending (Chat.ProviderRetry).
	ProviderRetry *ProviderRetry `json:"provider_retry,omitempty"`
	// ChatDeleted is set once the request's chat was deleted: the lookup
	// then answers from its tombstone, with the outcome (status, error,
	// usage) but no value, receipt or attempts.
	ChatDeleted *ChatDeletion `json:"chat_deleted,omitempty"`
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

// StreamTicket answers POST /api/v1/chats/{chat}/stream-ticket: a
// single-use ticket to open the chat's stream without the Authorization
// header (?ticket=), as a browser's EventSource must.
type StreamTicket struct {
	Ticket    string    `json:"ticket"`
	ExpiresAt time.Time `json:"expires_at"`
}

// CreateTokenRequest is the body of POST /api/v1/tokens.
type CreateTokenRequest struct {
	User      string  `json:"user"`
	Scopes    []Scope `json:"scopes,omitempty"`
	ActAs     bool    `json:"act_as,omitempty"`
	ExpiresIn int64   `json:"expires_in,omitempty"`
}

// Token describes an API token; its secret is never shown again.
type Token struct {
	ID         uuid.UUID  `json:"id"`
	UserID     uuid.UUID  `json:"user_id"`
	User       string     `json:"user"`
	Scopes     []Scope    `json:"scopes"`
	ActAs      bool       `json:"act_as"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	Expired    bool       `json:"expired"`
}

// CreateTokenResponse is a new token: the secret, shown this once, and its
// description.
type CreateTokenResponse struct {
	Secret string `json:"secret"`
	Token  Token  `json:"token"`
}

// ListTokensResponse lists tokens (never their secrets).
type ListTokensResponse struct {
	Tokens []Token `json:"tokens"`
}

// User is a chatd user: named by an operator, or an identity provider's
// user (issuer and subject set).
type User struct {
	ID        uuid.UUID `json:"id"`
	Name      string    `json:"name"`
	Issuer    *string   `json:"issuer,omitempty"`
	Subject   *string   `json:"subject,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// ListUsersResponse is a page of users by name.
type ListUsersResponse struct {
	Users      []User `json:"users"`
	NextCursor string `json:"next_cursor,omitempty"`
}
