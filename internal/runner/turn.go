package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"charm.land/fantasy"
	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/provider"
	"github.com/chatd/chatd/internal/store"
)

// MaxRejections fails a structured request on its third rejected
// finalization batch: the first try plus two repairs.
const MaxRejections = 3

// turnRunner holds what one worker knows about the chat it runs between
// passes: only the partial output of a step that was cut short.
type turnRunner struct {
	w       *worker
	sub     *notify.Sub
	log     *slog.Logger
	partial []jsonb.Part
}

// pass reads the chat and performs one action. done reports that the chat
// is no longer this worker's to run.
func (t *turnRunner) pass(ctx context.Context, chatID uuid.UUID) (bool, error) {
	st := t.w.r.store
	turn, err := st.LoadTurn(ctx, chatID)
	if err != nil {
		return false, err
	}
	if !turn.Chat.WorkerID.Valid || turn.Chat.WorkerID.UUID != t.w.id {
		return true, nil
	}
	msgs, err := parseRows(turn.Prompt)
	if err != nil {
		return false, err
	}
	fence := store.Fence{ChatID: chatID, WorkerID: t.w.id, HistoryVersion: turn.Chat.HistoryVersion}
	a := action{t: t, turn: turn, msgs: msgs, fence: fence}

	switch turn.Chat.Status {
	case client.StatusInterrupting:
		return a.finishInterruption(ctx)
	case client.StatusRunning:
	default:
		return true, nil
	}
	t.partial = nil

	last := lastAssistant(msgs)
	if calls := unresolvedCalls(msgs); len(calls) > 0 {
		return a.runTools(ctx, last, calls)
	}
	req := turn.Request
	if req != nil && req.Candidate != nil {
		return a.finishWithCandidate(ctx)
	}
	if len(msgs) > 0 && msgs[len(msgs)-1].row.Role == client.RoleAssistant {
		if req == nil {
			return a.commit(ctx, store.Commit{End: store.EndTurn})
		}
		return a.rejectTextOnly(ctx)
	}
	if n := turn.Chat.GenerationAttempt; int(n) >= t.w.r.opts.MaxAttempts {
		// Every attempt at this point of the history was made and none
		// was committed: the step could not be stored, or the process died
		// on it each time. Asking the provider again would loop forever.
		a.t.log.Error("provider attempts spent without a committed step", slog.Int("attempts", int(n)))
		return a.fail(ctx, client.CodeProviderError, fmt.Sprintf("no answer of the model could be completed and stored in %d attempts", n), store.EndError)
	}
	if steps := a.steps(); steps >= t.w.r.opts.MaxSteps {
		if req == nil {
			return a.commit(ctx, store.Commit{End: store.EndTurn})
		}
		code := client.CodeNotProduced
		if req.ValidationRejections > 0 {
			code = client.CodeValidationExhausted
		}
		return a.fail(ctx, code, fmt.Sprintf("no valid result within the limit of %d steps", t.w.r.opts.MaxSteps), store.EndTurn)
	}
	return a.generate(ctx)
}

// action is one decision over one read of the chat.
type action struct {
	t     *turnRunner
	turn  store.Turn
	msgs  []parsed
	fence store.Fence
}

// commit applies c behind the action's fence; done when the chat is no
// longer ours (finished, waiting for the client).
func (a *action) commit(ctx context.Context, c store.Commit) (bool, error) {
	c.Fence = a.fence
	res, err := a.t.w.r.store.Apply(ctx, c)
	if err != nil {
		return false, err
	}
	mine := res.Chat.WorkerID.Valid && res.Chat.WorkerID.UUID == a.t.w.id
	return !mine || !res.Chat.Status.Runnable(), nil
}

func (a *action) requestID() uuid.NullUUID {
	if a.turn.Request == nil {
		return uuid.NullUUID{}
	}
	return uuid.NullUUID{UUID: a.turn.Request.RequestID, Valid: true}
}

// steps counts provider steps of the turn: the ledger's count for a
// structured request (it survives compaction), otherwise assistant rows since
// the latest user request.
func (a *action) steps() int {
	if a.turn.Request != nil {
		return int(a.turn.Request.Steps)
	}
	n := 0
	for i := len(a.msgs) - 1; i >= 0; i-- {
		m := a.msgs[i].row
		if m.UserInput() {
			break
		}
		if m.Role == client.RoleAssistant {
			n++
		}
	}
	return n
}

