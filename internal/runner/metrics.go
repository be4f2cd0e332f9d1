package runner

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"charm.land/fantasy"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/prom"
	"github.com/chatd/chatd/internal/tracing"
)

// Rejection kinds, the label of chatd_structured_rejections_total: the
// reasons of client.Attempt, whose constants are their one home.
const (
	rejectTextOnly      = string(client.AttemptTextOnly)          // the step ended with text, no finalizer call
	rejectArguments     = string(client.AttemptInvalidArguments)  // unsafe, malformed or not {"output": v}
	rejectIneligible    = string(client.AttemptIneligibleStep)    // the step ended by length, filter, ...
	rejectValue         = string(client.AttemptInvalidValue)      // the value failed the schema
	rejectBatch         = string(client.AttemptInvalidBatch)      // the finalizer beside other calls, or twice
	rejectProviderTools = string(client.AttemptProviderTools)     // the finalizer beside provider-executed tools
	rejectUnusable      = string(client.AttemptSchemaUnavailable) // the stored schema could not be compiled
)

// Outcomes of a provider call, the label of chatd_provider_call_duration_seconds.
const (
	callOK        = "ok"
	callError     = "error"
	callCancelled = "cancelled" // interrupted, edited, or the worker stopped
)

// runnerMetrics are the runner's instruments; all are no-ops without a
// registry.
type runnerMetrics struct {
	providerLatency *prometheus.HistogramVec
	providerErrors  *prometheus.CounterVec
	rejections      *prometheus.CounterVec
	yields          *prometheus.CounterVec
	tokens          *prometheus.CounterVec
	claimWait       prometheus.Observer
	// The GenAI semantic conventions' client metrics, in Prometheus form.
	genaiDuration *prometheus.HistogramVec
	genaiTokens   *prometheus.HistogramVec
}

// The GenAI conventions' explicit bucket boundaries.
var (
	genaiDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	genaiTokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
)

