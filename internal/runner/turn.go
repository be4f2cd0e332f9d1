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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/provider"
	"github.com/chatd/chatd/internal/store"
)

// deps are what a worker's actions use: the runner's collaborators and the
// id of the claim the worker holds.
type deps struct {
	store  *store.Store
	models *provider.Registry
	opts   *Options
	m      *runnerMetrics
	log    *slog.Logger
	worker uuid.UUID // the claim: chats.worker_id while the worker owns the chat
}

// turnRunner is one worker's state while it holds a chat, between passes.
type turnRunner struct {
	deps
	sub *notify.Sub // the chat's changes (the step's watch)
	// partial is the output of a step cut short by an interrupt.
	partial []jsonb.Part
	// counted is an attempt counted by the claim or by the last commit,
	// not used yet: the next provider call takes it instead of counting.
	counted counted
	// busy: every worker of this runner holds a chat, so the turn's
	// commits ask whether another user's chat waits (store.Commit.Fair);
	// yield: one said so, and the worker hands this chat back.
	busy  func() bool
	yield bool
}

// counted is a provider attempt counted for a history.
type counted struct {
	ok      bool
	history int64
	attempt int32
}

// pass performs the one action turn calls for. done reports that the chat
// is no longer this worker's to run.
func (t *turnRunner) pass(ctx context.Context, turn *store.Turn) (bool, error) {
	if !turn.Chat.WorkerID.Valid || turn.Chat.WorkerID.UUID != t.worker {
		return true, nil
	}
	msgs, err := parseRows(turn.Prompt)
	if err != nil {
		return false, err
	}
	a := &action{turnRunner: t, turn: turn, msgs: msgs,
		fence: store.Fence{ChatID: turn.Chat.ID, WorkerID: t.worker, HistoryVersion: turn.Chat.HistoryVersion}}
	switch turn.Chat.Status {
	case client.StatusInterrupting:
		return a.finishInterruption(ctx)
	case client.StatusRunning:
	default:
		return true, nil
	}
	t.partial = nil

	if calls := unresolvedCalls(msgs); len(calls) > 0 {
		return a.runTools(ctx, lastAssistant(msgs), calls)
	}
	req := turn.Request
	if req != nil && req.Candidate != nil {
		return a.finishWithCandidate(ctx)
	}
	if len(msgs) > 0 && msgs[len(msgs)-1].row.Role == client.RoleAssistant {
		c, kind := a.textEnding()
		done, err := a.commit(ctx, c)
		a.countRejection(kind, err)
		return done, err
	}
	if made := t.attemptsMade(turn.Chat); int(made) >= a.opts.MaxAttempts {
		// Every attempt at this point of the history was made and none
		// was committed: the step could not be stored, or the process died
		// on it each time. Asking the provider again would loop forever.
		a.log.Error("provider attempts spent without a committed step", slog.Int("attempts", int(made)))
		return a.fail(ctx, client.CodeProviderError, fmt.Sprintf("no answer of the model could be completed and stored in %d attempts", made), store.EndError)
	}
	if a.steps() >= a.opts.MaxSteps {
		if req == nil {
			return a.commit(ctx, store.FinishTurn(store.Ending{}))
		}
		return a.fail(ctx, exhaustedCode(req.ValidationRejections),
			fmt.Sprintf("no valid result within the limit of %d steps", a.opts.MaxSteps), store.EndTurn)
	}
	return a.generate(ctx)
}

// attemptsMade is how many provider attempts were made for chat's history:
// its counter, less the attempt the claim or the last commit counted for the
// call this pass is about to make.
func (t *turnRunner) attemptsMade(chat store.Chat) int32 {
	n := chat.GenerationAttempt
	if c := t.counted; c.ok && c.history == chat.HistoryVersion && c.attempt == n {
		n--
	}
	return n
}

// action is one decision over one read of the chat.
type action struct {
	*turnRunner
	turn  *store.Turn
	msgs  []parsed
	fence store.Fence
}

