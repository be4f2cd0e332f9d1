package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"charm.land/fantasy"
	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/provider"
	"github.com/chatd/chatd/internal/store"
)

// generate makes one provider step: prepare the call, count its attempt,
// stream it, commit what it produced.
func (a *action) generate(ctx context.Context) (bool, error) {
	p, done, err := a.prepare(ctx)
	if p == nil {
		return done, err // it committed instead (a failure, or compaction)
	}
	attempt, err := a.attempt(ctx)
	if err != nil {
		return false, err
	}
	res, cut := a.stream(ctx, p, attempt)
	if cut {
		// Interrupted or edited: keep what was produced for an interruption.
		a.partial = res.Parts
		return false, nil
	}
	if res.Err != nil {
		return a.providerError(ctx, attempt, res.Err)
	}
	return a.commitStep(ctx, attempt, res)
}

// call is a provider call ready to make.
type call struct {
	model *provider.Model
	call  fantasy.Call
}

// prepare builds the step's call: model, system prompt, tools (the
// finalizer among them while a structured request governs), prompt. When
// the chat cannot be run as configured it commits the failure instead, and
// when the history is due for compaction it compacts; either way it returns
// no call.
func (a *action) prepare(ctx context.Context) (*call, bool, error) {
	chat := a.turn.Chat
	model, err := a.models.Model(ctx, chat.Model)
	if err != nil {
		a.log.Warn("model unavailable", slog.String("model", chat.Model), slog.String("error", a.models.Redact(err.Error())))
		done, err := a.fail(ctx, client.CodeConfiguration, fmt.Sprintf("model %q is not available on this server", chat.Model), store.EndError)
		return nil, done, err
	}
	req := a.turn.Request
	if req != nil {
		// Admission checked this too, but the configuration may have
		// changed since the request was accepted.
		if err := a.models.StructuredOutputSupported(chat.Model, req.Schema); err != nil {
			a.log.Warn("structured request on an incompatible model", slog.String("model", chat.Model), slog.String("error", err.Error()))
			done, err := a.fail(ctx, client.CodeConfiguration, fmt.Sprintf("structured output is not available on model %q as configured now "+
				"(see the server log: strict_tools is on, or the schema is one the model cannot carry)", chat.Model), store.EndError)
			return nil, done, err
		}
	}
	system := chat.SystemPrompt
	if chat.Mode == client.ModePlan {
		system = strings.TrimSpace(system + "\n\n" + planInstruction)
	}
	if done, compacted, err := a.maybeCompact(ctx, model, system); err != nil || compacted {
		return nil, done, err
	}
	tools, err := clientTools(chat)
	if err != nil {
		done, err := a.fail(ctx, client.CodeConfiguration, "the chat's client tools cannot be used", store.EndError)
		return nil, done, err
	}
	tools = append(serverTools(a.opts.Tools), tools...)
	tools = append(tools, mcpTools(a.opts.MCP.Tools(chat.Model, chat.MCPServers))...)
	if a.spawnOffered() {
		tools = append(tools, spawnTool())
	}
	if req != nil {
		for _, t := range tools {
			if t.GetName() == FinalizerName {
				done, err := a.fail(ctx, client.CodeConfiguration, "a client tool is named "+FinalizerName+", which structured output reserves", store.EndError)
				return nil, done, err
			}
		}
		fin, err := finalizerTool(req)
		if err != nil {
			done, err := a.fail(ctx, client.CodeConfiguration, "the stored schema cannot be used", store.EndError)
			return nil, done, err
		}
		tools = append(tools, fin)
		system = strings.TrimSpace(system + "\n\n" + structuredInstruction(req))
	}
	c := fantasy.Call{Prompt: buildPrompt(system, a.msgs), Tools: tools, ProviderOptions: model.Options}
	if len(tools) > 0 {
		auto := fantasy.ToolChoiceAuto
		c.ToolChoice = &auto
	}
	if n := model.Config.MaxOutputTokens; n > 0 {
		c.MaxOutputTokens = &n
	}
	return &call{model: model, call: c}, false, nil
}

// attempt is the provider attempt the step is: the one the claim or the
// last commit counted for this history, if unused, or one counted now. It
// is durable before the call, so a worker that crashes in every call still
// runs out of attempts.
func (a *action) attempt(ctx context.Context) (int32, error) {
	c, ready := a.turn.Chat, a.counted
	a.counted = counted{}
	if ready.ok && ready.history == c.HistoryVersion && ready.attempt == c.GenerationAttempt {
		return c.GenerationAttempt, nil
	}
	return a.store.RecordAttempt(ctx, a.fence)
}

// errChatChanged cancels a step whose chat moved (interrupt, edit).
var errChatChanged = errors.New("chat changed")

// errProviderSilent cuts off a step whose provider stopped sending.
var errProviderSilent = errors.New("provider silent")

