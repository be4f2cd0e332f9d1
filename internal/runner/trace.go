package runner

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/tracing"
)

// turnSpan is the span of the turn a worker runs for one governing request
// (docs/operations.md#traces): "invoke_agent chatd", the child of the span
// that admitted the request (its stored traceparent), so the turn is in
// the request's trace wherever and whenever it runs — a parent, not a
// link, because the turn exists only for that request and one request has
// one trace from the client's span to its webhook. A plain turn (no
// request) starts a trace of its own. Each claim has its own turn span: a
// turn taken over after a crash continues the same trace with a new one.
type turnSpan struct {
	span   trace.Span
	key    uuid.UUID // the governing request (Nil: none)
	worker uuid.UUID
	base   *slog.Logger
}

// enter returns the context a pass on turn runs in, starting the turn's
// span when the governing request changed; t's logger then names it.
func (s *turnSpan) enter(ctx context.Context, turn *store.Turn, t *turnRunner) context.Context {
	if !tracing.Enabled() {
		return ctx
	}
	key, parent := uuid.Nil, ""
	if turn.Request != nil {
		key, parent = turn.Request.RequestID, turn.Request.TraceParent
	}
	if s.span == nil || key != s.key {
		s.end()
		attrs := []attribute.KeyValue{tracing.OperationName.String(tracing.OpInvokeAgent), tracing.AgentName.String("chatd"),
			tracing.ConversationID.String(turn.Chat.ID.String()), tracing.ChatID.String(turn.Chat.ID.String()),
			tracing.WorkerID.String(s.worker.String()), tracing.RequestModel.String(turn.Chat.Model)}
		if key != uuid.Nil {
			attrs = append(attrs, tracing.RequestID.String(key.String()))
		}
		_, s.span = tracing.Start(tracing.Resume(ctx, parent), tracing.OpInvokeAgent+" chatd", attrs...)
		s.key = key
		sc := s.span.SpanContext()
		t.log = s.base.With(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		if msgs, err := parseRows(turn.Prompt); err == nil {
			clientToolWaits(trace.ContextWithSpan(ctx, s.span), msgs, dynamicNames(turn.Chat))
		}
	}
	return trace.ContextWithSpan(ctx, s.span)
}

// end ends the turn's span, if any.
func (s *turnSpan) end() {
	if s.span != nil {
		s.span.End()
		s.span = nil
	}
}

// providerName is gen_ai.provider.name for a configured provider: the
// convention's word for the known APIs, the configured name for an
// OpenAI-compatible server.
func providerName(p config.Provider) string {
	switch p.Type {
	case config.TypeOpenAI, config.TypeOpenAIChat:
		return "openai"
	case config.TypeAnthropic:
		return "anthropic"
	case config.TypeGoogle:
		return "gcp.gemini"
	}
	return p.Name
}

// startStep starts the span of one provider step, "chat MODEL".
func (a *action) startStep(ctx context.Context, p *call, attempt int32) (context.Context, trace.Span) {
	if !tracing.Enabled() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return tracing.Tracer().Start(ctx, tracing.OpChat+" "+p.model.Config.Model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(tracing.OperationName.String(tracing.OpChat), tracing.ProviderName.String(providerName(p.model.Provider)),
			tracing.RequestModel.String(p.model.Config.Model), tracing.Attempt.Int(int(attempt))))
}

// endStep ends a step's span with its usage, finish reason and outcome.
func (a *action) endStep(span trace.Span, res stepResult, cut bool) {
	if !span.IsRecording() {
		return
	}
	defer span.End()
	switch {
	case cut:
		tracing.Fail(span, "cancelled", "the step was cut short (interrupt, edit or stop)")
		return
	case res.Err != nil:
		tracing.Fail(span, providerErrorType(res.Err), "the provider call failed")
		return
	}
	if res.Model != "" {
		span.SetAttributes(tracing.ResponseModel.String(res.Model))
	}
	if n := promptTokens(res.Tokens); n != nil {
		span.SetAttributes(tracing.InputTokens.Int64(*n))
	}
	if n := res.Tokens.OutputTokens; n != nil {
		span.SetAttributes(tracing.OutputTokens.Int64(*n))
	}
	span.SetAttributes(tracing.FinishReasons.StringSlice([]string{finishReason(res)}))
	tracing.Content(span, tracing.OutputMessages, func() string { return partsJSON(res.Parts) })
}

// retried records on the turn's span that a failed provider attempt will
// be retried after wait.
func retried(ctx context.Context, attempt int32, err error, wait time.Duration) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("gen_ai.retry", trace.WithAttributes(tracing.Attempt.Int(int(attempt)),
			tracing.ErrorType.String(providerErrorType(err)), attribute.Float64("chatd.retry.backoff_seconds", wait.Seconds())))
	}
}

