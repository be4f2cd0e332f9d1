// Package tracing is chatd's OpenTelemetry tracing: the SDK set up from the
// standard OTEL_* environment (off, at no cost, unless an exporter is
// configured), the W3C trace context chatd stores with a request so that
// its turn, run later and maybe on another replica, continues the trace,
// and the small helpers the API, the runner and the webhook deliverer call
// at their seams (docs/operations.md#traces).
//
// Spans follow the OpenTelemetry GenAI semantic conventions. No prompt,
// completion, tool argument or result, or structured value is put in a span
// unless the operator opts in with
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (CaptureContent).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of chatd's spans.
const ScopeName = "github.com/chatd/chatd"

// enabled: Setup installed an exporting provider. Everything here checks
// it first, so that with tracing off a seam costs one atomic load.
var enabled atomic.Bool

// captureContent: the operator opted in to content in spans.
var captureContent atomic.Bool

// propagator is the W3C trace context (and baggage), whatever the global
// propagator is: chatd's stored traceparent and its webhooks' header are
// W3C by definition.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// noSpan is what the helpers return while tracing is off: ending it ends
// nothing (never the caller's span).
var noSpan = trace.SpanFromContext(context.Background())

// tracer is the global provider's tracer: a no-op until Setup installs one.
var tracer = otel.Tracer(ScopeName)

// Enabled reports whether spans are recorded and exported.
func Enabled() bool { return enabled.Load() }

// CaptureContent reports whether the operator opted in to prompts,
// completions, tool arguments and results, and values in spans
// (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true).
func CaptureContent() bool { return captureContent.Load() }

// Tracer is chatd's tracer (a no-op one while tracing is off).
func Tracer() trace.Tracer { return tracer }

// Tracing is the installed SDK, to flush and stop on shutdown.
type Tracing struct {
	tp *sdktrace.TracerProvider
	// Exporter is "otlp" with Protocol "grpc" or "http/protobuf", or ""
	// when tracing is off.
	Exporter, Protocol string
}

// String says what is exported: "off", or "otlp PROTOCOL".
func (t *Tracing) String() string {
	if t.Exporter == "" {
		return "off"
	}
	return t.Exporter + " " + t.Protocol
}

// Shutdown exports the spans still buffered and stops the exporter, within
// ctx. It is a no-op when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.tp == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Selection is what the environment asks for.
type Selection struct {
	// Exporter is "otlp", or "" (off).
	Exporter string
	// Protocol is the OTLP transport: "http/protobuf" (the default) or
	// "grpc".
	Protocol string
	// CaptureContent is the GenAI content opt-in.
	CaptureContent bool
}

// Select reads the standard variables: OTEL_SDK_DISABLED,
// OTEL_TRACES_EXPORTER (otlp or none), OTEL_EXPORTER_OTLP_ENDPOINT and
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (either turns the OTLP exporter on
// when OTEL_TRACES_EXPORTER is unset), OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
// and OTEL_EXPORTER_OTLP_PROTOCOL, and
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT. Unlike the
// specification's default (otlp), nothing configured means off: a server
// nobody pointed at a collector does not try to reach localhost:4318.
func Select(getenv func(string) string) (Selection, error) {
	var s Selection
	capture, err := boolVar(getenv, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
	if err != nil {
		return s, err
	}
	s.CaptureContent = capture
	disabled, err := boolVar(getenv, "OTEL_SDK_DISABLED")
	if err != nil || disabled {
		return s, err
	}
	exporters := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	if exporters == "" {
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return s, nil
		}
		exporters = "otlp"
	}
	for e := range strings.SplitSeq(exporters, ",") {
		switch e = strings.ToLower(strings.TrimSpace(e)); e {
		case "otlp":
			s.Exporter = "otlp"
		case "none", "":
		default:
			return s, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported (chatd exports traces with otlp, or none)", e)
		}
	}
	if s.Exporter == "" {
		return s, nil
	}
	s.Protocol = strings.ToLower(strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")))
	if s.Protocol == "" {
		s.Protocol = strings.ToLower(strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL")))
	}
	switch s.Protocol {
	case "":
		s.Protocol = "http/protobuf"
	case "http/protobuf", "grpc":
	default:
		return s, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not supported (http/protobuf or grpc)", s.Protocol)
	}
	return s, nil
}

func boolVar(getenv func(string) string, name string) (bool, error) {
	switch v := strings.ToLower(strings.TrimSpace(getenv(name))); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, fmt.Errorf("%s: %q is not true or false", name, v)
	}
}

// Setup installs the tracer provider the environment asks for (Select) as
// the global one, with the W3C propagator; the exporters read their own
// variables (endpoint, headers, timeout, TLS), the provider
// OTEL_TRACES_SAMPLER and OTEL_BSP_*, the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES. With nothing configured it installs nothing
// and returns a Tracing whose Shutdown does nothing.
func Setup(ctx context.Context, getenv func(string) string) (*Tracing, error) {
	sel, err := Select(getenv)
	if err != nil {
		return nil, err
	}
	captureContent.Store(sel.CaptureContent)
	if sel.Exporter == "" {
		return &Tracing{}, nil
	}
	var exp sdktrace.SpanExporter
	switch sel.Protocol {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", "chatd"), attribute.String("service.instance.id", uuid.NewString())}
	// Later detectors win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override chatd's defaults.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagator)
	enabled.Store(true)
	return &Tracing{tp: tp, Exporter: sel.Exporter, Protocol: sel.Protocol}, nil
}