// stream makes the call, relaying previews. cut reports that the step was
// cut short because the chat changed or the worker stops (res.Parts holds
// what it produced); otherwise res.Err is the provider's failure, if any.
func (a *action) stream(ctx context.Context, p *call, attempt int32) (res stepResult, cut bool) {
	ctx, span := a.startStep(ctx, p, attempt)
	defer func() { a.endStep(span, res, cut) }()
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
	silence := time.AfterFunc(a.opts.SilenceTimeout, func() { cancelSilent(errProviderSilent) })
	chatID := a.turn.Chat.ID
	emit := func(d Delta) {
		silence.Reset(a.opts.SilenceTimeout)
		seq++
		d.HistoryVersion, d.Attempt, d.Seq = a.fence.HistoryVersion, attempt, seq
		if d.Kind == "tool-input" && d.ToolName == FinalizerName && a.turn.Request != nil {
			d.RequestID = a.turn.Request.RequestID
		}
		a.opts.Preview.Delta(chatID, d)
		if d.RequestID != uuid.Nil && d.Text != "" {
			a.opts.TestSignals.FinalizerFragment.Wait(silentCtx)
		}
	}
	res = streamApart(silentCtx, p.model.LM, p.call, emit)
	silence.Stop()
	if res.Err != nil && errors.Is(context.Cause(silentCtx), errProviderSilent) && stepCtx.Err() == nil {
		res.Err = &fantasy.ProviderError{Title: "stream stalled", TransientError: true,
			Message: fmt.Sprintf("no data from the provider for %s", a.opts.SilenceTimeout)}
	}
	a.opts.Preview.Flush()
	v := wire.Verdict()
	res.correct(v)
	res.Model = v.Model
	if res.Err == nil {
		res.Tokens = provider.StepUsage(res.Usage, v)
		a.countTokens(res.Tokens)
	}
	cut = res.Err != nil && (errors.Is(context.Cause(stepCtx), errChatChanged) || ctx.Err() != nil)
	a.observeCall("step", time.Since(start), res.Err, cut)
	a.observeGenAI(p, time.Since(start), res, cut)
	for _, w := range res.Warnings {
		a.log.Warn("provider warning", slog.String("type", string(w.Type)), slog.String("setting", w.Setting),
			slog.String("message", a.models.Redact(w.Message+" "+w.Details)))
	}
	if res.Err == nil {
		a.log.Debug("provider step", slog.Int("attempt", int(attempt)), slog.String("finish_reason", string(res.FinishReason)),
			slog.String("wire_finish", v.Raw), slog.Bool("refused", res.Refused), slog.Duration("took", time.Since(start)))
	}
	return res, cut
}

// streamApart runs streamStep on a goroutine of its own and waits for it.
// The call's frames (fantasy's, the provider SDK's, net/http's) are deep:
// on top of the worker's they held a stack of 64 KiB for as long as the
// model took; apart they leave 32 KiB, and the worker's 16 KiB, once a
// collection has shrunk them (a chat waiting on its model).
func streamApart(ctx context.Context, lm fantasy.LanguageModel, call fantasy.Call, emit func(Delta)) stepResult {
	done := make(chan stepResult, 1)
	go func() { done <- streamStep(ctx, lm, call, emit) }()
	return <-done
}

// watch cancels the step when the chat's status, owner or history moves.
// The chat's own notifications say that something a client sees changed
// (an interrupt, an edit); each is checked with a read. The goroutine that
// reads starts with the step's first notification: most steps get none.
func (a *action) watch(ctx context.Context, cancel context.CancelCauseFunc) func() {
	done := make(chan struct{})
	var once sync.Once
	unwatch := a.sub.Watch(func() { once.Do(func() { go a.check(ctx, cancel, done) }) })
	return func() {
		unwatch()
		close(done)
	}
}

// check is watch's reader, until done is closed or ctx ends.
func (a *action) check(ctx context.Context, cancel context.CancelCauseFunc, done <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-a.sub.C():
			select {
			case <-done: // the step ended
				return
			default:
			}
			ev, _ := a.sub.Next()
			if ev.Snapshot > 0 && ev.Snapshot <= a.turn.Chat.SnapshotVersion {
				continue // what this action read already
			}
			// Never cancelled mid-flight: pgx would drop the connection
			// (and the pool open a new one) every time a step ended
			// during the read.
			c, err := a.store.LoadChat(context.WithoutCancel(ctx), a.fence.ChatID)
			if errors.Is(err, store.ErrNotFound) {
				cancel(errChatChanged) // deleted: nothing of the step can commit
				return
			}
			if err != nil {
				continue
			}
			if c.Status != client.StatusRunning || c.HistoryVersion != a.fence.HistoryVersion ||
				!c.WorkerID.Valid || c.WorkerID.UUID != a.worker {
				cancel(errChatChanged)
				return
			}
		}
	}
}

