package mockllm

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"
)

// FinalizerTool is the name of chatd's server-side finalizer tool. Its
// parameters are {"type":"object","properties":{"output":<schema>},
// "required":["output"],"additionalProperties":false}.
const FinalizerTool = "coder_structured_output"

// Values of Options.Mode, which shapes unscripted answers.
const (
	ModeValid   = "valid"   // call the finalizer with a valid value (default, also "")
	ModeInvalid = "invalid" // call the finalizer with a value that violates the schema
	ModeText    = "text"    // answer with text only, never call the finalizer
)

// maxBody bounds request bodies; real prompts with tool schemas stay far below.
const maxBody = 32 << 20

// Options configures a Server. The zero value is a working unscripted server.
type Options struct {
	// Script, if set, is consumed one step per request.
	Script *Script
	// Scripts are named scripts: a request whose first user message
	// contains the marker "[script:NAME]" takes its steps from Scripts[NAME]
	// (each keeps its own position), so that one server can play several
	// conversations at once. Other requests use Script.
	Scripts map[string]*Script
	// Formats limits the wire formats served (FormatOpenAI, FormatResponses,
	// FormatAnthropic, FormatGemini); empty serves all four.
	Formats []string
	// Mode shapes unscripted answers: "", ModeValid, ModeInvalid or ModeText.
	Mode string
	// ChunkDelay is waited between stream chunks.
	ChunkDelay time.Duration
	// Latency is waited before every response.
	Latency time.Duration
	// StreamChunks, when positive, sends every streamed answer in that
	// many chunks, ChunkDelay apart, instead of event by event
	// (writeInChunks): with Latency, an answer then takes Latency +
	// (StreamChunks-1) × ChunkDelay however many events it has. A
	// non-streamed answer waits as long.
	StreamChunks int
	// Logger receives one line per request; nil discards.
	Logger *slog.Logger
	// BeforeRespond is a test hook called for every chat completion request
	// after it was decoded and recorded (so Requests already includes it)
	// and before a script step is taken or any byte is written. ctx is the
	// request's context, cancelled when the client goes away, so the hook
	// may block on it to hold a request in flight. A non-nil error is sent
	// as a 500 server_error with the error text as message, and no script
	// step is consumed. A client that retries 5xx responses runs the hook
	// once per attempt (the bare openai-go SDK retries twice by default;
	// fantasy turns that off and retries in its agent instead). It may be
	// called concurrently.
	BeforeRespond func(ctx context.Context, req *Request) error
	// BeforeChunk is a test hook called before stream chunk n (from 0) is
	// written; it may block (on ctx) to hold a response half-way. An error
	// ends the stream abruptly.
	BeforeChunk func(ctx context.Context, req *Request, n int) error
	// StepFor, if set, is asked after BeforeRespond for every chat
	// completion request; when it returns true its step answers the request
	// and no script step is consumed. Tests use it to answer by content
	// (e.g. a client tool call for one chat) whatever the order of requests.
	// It may be called concurrently.
	StepFor func(req *Request) (Step, bool)
}

// Server is the mock's http.Handler: a route per wire format served (see
// New), GET /v1/models and the /_mockllm/stats endpoints.
type Server struct {
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux

	mu       sync.Mutex
	requests []Request
	position map[string]int // index of each script's next step, by script name

	// signedReasoning are the reasoning texts answered as Chat Completions
	// reasoning_details: a conversation that comes back with one of them
	// must carry its signed entry (see checkSigned).
	signedReasoning map[string]bool

	released    chan struct{} // closed by Release: held requests go on
	releaseOnce sync.Once

	calls callStats // GET /_mockllm/stats
}

// New returns a Server; see Options.
func New(opts Options) *Server {
	s := &Server{opts: opts, log: opts.Logger, mux: http.NewServeMux(), position: map[string]int{}, signedReasoning: map[string]bool{},
		released: make(chan struct{})}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	switch opts.Mode {
	case "", ModeValid, ModeInvalid, ModeText:
	default:
		s.log.Warn("unknown mode, using valid", "mode", opts.Mode)
		s.opts.Mode = ModeValid
	}
	serve := func(f string) bool { return len(opts.Formats) == 0 || slices.Contains(opts.Formats, f) }
	// Clients are configured with a base URL either with or without /v1.
	for _, prefix := range []string{"/v1", ""} {
		if serve(FormatOpenAI) {
			s.mux.HandleFunc("POST "+prefix+"/chat/completions", s.handler(chatFormat{}))
		}
		if serve(FormatResponses) {
			s.mux.HandleFunc("POST "+prefix+"/responses", s.handler(responsesFormat{}))
		}
		if serve(FormatAnthropic) {
			s.mux.HandleFunc("POST "+prefix+"/messages", s.handler(anthropicFormat{}))
		}
		if serve(FormatGemini) && prefix == "" {
			s.mux.HandleFunc("POST /v1beta/models/{call}", s.serveGemini)
		}
		s.mux.HandleFunc("GET "+prefix+"/models", s.models)
		s.mux.HandleFunc("GET "+prefix+"/models/{model}", s.model)
	}
	s.mux.HandleFunc("GET /_mockllm/stats", s.serveStats)
	s.mux.HandleFunc("POST /_mockllm/stats/reset", s.serveStatsReset)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, ErrorSpec{
			Status:  http.StatusNotFound,
			Message: fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path),
			Code:    "unknown_url",
		})
	})
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Request-Id", "req_"+rand.Text())
	s.mux.ServeHTTP(w, r)
}