func (r *Runner) instrument(reg *prometheus.Registry) {
	r.instrumentRetention(reg)
	prom.GaugeFunc(reg, "chatd_workers", "Chats this process can run at once (--max-running).",
		func() float64 { return float64(r.opts.MaxRunning) })
	prom.GaugeFunc(reg, "chatd_chats_claimed", "Chats this process's workers hold a lease on right now.",
		func() float64 { return float64(r.claimed.Load()) })
	r.m.providerLatency = prom.Histogram(reg, "chatd_provider_call_duration_seconds",
		"Provider calls, from the request to the end of the response, by model, call (step: one streamed step; "+
			"summary: a compaction summary) and outcome (ok, error, cancelled).", prom.LatencyBuckets, "model", "call", "outcome")
	r.m.providerErrors = prom.Counter(reg, "chatd_provider_errors_total",
		"Failed provider calls by model and error type (transport, timeout, incomplete_stream, rate_limited, "+
			"server_error, auth, client_error, other); retried ones included.", "model", "type")
	r.m.rejections = prom.Counter(reg, "chatd_structured_rejections_total",
		"Rejected finalization batches of structured requests, by kind (text_only, invalid_arguments, ineligible_step, "+
			"invalid_value, invalid_batch, provider_tools, schema_unavailable); counted when committed.", "kind")
	r.m.tokens = prom.Counter(reg, "chatd_provider_tokens_total",
		"Tokens the provider reported for completed provider steps (committed or not), by model and kind (input: "+
			"not from the cache; cache_read; cache_write; output; reasoning: part of output). A figure the provider "+
			"did not report adds nothing.", "model", "kind")
	r.m.claimWait = prom.Histogram(reg, "chatd_claim_wait_seconds",
		"From a chat's last visible change (it became runnable) to its claim by this process: the wait for a running "+
			"slot. A chat handed over at its admission waited 0.", prom.LatencyBuckets).WithLabelValues()
	r.m.genaiDuration = prom.Histogram(reg, "gen_ai_client_operation_duration_seconds",
		"GenAI operation duration (OpenTelemetry GenAI semantic conventions): each provider step, from the request to the end "+
			"of its stream; error_type is set on failures.", genaiDurationBuckets,
		"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "gen_ai_response_model", "error_type")
	r.m.genaiTokens = prom.Histogram(reg, "gen_ai_client_token_usage",
		"Tokens used per GenAI operation (OpenTelemetry GenAI semantic conventions), by gen_ai_token_type input or output; "+
			"a figure the provider did not report is not observed.", genaiTokenBuckets,
		"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "gen_ai_response_model", "gen_ai_token_type")
	r.m.yields = prom.Counter(reg, "chatd_fair_yields_total",
		"Chats a busy worker handed back at a step boundary because another user's chat waited (fair claiming).")
}

// observeCall records one provider call of the chat's model; call is
// "step" or "summary".
func (a *action) observeCall(call string, took time.Duration, err error, cancelled bool) {
	model := a.turn.Chat.Model
	outcome := callOK
	switch {
	case cancelled:
		outcome = callCancelled
	case err != nil:
		outcome = callError
		a.m.providerErrors.WithLabelValues(model, providerErrorType(err)).Inc()
	}
	a.m.providerLatency.WithLabelValues(model, call, outcome).Observe(took.Seconds())
}

// observeGenAI records a provider step in the GenAI client metrics; a
// step cut short by an interrupt, edit or stop is not an operation that
// ended, and is left out.
func (a *action) observeGenAI(p *call, took time.Duration, res stepResult, cut bool) {
	if cut {
		return
	}
	labels := []string{tracing.OpChat, providerName(p.model.Provider), p.model.Config.Model, res.Model}
	errType := ""
	if res.Err != nil {
		errType = providerErrorType(res.Err)
	}
	a.m.genaiDuration.WithLabelValues(append(labels, errType)...).Observe(took.Seconds())
	if res.Err != nil {
		return
	}
	if n := promptTokens(res.Tokens); n != nil {
		a.m.genaiTokens.WithLabelValues(append(labels, "input")...).Observe(float64(*n))
	}
	if n := res.Tokens.OutputTokens; n != nil {
		a.m.genaiTokens.WithLabelValues(append(labels, "output")...).Observe(float64(*n))
	}
}

// promptTokens is gen_ai.usage.input_tokens: the whole prompt, the
// tokens read from or written to the provider's cache included (chatd's
// input_tokens counts only those that were neither); nil when the
// provider reported none of them.
func promptTokens(u client.Usage) *int64 {
	var n int64
	seen := false
	for _, p := range []*int64{u.InputTokens, u.CacheReadTokens, u.CacheWriteTokens} {
		if p != nil {
			n, seen = n+*p, true
		}
	}
	if !seen {
		return nil
	}
	return &n
}

// countTokens adds a completed step's reported figures to
// chatd_provider_tokens_total.
func (a *action) countTokens(u client.Usage) {
	for _, f := range []struct {
		kind string
		n    *int64
	}{{"input", u.InputTokens}, {"output", u.OutputTokens}, {"cache_read", u.CacheReadTokens},
		{"cache_write", u.CacheWriteTokens}, {"reasoning", u.ReasoningTokens}} {
		if f.n != nil {
			a.m.tokens.WithLabelValues(a.turn.Chat.Model, f.kind).Add(float64(*f.n))
		}
	}
}

// providerErrorType classifies a failed provider call.
func providerErrorType(err error) string {
	var pe *fantasy.ProviderError
	if errors.As(err, &pe) {
		switch s := pe.StatusCode; {
		case s == http.StatusTooManyRequests:
			return "rate_limited"
		case s == http.StatusRequestTimeout:
			return "timeout"
		case s == http.StatusUnauthorized || s == http.StatusForbidden:
			return "auth"
		case s >= 500:
			return "server_error"
		case s >= 400:
			return "client_error"
		case errors.Is(pe.Cause, io.ErrUnexpectedEOF):
			return "incomplete_stream"
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case fantasy.IsTransportError(err):
		return "transport"
	}
	return "other"
}
