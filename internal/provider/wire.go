package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"

	"charm.land/fantasy"
)

// The wire APIs the observing transport understands.
const (
	apiChat      = "chat"      // Chat Completions (openai-chat, openai-compatible)
	apiResponses = "responses" // OpenAI Responses
	apiAnthropic = "anthropic" // Anthropic Messages
	apiGoogle    = "google"    // Gemini generateContent
)

// Observation records, from the raw server-sent events of one streaming
// provider call, the facts fantasy v0.41.2 does not report in its stream
// parts:
//
//   - Chat Completions: the real finish_reason (fantasy reports tool-calls
//     whenever a tool call exists, masking length and content_filter),
//     whether the stream ended properly, with a finish_reason or [DONE]
//     (fantasy reports a stream cut after a tool call started as a normal
//     tool-calls finish), and delta.refusal text (fantasy drops it).
//   - Responses: response.incomplete's reason (masked by tool-calls the same
//     way) and refusal content parts (dropped).
//   - Anthropic: the stop_reason word; fantasy maps "refusal" to
//     content-filter, and the observation tells the two apart.
//   - Gemini: the candidate's finishReason (MAX_TOKENS and the safety
//     reasons masked by tool-calls), whether the stream ended with one
//     (fantasy reports a stream cut after a function call as complete),
//     and a blocked prompt.
//
// The transport fills it while fantasy reads the body, on the goroutine
// that iterates the stream; read it with Verdict after the stream ends.
type Observation struct {
	mu       sync.Mutex
	api      string
	seen     bool
	terminal bool
	finish   string
	model    string // the answering model, as the first event naming it says
	refusal  strings.Builder
	usage    reported
}

type observationKey struct{}

// Observe returns a context under which the next streaming provider call
// made through a Registry's models is observed, and the observation.
func Observe(ctx context.Context) (context.Context, *Observation) {
	o := &Observation{}
	return context.WithValue(ctx, observationKey{}, o), o
}

// Verdict is an observation's correction of what fantasy reported.
type Verdict struct {
	// Seen says an event stream was observed at all; the rest is
	// meaningful only then.
	Seen bool
	// FinishReason, when not empty, replaces fantasy's finish reason
	// (length or content-filter hidden behind tool-calls).
	FinishReason fantasy.FinishReason
	// Refused says the model refused; Refusal is its text, if any.
	Refused bool
	Refusal string
	// Incomplete says the stream ended without its terminal signal.
	Incomplete bool
	// Raw is the provider's own finish word (finish_reason, the
	// incomplete reason or "completed", stop_reason).
	Raw string
	// Reported says which token figures the provider's usage object
	// carried (fantasy reports an absent figure as zero).
	Reported Reported
	// Model is the model the provider says answered ("" when it named
	// none): gen_ai.response.model.
	Model string
}

// Verdict interprets the observation.
func (o *Observation) Verdict() Verdict {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := Verdict{Seen: o.seen, Raw: o.finish, Refusal: o.refusal.String(), Incomplete: o.seen && !o.terminal, Reported: o.usage, Model: o.model}
	v.Refused = v.Refusal != ""
	switch o.api {
	case apiChat:
		switch o.finish {
		case "length":
			v.FinishReason = fantasy.FinishReasonLength
		case "content_filter":
			v.FinishReason = fantasy.FinishReasonContentFilter
		}
	case apiResponses:
		switch o.finish {
		case "max_output_tokens":
			v.FinishReason = fantasy.FinishReasonLength
		case "content_filter":
			v.FinishReason = fantasy.FinishReasonContentFilter
		}
	case apiAnthropic:
		if o.finish == "refusal" {
			v.Refused = true
		}
	case apiGoogle:
		switch o.finish {
		case "MAX_TOKENS":
			v.FinishReason = fantasy.FinishReasonLength
		case "SAFETY", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", geminiBlocked:
			v.FinishReason = fantasy.FinishReasonContentFilter
		}
	}
	return v
}

// geminiBlocked is the finish recorded for a blocked prompt (Gemini sends
// promptFeedback.blockReason and no candidate).
const geminiBlocked = "prompt blocked"