// Requests returns every request received so far, oldest first. The slice
// is a copy; the requests in it must not be modified.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Release lets every held request (a step with hold) go on, now and from
// then on; call it before shutting the server down.
func (s *Server) Release() { s.releaseOnce.Do(func() { close(s.released) }) }

// Reset forgets the recorded requests and rewinds the script.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
	clear(s.position)
}

// handler serves the completion route of format f.
func (s *Server) handler(f wireFormat) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.serve(f, w, r) }
}

// serve answers one completion request of format f: admit it, let
// BeforeRespond see it, choose its step, wait, plan the reply and write
// it, logging one line.
func (s *Server) serve(f wireFormat, w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer s.calls.begin()()
	req, sc, ok := s.admit(f, w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	log := s.log.With("format", f.name(), "model", req.Model, "stream", req.Stream, "tools", len(req.Tools))
	if req.Script != "" {
		log = log.With("script", req.Script)
	}
	if hook := s.opts.BeforeRespond; hook != nil {
		if err := hook(ctx, &req); err != nil {
			log.Info("request failed by hook", "error", err)
			f.writeError(w, ErrorSpec{Status: http.StatusInternalServerError, Message: err.Error()})
			return
		}
	}
	choice := s.chooseStep(&req, sc)
	st := choice.step
	log = log.With(choice.logArgs()...)
	if !s.wait(ctx, st, log) {
		return
	}
	if st.Error != nil {
		log.Info("scripted error", "status", cmp.Or(st.Error.Status, 500))
		f.writeError(w, *st.Error)
		return
	}
	rep, err := s.plan(&req, st, f.callID)
	if err != nil {
		// Our own failure: tell the client not to retry, it would fail again.
		log.Error("request cannot be answered", "error", err)
		no := false
		f.writeError(w, ErrorSpec{Status: http.StatusInternalServerError, Type: "mockllm_error", Message: err.Error(), ShouldRetry: &no})
		return
	}
	if f.name() == FormatOpenAI {
		s.rememberSigned(rep)
	}
	s.write(ctx, f, w, &req, rep, st)
	log.Info("answered", "finish_reason", rep.finish, "tool_calls", len(rep.calls), "refusal", rep.refusal != "",
		"text_bytes", len(rep.text), "truncated", rep.truncate, "duration_ms", time.Since(start).Milliseconds())
}

// admit reads, parses and checks a request, then records it with the name
// of its script; a request refused gets its 400 here and ok false.
func (s *Server) admit(f wireFormat, w http.ResponseWriter, r *http.Request) (req Request, sc *Script, ok bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		f.writeError(w, ErrorSpec{Status: http.StatusBadRequest, Message: "could not read the request body: " + err.Error()})
		return Request{}, nil, false
	}
	req, err = f.parse(body)
	if err == nil {
		err = f.check(&req)
	}
	if err == nil && f.name() == FormatOpenAI {
		err = s.checkSigned(&req)
	}
	if err != nil {
		s.log.Warn("bad request", "format", f.name(), "error", err)
		f.writeError(w, ErrorSpec{Status: http.StatusBadRequest, Message: err.Error()})
		return Request{}, nil, false
	}
	req.Format, req.Header = f.name(), r.Header.Clone()
	req.Script, sc = s.scriptFor(&req)
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	return req, sc, true
}

// wait holds a step with hold until Release, then waits Options.Latency
// plus the step's delay; false when the client went away meanwhile.
func (s *Server) wait(ctx context.Context, st Step, log *slog.Logger) bool {
	if st.Hold {
		log.Info("holding the request until the client goes away or mockllm stops")
		select {
		case <-s.released:
		case <-ctx.Done():
			log.Info("client gone while held")
			return false
		}
	}
	if !sleep(ctx, s.opts.Latency+time.Duration(st.DelayMS)*time.Millisecond) {
		log.Info("client gone before response")
		return false
	}
	return true
}

// write sends the reply: a stream (event by event, or in
// Options.StreamChunks chunks) or one JSON body.
func (s *Server) write(ctx context.Context, f wireFormat, w http.ResponseWriter, req *Request, rep reply, st Step) {
	chunkDelay := s.opts.ChunkDelay
	if st.ChunkDelayMS > 0 {
		chunkDelay = time.Duration(st.ChunkDelayMS) * time.Millisecond
	}
	if !req.Stream {
		if n := s.opts.StreamChunks; n > 1 && !sleep(ctx, time.Duration(n-1)*chunkDelay) {
			return
		}
		f.writeJSON(w, req, rep)
		return
	}
	if hook := s.opts.BeforeChunk; hook != nil {
		w = &chunkHook{ResponseWriter: w, before: func(n int) error { return hook(ctx, req, n) }}
	}
	if n := s.opts.StreamChunks; n > 0 {
		writeInChunks(ctx, w, n, chunkDelay, func(w http.ResponseWriter) { f.writeStream(ctx, w, req, rep, 0) })
		return
	}
	f.writeStream(ctx, w, req, rep, chunkDelay)
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{modelObject("mock-1")}})
}

// model answers for any id: the mock accepts every model name.
func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, modelObject(r.PathValue("model")))
}

func modelObject(id string) map[string]any {
	return map[string]any{"id": id, "object": "model", "created": 1700000000, "owned_by": "mockllm"}
}