// fail ends the turn: a failed receipt for the governing request (if any)
// and the given end.
func (a *action) fail(ctx context.Context, code client.ErrorCode, message string, end store.End, extra ...store.NewMessage) (bool, error) {
	c := store.Commit{Messages: extra, End: end}
	if req := a.turn.Request; req != nil {
		c.Outcomes = []store.Outcome{{RequestID: req.RequestID, Status: client.OutputFailed, Code: code, Message: message}}
	}
	if end == store.EndError {
		c.LastError, _ = json.Marshal(client.StreamError{Code: code, Message: message})
	}
	return a.commit(ctx, c)
}

const textOnlyFeedback = "You ended your turn without calling " + FinalizerName + ". This request is complete only when you call " +
	FinalizerName + " with {\"output\": <value>} matching its schema. Call it now."

// rejectTextOnly counts a text-only ending as one rejection and asks again,
// or fails the request when the budget is spent.
func (a *action) rejectTextOnly(ctx context.Context) (bool, error) {
	req := a.turn.Request
	if req.Rejections+1 >= MaxRejections {
		code := client.CodeNotProduced
		if req.ValidationRejections > 0 {
			code = client.CodeValidationExhausted
		}
		c := store.Commit{
			Progress: &store.Progress{RequestID: req.RequestID, Rejections: 1},
			Outcomes: []store.Outcome{{RequestID: req.RequestID, Status: client.OutputFailed, Code: code,
				Message: "the model ended without submitting a valid result after 3 attempts"}},
			End: store.EndTurn,
		}
		return a.countRejection(a.commit(ctx, c))
	}
	return a.countRejection(a.commit(ctx, store.Commit{
		Messages: []store.NewMessage{{Role: client.RoleUser, Visibility: store.VisibleModel, Parts: []jsonb.Part{{Type: jsonb.PartHookContext, Text: textOnlyFeedback}},
			RequestID: a.requestID()}},
		Progress: &store.Progress{RequestID: req.RequestID, Rejections: 1},
	}))
}

// countRejection counts a committed text-only rejection.
func (a *action) countRejection(done bool, err error) (bool, error) {
	if err == nil {
		a.t.w.r.m.rejections.Inc(rejectTextOnly)
	}
	return done, err
}