// transport observes the event streams of requests made under Observe,
// carries Responses reasoning items across steps (responsesModel), sends
// Gemini function declarations as parametersJsonSchema (geminiModel), and,
// for a provider without a configured key, removes the credentials a
// provider SDK took from its own environment variables.
type transport struct {
	base      http.RoundTripper
	api       string
	stripAuth bool
	log       *slog.Logger
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.stripAuth {
		req = req.Clone(req.Context())
		req.Header.Del("Authorization")
		req.Header.Del("X-Api-Key")
		req.Header.Del("X-Goog-Api-Key")
	}
	rp, _ := req.Context().Value(replayKey{}).(*replay)
	if t.api != apiResponses {
		rp = nil
	}
	gc, _ := req.Context().Value(geminiKey{}).(*geminiCall)
	if t.api != apiGoogle {
		gc = nil
	}
	var rewrite func([]byte) ([]byte, error)
	var failed string
	switch {
	case rp != nil && len(rp.inserts) > 0:
		// Sent as fantasy encoded it when this fails: the reasoning is
		// lost for this step, the call is not.
		rewrite, failed = rp.rewrite, "reasoning items not replayed"
	case gc != nil && len(gc.decls) > 0:
		rewrite, failed = gc.rewrite, "function declarations sent as fantasy encoded them"
	}
	if rewrite != nil && req.Body != nil {
		var err error
		if req, err = t.rewriteBody(req, rewrite, failed); err != nil {
			return nil, err
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp.StatusCode != http.StatusOK && gc != nil {
		gc.mu.Lock()
		gc.header = resp.Header.Clone()
		gc.mu.Unlock()
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	o, _ := req.Context().Value(observationKey{}).(*Observation)
	if o == nil && rp == nil && gc == nil {
		return resp, nil
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return resp, nil
	}
	var sinks []func([]byte)
	if o != nil {
		o.mu.Lock()
		o.api, o.seen, o.terminal, o.finish, o.usage = t.api, true, false, "", reported{}
		o.refusal.Reset()
		o.mu.Unlock()
		sinks = append(sinks, o.event)
	}
	if rp != nil {
		sinks = append(sinks, rp.event)
	}
	if gc != nil {
		sinks = append(sinks, gc.event)
	}
	resp.Body = &observedBody{ReadCloser: resp.Body, p: &sseParser{sinks: sinks}}
	return resp, nil
}

// rewriteBody sends req with its body rewritten; when the rewrite fails
// the body goes as it was, and the failure is logged.
func (t *transport) rewriteBody(req *http.Request, rewrite func([]byte) ([]byte, error), failed string) (*http.Request, error) {
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	if nb, err := rewrite(body); err != nil {
		t.log.Warn(failed, slog.String("error", err.Error()))
	} else {
		body = nb
	}
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return req, nil
}

type observedBody struct {
	io.ReadCloser
	p *sseParser
}

func (b *observedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.p.write(p[:n])
	}
	return n, err
}

// maxEventBytes bounds one buffered event; a longer one (a huge
// response.completed echo) is skipped, which loses nothing the observation
// needs from the shorter events.
const maxEventBytes = 8 << 20

// sseParser splits the byte stream into server-sent events.
type sseParser struct {
	sinks    []func(data []byte)
	line     []byte
	data     bytes.Buffer
	overflow bool
}

func (s *sseParser) write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.appendLine(p)
			return
		}
		s.appendLine(p[:i])
		s.endLine()
		p = p[i+1:]
	}
}

func (s *sseParser) appendLine(b []byte) {
	if len(s.line)+len(b) > maxEventBytes {
		s.overflow = true
		return
	}
	s.line = append(s.line, b...)
}

func (s *sseParser) endLine() {
	line := bytes.TrimSuffix(s.line, []byte("\r"))
	s.line = s.line[:0]
	switch {
	case len(line) == 0:
		if s.data.Len() > 0 && !s.overflow {
			for _, sink := range s.sinks {
				sink(s.data.Bytes())
			}
		}
		s.data.Reset()
		s.overflow = false
	case bytes.HasPrefix(line, []byte("data:")):
		v := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
		if s.data.Len()+len(v) > maxEventBytes {
			s.overflow = true
			return
		}
		if s.data.Len() > 0 {
			s.data.WriteByte('\n')
		}
		s.data.Write(v)
	}
}