// commitStep commits a step. When the next pass would only answer it by
// the server's own rules — a text ending, or finalizer calls, which the
// server validates — that answer commits with the step: the step, its
// acknowledgement, the receipt and the end of the turn are one transaction.
// Calls of other tools commit with the step alone; the next pass runs them.
func (a *action) commitStep(ctx context.Context, attempt int32, res stepResult) (bool, error) {
	if res.Capped {
		a.log.Warn("provider step cut off at the output cap", slog.Int("attempt", int(attempt)),
			slog.Int("max_text_bytes", maxStepTextBytes), slog.Int("max_step_bytes", maxStepBytes))
	}
	usage, err := json.Marshal(res.Tokens)
	if err != nil {
		return false, err
	}
	parts := res.Parts
	req := a.turn.Request
	screenArgs(parts, req != nil)
	a.fence.Attempt = &attempt
	step := store.NewMessage{Role: client.RoleAssistant, Parts: parts, RequestID: a.requestID(), FinishReason: finishReason(res), Usage: usage}
	if req != nil && (res.Refused || res.FinishReason == fantasy.FinishReasonContentFilter) {
		// A refusal or filtered answer ends the request: it is not a
		// repairable mistake, and nothing of this step can be a candidate.
		msg := "the model refused to answer"
		if !res.Refused {
			msg = "the model provider's content filter stopped the answer"
		}
		return a.fail(ctx, client.CodeRefused, msg, store.EndTurn, step)
	}
	if len(step.Parts) == 0 {
		step.Parts = []jsonb.Part{} // an empty answer is still a (text-only) ending
	}
	c := store.Continue(store.Continuation{Messages: []store.NewMessage{step}}) // the next pass runs its calls
	if req != nil {
		c.Progress = &store.Progress{RequestID: req.RequestID, Steps: 1}
	}
	fr := step.FinishReason
	stepRow := parsed{row: store.Message{Role: client.RoleAssistant, FinishReason: &fr}, parts: step.Parts}
	calls := jsonb.Unresolved([]string{string(client.RoleAssistant)}, [][]jsonb.Part{step.Parts})
	kind := ""
	switch {
	case len(calls) == 0:
		var next store.Commit
		next, kind = a.textEnding()
		c = join(c, next)
	case onlyFinalizer(req, calls):
		var next store.Commit
		var err error
		if next, kind, err = a.toolsCommit(ctx, &stepRow, calls); err != nil {
			return false, err // not reached: the finalizer runs no server tool
		}
		c = join(c, next)
	}
	done, err := a.commit(ctx, c)
	a.countRejection(kind, err)
	return done, err
}

// join is a step's commit followed by the commit of what it leads to.
func join(step, next store.Commit) store.Commit {
	out := next
	out.Messages = append(step.Messages, next.Messages...)
	switch {
	case next.Progress == nil:
		out.Progress = step.Progress
	case step.Progress != nil:
		p := *next.Progress
		p.Steps += step.Progress.Steps
		out.Progress = &p
	}
	return out
}

// announceRetry records on the chat that the provider call of attempt
// failed with msg and is made again after delay, so that clients can say
// so (the chat's provider_retry, the stream's provider_retry event). It is
// one guarded UPDATE per retry; a failure to record it is logged and does
// not stop the retry.
func (a *action) announceRetry(ctx context.Context, attempt int32, delay time.Duration, msg string) {
	retry, err := json.Marshal(client.ProviderRetry{Attempt: int(attempt), MaxAttempts: a.opts.MaxAttempts,
		NextTryAt: time.Now().Add(delay).UTC(), LastError: msg})
	if err == nil {
		err = a.store.SetProviderRetry(ctx, a.fence, retry)
	}
	if err != nil && ctx.Err() == nil {
		a.log.Warn("provider retry not recorded", slog.String("error", err.Error()))
	}
}

// providerError retries transient failures with backoff within the attempt
// budget, waiting at least what the provider's Retry-After asks, and ends
// the turn on terminal ones. The stored message is chatd's own sentence for
// the status: provider bodies can carry the request, the schema or an
// echoed key, so none of their text reaches a receipt or last_error; the
// log gets the provider's message with configured keys redacted.
func (a *action) providerError(ctx context.Context, attempt int32, err error) (bool, error) {
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
	a.log.Warn("provider error", slog.Int("attempt", int(attempt)), slog.Int("status", status),
		slog.Bool("retryable", retryable), slog.Duration("retry_after", floor), slog.String("error", a.models.Redact(err.Error())))
	msg, hint := providerFailure(status), ""
	if unreachable != "" {
		msg, hint = unreachable, localHint(err)
	}
	if retryable && int(attempt) < a.opts.MaxAttempts {
		delay := a.opts.backoff(attempt, floor)
		retried(ctx, attempt, err, delay)
		a.announceRetry(ctx, attempt, delay, msg+hint)
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(delay):
		}
		return false, nil
	}
	if retryable {
		msg += fmt.Sprintf(" after %d attempts", attempt)
	}
	msg += hint
	a.fence.Attempt = &attempt
	return a.fail(ctx, client.CodeProviderError, msg, store.EndError)
}