// generate makes one provider step and commits it.
func (a *action) generate(ctx context.Context) (bool, error) {
	r := a.t.w.r
	chat := a.turn.Chat
	model, err := r.models.Model(ctx, chat.Model)
	if err != nil {
		a.t.log.Warn("model unavailable", slog.String("model", chat.Model), slog.String("error", r.models.Redact(err.Error())))
		return a.fail(ctx, client.CodeConfiguration, fmt.Sprintf("model %q is not available on this server", chat.Model), store.EndError)
	}
	req := a.turn.Request
	if req != nil {
		// Admission checked this too, but the configuration may have
		// changed since the request was accepted.
		if err := r.models.StructuredOutputSupported(chat.Model); err != nil {
			a.t.log.Warn("structured request on an incompatible model", slog.String("model", chat.Model), slog.String("error", err.Error()))
			return a.fail(ctx, client.CodeConfiguration, fmt.Sprintf("structured output is not available on model %q as configured now "+
				"(strict_tools is on and there is no per-tool override for the finalizer)", chat.Model), store.EndError)
		}
	}
	system := chat.SystemPrompt
	if chat.Mode == client.ModePlan {
		system = strings.TrimSpace(system + "\n\n" + planInstruction)
	}
	if done, compacted, err := a.maybeCompact(ctx, model, system); err != nil || compacted {
		return done, err
	}
	tools, err := clientTools(chat)
	if err != nil {
		return a.fail(ctx, client.CodeConfiguration, "the chat's client tools cannot be used", store.EndError)
	}
	tools = append(serverTools(r.opts.Tools), tools...)
	if req != nil {
		for _, t := range tools {
			if t.GetName() == FinalizerName {
				return a.fail(ctx, client.CodeConfiguration, "a client tool is named "+FinalizerName+", which structured output reserves", store.EndError)
			}
		}
		fin, err := finalizerTool(req)
		if err != nil {
			return a.fail(ctx, client.CodeConfiguration, "the stored schema cannot be used", store.EndError)
		}
		tools = append(tools, fin)
		system = strings.TrimSpace(system + "\n\n" + structuredInstruction(req))
	}

	attempt, err := r.store.RecordAttempt(ctx, a.fence)
	if err != nil {
		return false, err
	}
	auto := fantasy.ToolChoiceAuto
	call := fantasy.Call{Prompt: buildPrompt(system, a.msgs), Tools: tools, ProviderOptions: model.Options}
	if len(tools) > 0 {
		call.ToolChoice = &auto
	}
	if n := model.Config.MaxOutputTokens; n > 0 {
		call.MaxOutputTokens = &n
	}

	stepCtx, cancelStep := context.WithCancelCause(ctx)
	defer cancelStep(nil)
	stopWatch := a.watch(stepCtx, cancelStep)
	defer stopWatch()

	var seq int64
	start := time.Now()
	obsCtx, wire := provider.Observe(stepCtx)
	// A provider that stops sending (a stalled connection) would hold the
	// chat forever while the lease is renewed: the step is cut off after a
	// silence and retried like a transport error.
	silentCtx, cancelSilent := context.WithCancelCause(obsCtx)
	defer cancelSilent(nil)
	silence := time.AfterFunc(r.opts.SilenceTimeout, func() { cancelSilent(errProviderSilent) })
	res := streamStep(silentCtx, model.LM, call, func(d Delta) {
		silence.Reset(r.opts.SilenceTimeout)
		seq++
		d.HistoryVersion, d.Attempt, d.Seq = a.fence.HistoryVersion, attempt, seq
		r.opts.Preview.Delta(chat.ID, d)
	})
	silence.Stop()
	if res.Err != nil && errors.Is(context.Cause(silentCtx), errProviderSilent) && stepCtx.Err() == nil {
		res.Err = &fantasy.ProviderError{Title: "stream stalled", TransientError: true,
			Message: fmt.Sprintf("no data from the provider for %s", r.opts.SilenceTimeout)}
	}
	r.opts.Preview.Flush()
	v := wire.Verdict()
	res.correct(v)
	r.observeCall(chat.Model, "step", time.Since(start), res.Err, res.Err != nil && (errors.Is(context.Cause(stepCtx), errChatChanged) || ctx.Err() != nil))
	for _, w := range res.Warnings {
		a.t.log.Warn("provider warning", slog.String("type", string(w.Type)), slog.String("setting", w.Setting),
			slog.String("message", r.models.Redact(w.Message+" "+w.Details)))
	}

	if res.Err != nil {
		if cause := context.Cause(stepCtx); errors.Is(cause, errChatChanged) || ctx.Err() != nil {
			// Interrupted or edited: keep what was produced for an interruption.
			a.t.partial = res.Parts
			return false, nil
		}
		return a.providerError(ctx, attempt, res.Err)
	}
	a.t.log.Debug("provider step", slog.Int("attempt", int(attempt)), slog.String("finish_reason", string(res.FinishReason)),
		slog.String("wire_finish", v.Raw), slog.Bool("refused", res.Refused), slog.Duration("took", time.Since(start)))

	if res.Capped {
		a.t.log.Warn("provider step cut off at the output cap", slog.Int("attempt", int(attempt)),
			slog.Int("max_text_bytes", maxStepTextBytes), slog.Int("max_step_bytes", maxStepBytes))
	}
	usage, _ := json.Marshal(res.Usage)
	parts := res.Parts
	screenArgs(parts, req != nil)
	if req != nil && (res.Refused || res.FinishReason == fantasy.FinishReasonContentFilter) {
		// A refusal or filtered answer ends the request: it is not a
		// repairable mistake, and nothing of this step can be a candidate.
		msg := "the model refused to answer"
		if !res.Refused {
			msg = "the model provider's content filter stopped the answer"
		}
		a.fence.Attempt = &attempt
		return a.fail(ctx, client.CodeRefused, msg, store.EndTurn,
			store.NewMessage{Role: client.RoleAssistant, Parts: parts, RequestID: a.requestID(), FinishReason: finishReason(res), Usage: usage})
	}
	if len(parts) == 0 {
		parts = []jsonb.Part{} // an empty answer is still a (text-only) ending
	}
	c := store.Commit{
		Messages: []store.NewMessage{{Role: client.RoleAssistant, Parts: parts, RequestID: a.requestID(),
			FinishReason: finishReason(res), Usage: usage}},
	}
	if req != nil {
		c.Progress = &store.Progress{RequestID: req.RequestID, Steps: 1}
	}
	a.fence.Attempt = &attempt
	return a.commit(ctx, c)
}