// wireEvent holds the fields of interest of any of the four APIs' events.
// "delta" is a string on Responses and an object on Anthropic, so it stays
// raw.
type wireEvent struct {
	Type string `json:"type"`
	// Model is the model that answered: Chat Completions' chunks carry it
	// at the top, Responses in response, Anthropic in message_start's
	// message, Gemini as modelVersion.
	Model        string `json:"model"`
	ModelVersion string `json:"modelVersion"`
	Choices      []struct {
		FinishReason *string `json:"finish_reason"`
		Delta        struct {
			Refusal *string `json:"refusal"`
		} `json:"delta"`
	} `json:"choices"`
	Delta    json.RawMessage `json:"delta"`
	Refusal  string          `json:"refusal"`
	Usage    json.RawMessage `json:"usage"` // Chat Completions, Anthropic message_delta
	Response *struct {
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Usage json.RawMessage `json:"usage"`
		Model string          `json:"model"`
	} `json:"response"`
	Message *struct {
		Usage json.RawMessage `json:"usage"`
		Model string          `json:"model"`
	} `json:"message"` // Anthropic message_start
	Part *struct {
		Type    string `json:"type"`
		Refusal string `json:"refusal"`
	} `json:"part"`
	// Gemini
	Candidates []struct {
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata  json.RawMessage `json:"usageMetadata"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
}

// model is the answering model an event names, if any.
func (ev *wireEvent) model() string {
	switch {
	case ev.Model != "":
		return ev.Model
	case ev.ModelVersion != "":
		return ev.ModelVersion
	case ev.Response != nil && ev.Response.Model != "":
		return ev.Response.Model
	case ev.Message != nil:
		return ev.Message.Model
	}
	return ""
}

func (o *Observation) event(data []byte) {
	if bytes.Equal(data, []byte("[DONE]")) {
		// The end marker of Chat Completions: the stream was not cut, even
		// from a compatible server that sent no finish_reason.
		o.mu.Lock()
		o.terminal = true
		o.mu.Unlock()
		return
	}
	if o.api == apiChat && o.knowsModel() && !chatChunkTells(data) {
		// Most chunks carry a delta and nothing the observation keeps:
		// no finish, no refusal, no usage (which a chunk without one
		// resets, as fantasy does).
		o.mu.Lock()
		o.usage = reported{}
		o.mu.Unlock()
		return
	}
	o.decode(data)
}

// decode reads an event in full.
func (o *Observation) decode(data []byte) {
	var ev wireEvent
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.model == "" {
		o.model = ev.model()
	}
	switch o.api {
	case apiChat:
		o.chatEvent(&ev)
	case apiResponses:
		o.responsesEvent(&ev)
	case apiAnthropic:
		o.anthropicEvent(&ev)
	case apiGoogle:
		o.googleEvent(&ev)
	}
}

// The per-API readers below run with o.mu held.

func (o *Observation) chatEvent(ev *wireEvent) {
	// fantasy takes the usage of the last chunk (a chunk without one
	// resets it), and only when total_tokens is not zero.
	o.usage = chatUsage(ev.Usage)
	for _, c := range ev.Choices {
		if c.FinishReason != nil && *c.FinishReason != "" {
			o.finish, o.terminal = *c.FinishReason, true
		}
		if c.Delta.Refusal != nil {
			o.refusal.WriteString(*c.Delta.Refusal)
		}
	}
}

func (o *Observation) responsesEvent(ev *wireEvent) {
	switch ev.Type {
	case "response.refusal.delta":
		var d string
		if json.Unmarshal(ev.Delta, &d) == nil {
			o.refusal.WriteString(d)
		}
	case "response.refusal.done":
		if o.refusal.Len() == 0 {
			o.refusal.WriteString(ev.Refusal)
		}
	case "response.content_part.done":
		if ev.Part != nil && ev.Part.Type == "refusal" && o.refusal.Len() == 0 {
			o.refusal.WriteString(ev.Part.Refusal)
		}
	case "response.completed":
		o.terminal, o.finish = true, "completed"
		if ev.Response != nil {
			o.usage = responsesUsage(ev.Response.Usage)
		}
	case "response.incomplete":
		o.terminal, o.finish = true, "incomplete"
		if ev.Response != nil && ev.Response.IncompleteDetails != nil {
			o.finish = ev.Response.IncompleteDetails.Reason
		}
		if ev.Response != nil {
			o.usage = responsesUsage(ev.Response.Usage)
		}
	}
}

func (o *Observation) anthropicEvent(ev *wireEvent) {
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			o.usage = anthropicUsage(ev.Message.Usage, reported{}, false)
		}
	case "message_delta":
		var d struct {
			StopReason *string `json:"stop_reason"`
		}
		if json.Unmarshal(ev.Delta, &d) == nil && d.StopReason != nil {
			o.finish = *d.StopReason
		}
		o.usage = anthropicUsage(ev.Usage, o.usage, true)
	case "message_stop":
		o.terminal = true
	}
}

// googleEvent: every event carries the usage so far; the last one counts.
// A stream ends with a candidate's finishReason (or a blocked prompt);
// fantasy reports one cut after a function call as a complete tool-calls
// step.
func (o *Observation) googleEvent(ev *wireEvent) {
	if len(ev.UsageMetadata) > 0 {
		o.usage = geminiReported(ev.UsageMetadata)
	}
	for _, c := range ev.Candidates {
		if c.FinishReason != "" {
			o.finish, o.terminal = c.FinishReason, true
		}
	}
	if ev.PromptFeedback != nil && ev.PromptFeedback.BlockReason != "" {
		o.finish, o.terminal = geminiBlocked, true
	}
}

// knowsModel reports whether the answering model is known (a later
// chunk's is not kept).
func (o *Observation) knowsModel() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.model != ""
}

// chatChunkKeys are the keys of a Chat Completions chunk the observation
// reads beyond the model.
var chatChunkKeys = [][]byte{[]byte(`"finish_reason"`), []byte(`"refusal"`), []byte(`"usage"`)}

// chatChunkTells reports whether a Chat Completions chunk may set one of
// chatChunkKeys: one of them with a value other than null. It errs on the
// side of yes (such a key inside a string value is decoded too).
func chatChunkTells(data []byte) bool {
	for _, k := range chatChunkKeys {
		for rest := data; ; {
			i := bytes.Index(rest, k)
			if i < 0 {
				break
			}
			rest = rest[i+len(k):]
			v := bytes.TrimLeft(rest, " \t\r\n")
			if len(v) == 0 || v[0] != ':' {
				continue
			}
			if !bytes.HasPrefix(bytes.TrimLeft(v[1:], " \t\r\n"), []byte("null")) {
				return true
			}
		}
	}
	return false
}
