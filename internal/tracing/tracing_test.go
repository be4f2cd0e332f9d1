package tracing

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestSelect(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env     map[string]string
		want    Selection
		wantErr string
	}{
		{env: nil, want: Selection{}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: Selection{Exporter: "otlp", Protocol: "http/protobuf"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, want: Selection{Exporter: "otlp", Protocol: "http/protobuf"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, want: Selection{Exporter: "otlp", Protocol: "grpc"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
			want: Selection{Exporter: "otlp", Protocol: "http/protobuf"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: Selection{}},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, want: Selection{}},
		{env: map[string]string{"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}, want: Selection{CaptureContent: true}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: "OTEL_TRACES_EXPORTER"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{env: map[string]string{"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "yes"}, wantErr: "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"},
	} {
		got, err := Select(func(k string) string { return c.env[k] })
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: error %v, want one naming %s", c.env, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", c.env, err)
		case got != c.want:
			t.Errorf("%v: %+v, want %+v", c.env, got, c.want)
		}
	}
}

func TestLogHandlerAddsTraceIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewTextHandler(&buf, nil))).With(slog.String("k", "v"))
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	log.InfoContext(ctx, "traced")
	log.Info("untraced")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "trace_id=0af7651916cd43dd8448eb211c80319c span_id=b7ad6b7169203331") ||
		strings.Contains(lines[1], "trace_id") {
		t.Fatalf("log lines:\n%s", buf.String())
	}
}

func TestTraceID(t *testing.T) {
	t.Parallel()
	if got := TraceID("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"); got != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("TraceID = %q", got)
	}
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-b7ad6b7169203331-01"} {
		if got := TraceID(bad); got != "" {
			t.Fatalf("TraceID(%q) = %q, want none", bad, got)
		}
	}
}