// errChatChanged cancels a step whose chat moved (interrupt, edit).
var errChatChanged = errors.New("chat changed")

// errProviderSilent cuts off a step whose provider stopped sending.
var errProviderSilent = errors.New("provider silent")

// watch cancels the step when the chat's status, owner or history moves.
func (a *action) watch(ctx context.Context, cancel context.CancelCauseFunc) func() {
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-a.t.sub.C():
				a.t.sub.Next()
				// Never cancelled mid-flight: pgx would drop the connection
				// (and the pool open a new one) every time a step ended
				// during the read.
				c, err := a.t.w.r.store.LoadChat(context.WithoutCancel(ctx), a.fence.ChatID)
				if err != nil {
					continue
				}
				if c.Status != client.StatusRunning || c.HistoryVersion != a.fence.HistoryVersion ||
					!c.WorkerID.Valid || c.WorkerID.UUID != a.t.w.id {
					cancel(errChatChanged)
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// providerError retries transient failures with backoff within the attempt
// budget, waiting at least what the provider's Retry-After asks, and ends
// the turn on terminal ones. The stored message is chatd's own sentence for
// the status: provider bodies can carry the request, the schema or an
// echoed key, so none of their text reaches a receipt or last_error; the
// log gets the provider's message with configured keys redacted.
func (a *action) providerError(ctx context.Context, attempt int32, err error) (bool, error) {
	r := a.t.w.r
	var pe *fantasy.ProviderError
	unreachable := transportFailure(err)
	retryable := unreachable != "" || fantasy.IsTransportError(err) || errors.Is(err, context.DeadlineExceeded)
	status := 0
	var floor time.Duration
	if errors.As(err, &pe) {
		retryable = retryable || pe.IsRetryable()
		status = pe.StatusCode
		floor = retryAfter(pe.ResponseHeaders, time.Now())
	}
	a.t.log.Warn("provider error", slog.Int("attempt", int(attempt)), slog.Int("status", status),
		slog.Bool("retryable", retryable), slog.Duration("retry_after", floor), slog.String("error", r.models.Redact(err.Error())))
	if retryable && int(attempt) < r.opts.MaxAttempts {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(r.backoff(attempt, floor)):
		}
		return false, nil
	}
	msg := providerFailure(status)
	if unreachable != "" {
		msg = unreachable
	}
	if retryable {
		msg += fmt.Sprintf(" after %d attempts", attempt)
	}
	a.fence.Attempt = &attempt
	return a.fail(ctx, client.CodeProviderError, msg, store.EndError)
}

// transportFailure says, in a sentence a user can act on, that the provider
// could not be reached and why (connection refused or reset, a timeout, the
// connection closed before a response, an unknown host), naming the host
// and port only: never the path or query of the URL, which can hold a key.
// It returns "" for any other error. Such failures are retried: a provider
// that restarts refuses connections for a moment.
func transportFailure(err error) string {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return ""
	}
	host := "the configured address"
	if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
		host = u.Host
	}
	var dns *net.DNSError
	var errno syscall.Errno
	var reason string
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		reason = "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		reason = "connection reset"
	case errors.As(err, &dns):
		reason = "host not found"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		reason = "the connection closed before a response"
	case ue.Timeout():
		reason = "timed out"
	case errors.As(err, &errno):
		reason = errno.Error()
	default:
		var oe *net.OpError
		if !errors.As(err, &oe) {
			return "" // TLS, a malformed response...: not a transport failure to retry
		}
		reason = "network error"
	}
	return fmt.Sprintf("the model provider at %s could not be reached: %s", host, reason)
}