// commit applies c behind the action's fence; done when the chat is no
// longer ours (finished, waiting for the client).
func (a *action) commit(ctx context.Context, c store.Commit) (bool, error) {
	c.Fence = a.fence
	if c.End() == store.EndNone && a.busy != nil && a.busy() {
		c = c.Fair()
	}
	if chat := a.turn.Chat; chat.SpawnState == store.SpawnAwaited {
		c = c.ToParent(chat.ParentChatID) // an ending commit's outcome goes to the parent in it
	}
	publishes := slices.ContainsFunc(c.Outcomes(), func(o store.Outcome) bool { return o.Status == client.OutputSucceeded })
	if publishes {
		a.opts.TestSignals.BeforePublish.Wait(ctx)
	}
	commitCtx, span := startCommit(ctx, c)
	res, err := a.store.Apply(commitCtx, c)
	endCommit(span, err)
	if err != nil {
		return false, err
	}
	if publishes {
		a.opts.TestSignals.AfterPublish.Wait(ctx)
	}
	a.yield = res.Yield
	if c.CountsAttempt() {
		a.counted = counted{ok: true, history: res.Chat.HistoryVersion, attempt: res.Chat.GenerationAttempt}
	}
	mine := res.Chat.WorkerID.Valid && res.Chat.WorkerID.UUID == a.worker
	return !mine || (res.Chat.Status != client.StatusRunning && res.Chat.Status != client.StatusInterrupting), nil
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
		if m.Role == client.RoleUser && m.Visibility != store.VisibleModel {
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
	e := store.Ending{Messages: extra}
	if req := a.turn.Request; req != nil {
		e.Outcomes = []store.Outcome{{RequestID: req.RequestID, Status: client.OutputFailed, Code: code, Message: message}}
	}
	if end == store.EndError {
		return a.commit(ctx, store.FailTurn(e, client.StreamError{Code: code, Message: message}))
	}
	return a.commit(ctx, store.FinishTurn(e))
}

const textOnlyFeedback = "You ended your turn without calling " + FinalizerName + ". This request is complete only when you call " +
	FinalizerName + " with {\"output\": <value>} matching its schema. Call it now."

// textEnding is the commit for a step that ended with text: an ordinary
// turn is over; a structured request counts a rejection and asks again, or
// fails when the budget is spent. kind is the rejection counted, if any.
func (a *action) textEnding() (store.Commit, string) {
	req := a.turn.Request
	if req == nil {
		return store.FinishTurn(store.Ending{}), ""
	}
	p := &store.Progress{RequestID: req.RequestID}
	why := "the model ended its turn with text, without submitting a result"
	if failed := reject(req, p, rejectTextOnly, oneError("", rejectTextOnly, why)); failed != nil {
		return store.FinishTurn(store.Ending{Progress: p, Outcomes: []store.Outcome{*failed}}), rejectTextOnly
	}
	return store.Continue(store.Continuation{
		Messages: []store.NewMessage{{Role: client.RoleUser, Visibility: store.VisibleModel, Parts: []jsonb.Part{{Type: jsonb.PartHookContext, Text: textOnlyFeedback}},
			RequestID: a.requestID()}},
		Progress:     p,
		CountAttempt: true, // the model is asked again
	}), rejectTextOnly
}

// countRejection counts a rejection of kind once its commit succeeded.
func (a *action) countRejection(kind string, err error) {
	if err == nil && kind != "" {
		a.m.rejections.WithLabelValues(kind).Inc()
	}
}

// finishInterruption keeps the partial output, closes dangling tool calls,
// cancels the governing request and lets the queue move on.
func (a *action) finishInterruption(ctx context.Context) (bool, error) {
	var msgs []store.NewMessage
	var kept []jsonb.Part
	for _, p := range a.partial {
		if p.Type == jsonb.PartText || p.Type == jsonb.PartReasoning {
			kept = append(kept, p)
		}
	}
	a.partial = nil
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
	e := store.Ending{Messages: msgs}
	a.fence.Statuses = []client.ChatStatus{client.StatusInterrupting}
	if req := a.turn.Request; req != nil {
		e.Outcomes = []store.Outcome{{RequestID: req.RequestID, Status: client.OutputCancelled, Code: client.CodeInterrupted,
			Message: "the turn was interrupted"}}
	}
	return a.commit(ctx, store.FinishTurn(e))
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

// localHint is what a failure to reach a provider at a local address adds:
// such a provider is a process the user starts (mockllm, a local model
// server), most likely not started. "" for any other error.
func localHint(err error) string {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return ""
	}
	u, perr := url.Parse(ue.URL)
	if perr != nil || !localHost(u.Hostname()) {
		return ""
	}
	return "; it is a local address: is the provider running? (for the example configuration: make mockllm)"
}

// localHost reports whether h names this machine: localhost or a loopback
// address.
func localHost(h string) bool {
	if strings.EqualFold(h, "localhost") || strings.HasSuffix(strings.ToLower(h), ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
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
