package client

import (
	"encoding/json"

	"github.com/google/uuid"
)

// Stream event names (GET /api/v1/chats/{chat}/stream).
const (
	EventMessage        = "message"
	EventMessagePart    = "message_part"
	EventStatus         = "status"
	EventQueue          = "queue"
	EventActionRequired = "action_required"
	EventHistoryReset   = "history_reset"
	EventPreviewReset   = "preview_reset"
	EventError          = "error"
	// EventStructuredOutputPartial previews the value of a finalizer call
	// while the model writes it.
	EventStructuredOutputPartial = "structured_output_partial"
	// EventProviderRetry says the running turn's provider call failed
	// and will be made again (its data is a ProviderRetry).
	EventProviderRetry = "provider_retry"
	// EventChat is sent by the watch stream (GET /api/v1/chats/watch).
	EventChat = "chat"
)

// MessagePartEvent is a preview fragment of a step being generated. It is
// not a result: only committed messages (and their structured_output) are.
// Fragments of a generation are numbered from 1 and sent in order, each
// once; a stream that joins or reconnects while the step runs first gets
// the fragments it lacks coalesced, one event per part, covering FromSeq
// to Seq.
type MessagePartEvent struct {
	HistoryVersion    int64 `json:"history_version"`
	GenerationAttempt int32 `json:"generation_attempt"`
	Seq               int64 `json:"seq"`
	// FromSeq, on a catch-up's coalesced fragments, is the first one
	// the event covers (Seq the last); absent on a single fragment.
	FromSeq int64       `json:"from_seq,omitempty"`
	Role    Role        `json:"role"`
	Part    MessagePart `json:"part"`
}

// StructuredOutputPartial is the value a finalizer call's arguments show
// so far: the parse of their prefix's "output" member, closed strings and
// containers only (no half numbers or literals). It is never a result: the
// value may still fail validation and be repaired, and a preview_reset
// voids it. Only the receipt (a message with structured_output) is.
type StructuredOutputPartial struct {
	RequestID         uuid.UUID       `json:"request_id"`
	HistoryVersion    int64           `json:"history_version"`
	GenerationAttempt int32           `json:"generation_attempt"`
	Seq               int64           `json:"seq"`
	Value             json.RawMessage `json:"value"`
}

// PreviewReset says previews of earlier generations are void.
type PreviewReset struct {
	HistoryVersion    int64 `json:"history_version"`
	GenerationAttempt int32 `json:"generation_attempt"`
}

// QueueEvent carries the whole queue after a change.
type QueueEvent struct {
	QueuedMessages []QueuedMessage `json:"queued_messages"`
}

// ActionRequired lists the client tool calls the chat waits for.
type ActionRequired struct {
	ToolCalls []ToolCall `json:"tool_calls"`
}

// StreamError reports a failed turn or the end of a stream.
type StreamError struct {
	Code    ErrorCode `json:"code,omitempty"`
	Message string    `json:"message"`
}
