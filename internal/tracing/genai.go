package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// The attributes of the GenAI semantic conventions chatd sets, and its
// own (chatd.*).
const (
	OperationName  = attribute.Key("gen_ai.operation.name")
	ProviderName   = attribute.Key("gen_ai.provider.name")
	RequestModel   = attribute.Key("gen_ai.request.model")
	ResponseModel  = attribute.Key("gen_ai.response.model")
	InputTokens    = attribute.Key("gen_ai.usage.input_tokens")
	OutputTokens   = attribute.Key("gen_ai.usage.output_tokens")
	FinishReasons  = attribute.Key("gen_ai.response.finish_reasons")
	AgentName      = attribute.Key("gen_ai.agent.name")
	ConversationID = attribute.Key("gen_ai.conversation.id")
	ToolName       = attribute.Key("gen_ai.tool.name")
	ToolCallID     = attribute.Key("gen_ai.tool.call.id")
	ToolType       = attribute.Key("gen_ai.tool.type")
	ErrorType      = attribute.Key("error.type")
	// Content, set only with CaptureContent.
	OutputMessages    = attribute.Key("gen_ai.output.messages")
	ToolCallArguments = attribute.Key("gen_ai.tool.call.arguments")
	ToolCallResult    = attribute.Key("gen_ai.tool.call.result")

	ChatID    = attribute.Key("chatd.chat_id")
	RequestID = attribute.Key("chatd.request_id")
	WorkerID  = attribute.Key("chatd.worker_id")
	Attempt   = attribute.Key("chatd.attempt")
	Executor  = attribute.Key("chatd.tool.executor")
)

// Operation names (gen_ai.operation.name).
const (
	OpChat        = "chat"
	OpExecuteTool = "execute_tool"
	OpInvokeAgent = "invoke_agent"
)

// StartTool starts the span of one tool call, "execute_tool NAME": the
// executor is "server", "mcp", "client", "finalizer" or "spawn".
func StartTool(ctx context.Context, name, callID, executor string) (context.Context, trace.Span) {
	if !enabled.Load() {
		return ctx, noSpan
	}
	typ := "function"
	if executor == "mcp" {
		typ = "extension"
	}
	return tracer.Start(ctx, OpExecuteTool+" "+name, trace.WithAttributes(OperationName.String(OpExecuteTool),
		ToolName.String(name), ToolCallID.String(callID), ToolType.String(typ), Executor.String(executor)))
}

// Start starts an internal span named name when tracing is on.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !enabled.Load() {
		return ctx, noSpan
	}
	return tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// Content sets a content attribute on span when the operator opted in
// (CaptureContent); value is called only then.
func Content(span trace.Span, key attribute.Key, value func() string) {
	if captureContent.Load() && span.IsRecording() {
		span.SetAttributes(key.String(value()))
	}
}
