package tracing

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Traceparent is the W3C traceparent of ctx's span ("" when tracing is off
// or ctx has none): what chatd stores with a request it admits.
func Traceparent(ctx context.Context) string {
	if !enabled.Load() || !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// Resume returns ctx carrying traceparent as its remote parent: a turn, a
// webhook delivery or a spawned chat continues its request's trace.
// traceparent "" (a request admitted while tracing was off) or malformed
// leaves ctx as it is.
func Resume(ctx context.Context, traceparent string) context.Context {
	if !enabled.Load() || traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// TraceID is the trace id in traceparent, "" when there is none.
func TraceID(traceparent string) string {
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent}))
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// Inject sets the W3C headers of ctx's span (traceparent, tracestate,
// baggage) on h: outgoing calls carry the trace.
func Inject(ctx context.Context, h http.Header) {
	if enabled.Load() {
		propagator.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// StartHTTP starts the server span of an API request, the child of the
// caller's traceparent when it sent one. Its name is the method until
// EndHTTP knows the route. With tracing off it returns r and a no-op span.
func StartHTTP(r *http.Request) (*http.Request, trace.Span) {
	if !enabled.Load() {
		return r, noSpan
	}
	ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
	return r.WithContext(ctx), span
}

// EndHTTP ends an API request's server span: its name becomes
// "METHOD route", a 5xx marks it failed.
func EndHTTP(span trace.Span, method, route string, status int) {
	if !span.IsRecording() {
		return
	}
	if route != "" {
		span.SetName(method + " " + route)
		span.SetAttributes(attribute.String("http.route", route))
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// LogHandler adds the trace_id and span_id of a record's context to each
// record h handles: a log line found in a trace, and the trace of a line.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(as)}
}
func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.Handler.WithGroup(name)} }

// Fail marks span failed: error.type is kind, a low-cardinality word,
// and the status message is msg (chatd's own words, never a provider's
// body or a value).
func Fail(span trace.Span, kind, msg string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("error.type", kind))
	span.SetStatus(codes.Error, msg)
}

// StartWebhook starts the client span of one webhook delivery attempt,
// "POST webhook NAME", in ctx's trace (the request's).
func StartWebhook(ctx context.Context, name, requestID string, attempt int) (context.Context, trace.Span) {
	if !enabled.Load() {
		return ctx, noSpan
	}
	return tracer.Start(ctx, "POST webhook "+name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("http.request.method", http.MethodPost), attribute.String("chatd.webhook", name),
			RequestID.String(requestID), Attempt.Int(attempt)))
}

// EndWebhook ends a delivery's span: its status, and a failure (no
// answer or a non-2xx one) marks it failed.
func EndWebhook(span trace.Span, status int, err error) {
	if !span.IsRecording() {
		return
	}
	if status > 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	if err != nil {
		kind := "transport"
		if status > 0 {
			kind = strconv.Itoa(status)
		}
		Fail(span, kind, "the delivery failed")
	}
	span.End()
}
