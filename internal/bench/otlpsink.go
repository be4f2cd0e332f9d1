package bench

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OTLPSink receives OTLP/HTTP trace exports and counts their spans. It
// decodes every request as a collector's receiver does, so that a traced
// chatd under test pays the whole cost of exporting; it keeps nothing.
type OTLPSink struct {
	spans    atomic.Int64
	requests atomic.Int64
}

// Spans is the number of spans received so far.
func (s *OTLPSink) Spans() int64 { return s.spans.Load() }

// Requests is the number of export requests received so far.
func (s *OTLPSink) Requests() int64 { return s.requests.Load() }

func (s *OTLPSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a protobuf POST to /v1/traces", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			s.spans.Add(int64(len(ss.Spans)))
		}
	}
	s.requests.Add(1)
	out, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// serveSink serves res.Sink on addr until stop is called.
func serveSink(addr string, res *Result) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("OTLP sink: %w", err)
	}
	res.Sink = &OTLPSink{}
	srv := &http.Server{Handler: res.Sink, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}