// executor is who answers a call (chatd.tool.executor): a client's call
// has no span of its own here (clientToolWaits records its wait later).
func executor(req *store.Request, c jsonb.Part, isServer, isMCP, isClient bool) string {
	switch {
	case req != nil && c.ToolName == FinalizerName:
		return "finalizer"
	case c.ArgsRejected != "":
		return "screened"
	case c.ToolName == SpawnToolName:
		return "spawn"
	case isServer:
		return "server"
	case isMCP:
		return "mcp"
	case isClient:
		return "client"
	}
	return "unknown"
}

// startTool starts the span of one tool call; its arguments are content.
func startTool(ctx context.Context, c jsonb.Part, executor string) (context.Context, trace.Span) {
	if executor == "client" {
		return ctx, trace.SpanFromContext(context.Background())
	}
	ctx, span := tracing.StartTool(ctx, c.ToolName, c.ToolCallID, executor)
	tracing.Content(span, tracing.ToolCallArguments, func() string { return string(c.Args) })
	return ctx, span
}

// endTool ends a tool call's span with its result (content).
func endTool(span trace.Span, res jsonb.Part) {
	if !span.IsRecording() {
		return
	}
	if res.IsError {
		tracing.Fail(span, "tool_error", "the tool answered with an error")
	}
	tracing.Content(span, tracing.ToolCallResult, func() string { return partsJSON([]jsonb.Part{res}) })
	span.End()
}

// validated records a finalizer attempt's outcome on its span as an event:
// accepted, or rejected with the rejection's kind and the schema keywords
// that failed — never the value or the messages, which quote it.
func validated(span trace.Span, kind string, why attemptErrors) {
	if !span.IsRecording() {
		return
	}
	if kind == "" {
		span.AddEvent("chatd.validation.accepted")
		return
	}
	keywords := make([]string, 0, len(why.errors))
	for _, e := range why.errors {
		keywords = append(keywords, e.Keyword)
	}
	span.AddEvent("chatd.validation.rejected", trace.WithAttributes(attribute.String("chatd.rejection.kind", kind),
		attribute.Int("chatd.validation.errors", max(why.total, len(why.errors))), attribute.StringSlice("chatd.validation.keywords", keywords)))
	span.SetStatus(codes.Error, "rejected: "+kind)
}

// startCommit starts the span of a commit that writes receipts.
func startCommit(ctx context.Context, c store.Commit) (context.Context, trace.Span) {
	if len(c.Outcomes()) == 0 || !tracing.Enabled() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	ctx, span := tracing.Start(ctx, "chatd.receipt.commit")
	for _, o := range c.Outcomes() {
		span.AddEvent("chatd.receipt", trace.WithAttributes(tracing.RequestID.String(o.RequestID.String()),
			attribute.String("chatd.request.status", string(o.Status)), attribute.String("chatd.error.code", string(o.Code))))
	}
	return ctx, span
}

// endCommit ends a receipt commit's span.
func endCommit(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		tracing.Fail(span, "commit_failed", "the commit was refused (fence moved or database error)")
	}
	span.End()
}

// clientToolWaits records, when a turn resumes with the results of its
// client tools, one "execute_tool NAME" span per call: from the step that
// called it to the result's commit (the client's work and its wait).
func clientToolWaits(ctx context.Context, msgs []parsed, dynamic map[string]bool) {
	if !tracing.Enabled() || len(msgs) < 2 {
		return
	}
	results, step := msgs[len(msgs)-1], msgs[len(msgs)-2]
	if results.row.Role != client.RoleTool || step.row.Role != client.RoleAssistant {
		return
	}
	for _, c := range step.parts {
		if c.Type != jsonb.PartToolCall || !dynamic[c.ToolName] {
			continue
		}
		for _, r := range results.parts {
			if r.ToolCallID != c.ToolCallID {
				continue
			}
			_, span := tracing.Tracer().Start(ctx, tracing.OpExecuteTool+" "+c.ToolName, trace.WithTimestamp(step.row.CreatedAt),
				trace.WithAttributes(tracing.OperationName.String(tracing.OpExecuteTool), tracing.ToolName.String(c.ToolName),
					tracing.ToolCallID.String(c.ToolCallID), tracing.ToolType.String("function"), tracing.Executor.String("client")))
			tracing.Content(span, tracing.ToolCallArguments, func() string { return string(c.Args) })
			if r.IsError {
				tracing.Fail(span, "tool_error", "the client answered with an error")
			}
			tracing.Content(span, tracing.ToolCallResult, func() string { return partsJSON([]jsonb.Part{r}) })
			span.End(trace.WithTimestamp(results.row.CreatedAt))
		}
	}
}

func partsJSON(parts []jsonb.Part) string {
	b, _ := json.Marshal(parts)
	return string(b)
}
