package bench

import (
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestOTLPSinkCountsExportedSpans exports spans with the OpenTelemetry
// SDK's own OTLP/HTTP exporter and checks the sink decoded every one.
func TestOTLPSinkCountsExportedSpans(t *testing.T) {
	t.Parallel()
	sink := &OTLPSink{}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	exp, err := otlptracehttp.New(t.Context(), otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	tr := tp.Tracer("test")
	for range 5 {
		_, sp := tr.Start(t.Context(), "step")
		sp.End()
	}
	if err := tp.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := sink.Spans(); got != 5 {
		t.Fatalf("sink counted %d spans, want 5", got)
	}
	if sink.Requests() < 1 {
		t.Fatal("sink counted no export request")
	}
	rec := httptest.NewRecorder()
	sink.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/traces", strings.NewReader("{}")))
	if rec.Code != 400 {
		t.Fatalf("a JSON body got %d, want 400", rec.Code)
	}
}