// providerFailure is the sanitized sentence for a failed provider call.
func providerFailure(status int) string {
	switch status {
	case 0:
		return "the model provider failed"
	case http.StatusBadRequest:
		return "the model provider rejected the request as invalid (HTTP 400)"
	case http.StatusUnauthorized:
		return "the model provider rejected the credentials (HTTP 401)"
	case http.StatusForbidden:
		return "the model provider denied access (HTTP 403)"
	case http.StatusNotFound:
		return "the model provider does not know the model or endpoint (HTTP 404)"
	case http.StatusRequestEntityTooLarge:
		return "the model provider rejected the request as too large (HTTP 413)"
	case http.StatusTooManyRequests:
		return "the model provider kept rate-limiting the request (HTTP 429)"
	}
	return fmt.Sprintf("the model provider failed (HTTP %d)", status)
}

// finishReason is the finish provenance stored with the step: fantasy's
// reason as corrected from the wire, or "refusal".
func finishReason(res stepResult) string {
	if res.Refused {
		return "refusal"
	}
	return string(res.FinishReason)
}

// finishInterruption keeps the partial output, closes dangling tool calls,
// cancels the governing request and lets the queue move on.
func (a *action) finishInterruption(ctx context.Context) (bool, error) {
	var msgs []store.NewMessage
	var kept []jsonb.Part
	for _, p := range a.t.partial {
		if p.Type == jsonb.PartText || p.Type == jsonb.PartReasoning {
			kept = append(kept, p)
		}
	}
	a.t.partial = nil
	if len(kept) > 0 {
		msgs = append(msgs, store.NewMessage{Role: client.RoleAssistant, Parts: kept, RequestID: a.requestID(), FinishReason: "interrupted"})
	}
	if calls := unresolvedCalls(a.msgs); len(calls) > 0 {
		var results []jsonb.Part
		for _, c := range calls {
			results = append(results, errorResult(c, "the turn was interrupted before this tool ran"))
		}
		msgs = append(msgs, store.NewMessage{Role: client.RoleTool, Parts: results, RequestID: a.requestID()})
	}
	c := store.Commit{Messages: msgs, End: store.EndTurn}
	a.fence.Statuses = []client.ChatStatus{client.StatusInterrupting}
	if req := a.turn.Request; req != nil {
		c.Outcomes = []store.Outcome{{RequestID: req.RequestID, Status: client.OutputCancelled, Code: client.CodeInterrupted,
			Message: "the turn was interrupted"}}
	}
	return a.commit(ctx, c)
}

func lastAssistant(msgs []parsed) *parsed {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].row.Role == client.RoleAssistant {
			return &msgs[i]
		}
	}
	return nil
}

// unresolvedCalls are the pending tool calls of the last assistant step.
func unresolvedCalls(msgs []parsed) []jsonb.Part {
	roles := make([]string, len(msgs))
	contents := make([][]jsonb.Part, len(msgs))
	for i, m := range msgs {
		roles[i], contents[i] = string(m.row.Role), m.parts
	}
	return jsonb.Unresolved(roles, contents)
}

func errorResult(call jsonb.Part, msg string) jsonb.Part {
	return jsonb.Part{Type: jsonb.PartToolResult, ToolCallID: call.ToolCallID, ToolName: call.ToolName, Result: jsonString(msg), IsError: true}
}

func textResult(call jsonb.Part, msg string) jsonb.Part {
	return jsonb.Part{Type: jsonb.PartToolResult, ToolCallID: call.ToolCallID, ToolName: call.ToolName, Result: jsonString(msg)}
}

// jsonString encodes s as a JSON string without HTML escaping.
func jsonString(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimRight(b.Bytes(), "\n")
}

// retryAfter reads how long the provider asked to wait: retry-after-ms
// (OpenAI) or Retry-After in seconds or as an HTTP date, header names
// matched case-insensitively (fantasy copies the SDK's header map, whose
// keys are canonical). At most 5 minutes.
func retryAfter(h map[string]string, now time.Time) time.Duration {
	var d time.Duration
	for k, v := range h {
		v = strings.TrimSpace(v)
		switch {
		case strings.EqualFold(k, "retry-after-ms"):
			if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e9 {
				d = max(d, time.Duration(ms*float64(time.Millisecond)))
			}
		case strings.EqualFold(k, "retry-after"):
			if secs, err := strconv.ParseFloat(v, 64); err == nil {
				if secs > 0 && secs < 1e6 {
					d = max(d, time.Duration(secs*float64(time.Second)))
				}
			} else if t, err := http.ParseTime(v); err == nil && t.After(now) {
				d = max(d, t.Sub(now))
			}
		}
	}
	return min(d, 5*time.Minute)
}
