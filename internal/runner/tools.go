package runner

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/mcp"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/tools"
	"github.com/chatd/chatd/internal/validate"
)

// maxFeedbackBytes bounds validation feedback sent back to the model.
const maxFeedbackBytes = 4096

const finalizerAccepted = "Accepted: the value is recorded as the final result. Do not call any more tools; end your turn."

// runTools answers the pending calls of the last assistant step in one
// commit (toolsCommit).
func (a *action) runTools(ctx context.Context, step *parsed, calls []jsonb.Part) (bool, error) {
	c, kind, err := a.toolsCommit(ctx, step, calls)
	if err != nil {
		return false, err
	}
	done, err := a.commit(ctx, c)
	a.countRejection(kind, err)
	return done, err
}

// onlyFinalizer reports whether every call of a structured turn's step is
// the finalizer's: answering them runs nothing but the server's own
// validation, so the step and its answers can be one commit.
func onlyFinalizer(req *store.Request, calls []jsonb.Part) bool {
	if req == nil || len(calls) == 0 {
		return false
	}
	for _, c := range calls {
		if c.ToolName != FinalizerName {
			return false
		}
	}
	return true
}

// toolsCommit runs the pending calls of step and returns the commit that
// answers them all, with the kind of the batch's rejection ("" if none).
// Within a structured request the finalizer must be the only call of its
// batch; its value is validated here, by the server, and a valid value
// becomes the request's candidate in the same transaction as its result —
// and, without stop hooks, its receipt. An error means the worker stops
// (a server tool was cut off): nothing is to be committed.
func (a *action) toolsCommit(ctx context.Context, step *parsed, calls []jsonb.Part) (store.Commit, string, error) {
	ans := &answers{}
	if req := a.turn.Request; req != nil {
		ans.progress = &store.Progress{RequestID: req.RequestID}
	}
	if !a.refuseBatch(ans, step, calls) {
		if err := a.runCalls(ctx, ans, step, calls); err != nil {
			return store.Commit{}, "", err
		}
	}
	return a.answerCommit(ans), ans.kind, nil
}

// answers are what a step's calls came to, for the commit that answers
// them.
type answers struct {
	results  []jsonb.Part
	progress *store.Progress // of the structured request, if any
	kind     string          // of the batch's rejection, if any
	why      attemptErrors   // of the batch's rejection
	spawns   []store.Spawn
	children int  // calls a spawned child answers
	waiting  bool // calls a client runs
}

// refuseBatch answers every call with an error, running none, when a
// structured request's finalizer is not alone in its batch.
func (a *action) refuseBatch(ans *answers, step *parsed, calls []jsonb.Part) bool {
	finalizers := 0
	if a.turn.Request != nil {
		for _, c := range calls {
			if c.ToolName == FinalizerName {
				finalizers++
			}
		}
	}
	var msg string
	switch {
	case finalizers > 0 && providerRan(step):
		// Provider-side tools of this batch already ran and cannot be
		// undone: its candidate is refused and a separate step asked for.
		msg = "Not run: this message also used provider-side tools. Call " + FinalizerName + " alone, in a message of its own."
		ans.kind = rejectProviderTools
		ans.why = oneError("", rejectProviderTools, "the result was submitted in a message that also ran provider-side tools")
	case finalizers > 0 && len(calls) > 1:
		msg = "Not run: " + FinalizerName + " must be the only tool call in its message. " +
			"Run any other tools first, then call " + FinalizerName + " alone."
		ans.kind = rejectBatch
		ans.why = oneError("", rejectBatch, fmt.Sprintf("the result was submitted beside other tool calls (%d calls, %d of them submissions); "+
			"it must be the only call of its message", len(calls), finalizers))
	default:
		return false
	}
	for _, c := range calls {
		ans.results = append(ans.results, errorResult(c, msg))
	}
	return true
}

// providerRan reports whether the provider ran tools of step itself.
func providerRan(step *parsed) bool {
	for _, p := range step.parts {
		if p.Type == jsonb.PartToolCall && p.ProviderExecuted {
			return true
		}
	}
	return false
}

// toolbox is where a step's calls find their tools.
type toolbox struct {
	server  map[string]tools.Tool
	dynamic map[string]bool    // the chat's client tools
	counts  *store.SpawnCounts // read once, when a call spawns
}

// runCalls runs the calls of step, each traced as a tool execution.
func (a *action) runCalls(ctx context.Context, ans *answers, step *parsed, calls []jsonb.Part) error {
	box := toolbox{server: map[string]tools.Tool{}, dynamic: dynamicNames(a.turn.Chat)}
	for _, t := range a.opts.Tools {
		box.server[t.Name] = t
	}
	if a.spawnOffered() && slices.ContainsFunc(calls, func(c jsonb.Part) bool { return c.ToolName == SpawnToolName }) {
		n, err := a.store.SpawnCounts(ctx, a.turn.Chat.ID, a.turnStart(), step.row.ID)
		if err != nil {
			return err
		}
		box.counts = &n
	}
	for _, c := range calls {
		if err := a.runCall(ctx, ans, &box, step, c); err != nil {
			return err
		}
	}
	return nil
}

// runCall runs one call, or leaves it to a client or a spawned child.
func (a *action) runCall(ctx context.Context, ans *answers, box *toolbox, step *parsed, c jsonb.Part) error {
	req := a.turn.Request
	tool, isServer := box.server[c.ToolName]
	remote, isMCP := a.opts.MCP.Lookup(a.turn.Chat.Model, a.turn.Chat.MCPServers, c.ToolName)
	answered := len(ans.results)
	ctx, span := startTool(ctx, c, executor(req, c, isServer, isMCP, box.dynamic[c.ToolName]))
	switch {
	case req != nil && c.ToolName == FinalizerName:
		res, candidate, k, w := finalize(step, c, req)
		ans.results = append(ans.results, res)
		validated(span, k, w)
		if candidate != nil {
			ans.progress.SetCandidate, ans.progress.Candidate, ans.progress.CandidateCallID = true, candidate, c.ToolCallID
		} else {
			ans.kind, ans.why = k, w
		}
	case c.ArgsRejected != "":
		// Screened out before storage: the placeholder is never run, nor
		// sent to a client.
		ans.results = append(ans.results, errorResult(c, "Not run: "+c.ArgsRejected+"."))
	case c.ToolName == SpawnToolName && a.spawnOffered():
		a.spawnAnswer(ans, step, c, box.counts)
	case isServer:
		res, err := a.runServerTool(ctx, tool, c)
		if err != nil {
			span.End()
			return err // stopping: nothing is committed, the call runs again
		}
		ans.results = append(ans.results, res)
	case isMCP:
		res, err := a.runMCPTool(ctx, step, remote, c)
		if err != nil {
			span.End()
			return err // stopping, or the chat moved: nothing is committed
		}
		ans.results = append(ans.results, res)
	case box.dynamic[c.ToolName]:
		ans.waiting = true // the client runs it
	default:
		ans.results = append(ans.results, errorResult(c, fmt.Sprintf("Unknown tool %q.", c.ToolName)))
	}
	if len(ans.results) > answered {
		endTool(span, ans.results[len(ans.results)-1])
	} else {
		span.End()
	}
	return nil
}

// spawnAnswer answers a spawn_agent call at once (refused), or with the
// child it spawns or already spawned.
func (a *action) spawnAnswer(ans *answers, step *parsed, c jsonb.Part, counts *store.SpawnCounts) {
	res, sp, awaited := a.spawnCall(step, c, counts)
	switch {
	case res != nil:
		ans.results = append(ans.results, *res)
	case sp != nil:
		ans.spawns = append(ans.spawns, *sp)
		ans.children++
	case awaited:
		ans.children++
	}
}

// answerCommit is the commit of the calls' answers, ending as they say.
func (a *action) answerCommit(ans *answers) store.Commit {
	req, progress := a.turn.Request, ans.progress
	var msgs []store.NewMessage
	if len(ans.results) > 0 {
		msgs = []store.NewMessage{{Role: client.RoleTool, Parts: ans.results, RequestID: a.requestID()}}
	}
	switch {
	case ans.kind != "":
		if failed := reject(req, progress, ans.kind, ans.why); failed != nil {
			return store.FinishTurn(store.Ending{Messages: msgs, Progress: progress, Outcomes: []store.Outcome{*failed}})
		}
	case ans.waiting || ans.children > 0:
		// The client runs its tools; spawned children answer theirs when
		// their turns end (store.Commit.ToParent).
		return store.AwaitTools(store.Awaiting{Messages: msgs, Progress: progress, Spawns: ans.spawns,
			Timeout: a.opts.ActionTimeout, OnlyChildren: !ans.waiting})
	case progress != nil && progress.SetCandidate && !a.opts.Hooks.Enabled():
		// No stop hook can vet or replace the candidate, so the next pass
		// would only publish it: commit the receipt (and end the turn) in
		// this transaction instead, behind the same fence. An interrupt or
		// an edit that comes later finds the request finished, exactly as
		// if it had come after that next pass.
		return store.FinishTurn(store.Ending{Messages: msgs, Progress: progress,
			Outcomes: []store.Outcome{{RequestID: req.RequestID, Status: client.OutputSucceeded, Value: progress.Candidate}}})
	}
	// The turn goes on with a provider step unless a candidate waits for
	// the stop hooks: count its attempt in this commit.
	return store.Continue(store.Continuation{Messages: msgs, Progress: progress,
		CountAttempt: progress == nil || !progress.SetCandidate})
}

// runServerTool runs a server tool within ServerToolTimeout; its failure is
// the model's to handle. A tool that outlives its deadline is answered with
// an error and left behind (a blocked system call cannot be taken back), so
// neither the worker nor a drain ever waits on a tool longer than that. When
// ctx ends first (the worker stops) it returns ctx's error: nothing is
// committed and the call runs again wherever the chat runs next.
func (d *deps) runServerTool(ctx context.Context, t tools.Tool, call jsonb.Part) (jsonb.Part, error) {
	tctx, cancel := context.WithTimeout(ctx, d.opts.ServerToolTimeout)
	defer cancel()
	done := make(chan jsonb.Part, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				d.log.Error("server tool panicked", slog.String("tool", t.Name), slog.Any("panic", p))
				done <- errorResult(call, "The tool failed unexpectedly.")
			}
		}()
		out, err := t.Run(tctx, call.Args)
		if err != nil {
			done <- errorResult(call, err.Error())
			return
		}
		done <- textResult(call, out)
	}()
	select {
	case res := <-done:
		return res, nil
	case <-tctx.Done():
		if err := ctx.Err(); err != nil {
			return jsonb.Part{}, err
		}
		d.log.Warn("server tool timed out", slog.String("tool", t.Name), slog.Duration("timeout", d.opts.ServerToolTimeout))
		return errorResult(call, fmt.Sprintf("The tool did not finish within %s.", d.opts.ServerToolTimeout)), nil
	}
}

// runMCPTool makes one call of an MCP server's tool. The call is journaled
// (store.StartMCPCall) before it is sent; a call found already sent was cut
// off with its worker, and is sent again only when its server is configured
// idempotent — otherwise it is answered with an error result, since its
// effect is unknown. The server's failures (unreachable, too slow, crashed,
// oversized) are error results for the model; only the worker stopping
// returns an error, and then nothing is committed.
func (a *action) runMCPTool(ctx context.Context, step *parsed, t mcp.Tool, call jsonb.Part) (jsonb.Part, error) {
	sends, err := a.store.StartMCPCall(ctx, a.fence, step.row.ID, call.ToolCallID, t.Server, t.Tool)
	if err != nil {
		return jsonb.Part{}, err
	}
	if sends > 1 && !a.opts.MCP.Idempotent(t.Server) {
		a.opts.MCP.NotRepeated(t)
		a.log.Warn("mcp call cut off by a worker stop is not repeated", slog.String("tool", t.Name), slog.String("tool_call_id", call.ToolCallID))
		return errorResult(call, fmt.Sprintf("The call to %s was interrupted (the server running this chat stopped) and is not repeated: "+
			"whether it took effect is unknown. Check before calling it again.", t.Name)), nil
	}
	res, err := a.opts.MCP.Call(ctx, t, call.Args)
	if err != nil {
		return jsonb.Part{}, cmp.Or(ctx.Err(), err)
	}
	return jsonb.Part{Type: jsonb.PartToolResult, ToolCallID: call.ToolCallID, ToolName: call.ToolName, Result: res.Output, IsError: res.IsError}, nil
}

// dynamicNames are the chat's client-executed tools.
func dynamicNames(chat store.Chat) map[string]bool {
	tools, _ := parseDynamicTools(chat.DynamicTools)
	out := make(map[string]bool, len(tools))
	for _, t := range tools {
		out[t.Name] = true
	}
	return out
}

// dynamicTool is a client-executed tool declared on the chat.
type dynamicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func parseDynamicTools(raw json.RawMessage) ([]dynamicTool, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var tools []dynamicTool
	err := json.Unmarshal(raw, &tools)
	return tools, err
}

// finalize executes one finalizer call: the step must have ended normally,
// the arguments must be exactly {"output": <value>}, and the value must
// satisfy the request's schema. It returns the tool result and, when valid,
// the candidate value; otherwise the kind of rejection (rejectValue when a
// value was rejected by the schema rather than malformed or ineligible) and
// what was wrong, for users.
func finalize(step *parsed, call jsonb.Part, req *store.Request) (jsonb.Part, json.RawMessage, string, attemptErrors) {
	if call.ArgsRejected != "" {
		return errorResult(call, "Rejected: "+call.ArgsRejected+". Call "+FinalizerName+" again with {\"output\": <value>}."), nil, rejectArguments,
			oneError("", argsCode(call), call.ArgsRejected)
	}
	if fr := ptrString(step.row.FinishReason); fr != "tool-calls" && fr != "stop" {
		return errorResult(call, fmt.Sprintf("Rejected: the step ended with finish reason %q, so its arguments may be incomplete. Call %s again.", fr, FinalizerName)), nil, rejectIneligible,
			oneError("", rejectIneligible, fmt.Sprintf("the step ended with finish reason %q, so its arguments may be incomplete", fr))
	}
	value, code, err := outputOf(call.Args)
	if err != nil {
		return errorResult(call, "Rejected: "+err.Error()+". Call "+FinalizerName+" again with {\"output\": <value>}."), nil, rejectArguments,
			oneError("", code, err.Error())
	}
	schema, err := validate.CompileCached(req.Schema)
	if err != nil {
		return errorResult(call, "Rejected: the request's schema cannot be used."), nil, rejectUnusable,
			oneError("", rejectUnusable, "the request's schema cannot be used")
	}
	res := schema.Validate(value)
	if !res.Valid() {
		msg := "The value was rejected: " + res.Summary()
		if len(msg) > maxFeedbackBytes {
			msg = msg[:maxFeedbackBytes] + "…"
		}
		return errorResult(call, fullStop(msg)+" Fix the value and call "+FinalizerName+" again."), nil, rejectValue, valueErrors(res)
	}
	return textResult(call, finalizerAccepted), value, "", attemptErrors{}
}

// fullStop ends a validator's message, which has no final punctuation of
// its own, as a sentence before the next one starts.
func fullStop(s string) string {
	if strings.HasSuffix(s, ".") || strings.HasSuffix(s, "…") {
		return s
	}
	return s + "."
}

// codeArgumentsShape is the attempt error code of finalizer arguments that
// are JSON but not {"output": <value>}.
const codeArgumentsShape = "arguments_shape"

// argsCode is the attempt error code of a call screened out before
// storage (jsonb.Part.ArgsRejectedCode).
func argsCode(call jsonb.Part) string {
	if call.ArgsRejectedCode != "" {
		return string(call.ArgsRejectedCode)
	}
	return legacyArgsCode(call.ArgsRejected)
}

// legacyArgsCode classifies the reason of a call stored before the code
// was, from its words: such a step may still wait for its tools.
func legacyArgsCode(reason string) string {
	switch reason {
	case argsOversized:
		return validate.CodeTooLarge
	case argsNotJSON:
		return validate.CodeInvalidJSON
	}
	if rest, ok := strings.CutPrefix(reason, argsUnacceptable+" ("); ok {
		if _, detail, ok := strings.Cut(rest, ": "); ok {
			return validate.ScanCode(detail)
		}
	}
	return validate.CodeInvalidJSON
}

// Reasons stored in jsonb.Part.ArgsRejected.
const (
	argsOversized    = "the arguments exceeded the size limit"
	argsNotJSON      = "the arguments are not valid JSON"
	argsUnacceptable = "the arguments are not acceptable JSON"
)

// rejectArgs replaces a call's arguments by the placeholder {}, which is
// never run, and says why.
func rejectArgs(p *jsonb.Part, code jsonb.ArgsCode, reason string) {
	p.Args, p.ArgsRejected, p.ArgsRejectedCode = json.RawMessage(`{}`), truncate(reason, maxRejectedBytes), code
}

// scanCode is the code of a refusal of validate.Decode.
func scanCode(err error) jsonb.ArgsCode {
	if se, ok := err.(*validate.ScanError); ok {
		return jsonb.ArgsCode(validate.ScanCode(se.Detail))
	}
	return jsonb.ArgsInvalidJSON
}

// screenArgs checks every tool call's raw arguments before the step is
// committed. Arguments that fail are replaced by {} and a reason
// (rejectArgs): the call is never run, only answered with an error.
// A structured request's finalizer call gets the validator's strict scan,
// since jsonb would erase duplicate keys; every other call gets
// jsonb.Storable, which refuses what PostgreSQL could not store exactly
// (such a step could never commit).
func screenArgs(parts []jsonb.Part, structured bool) {
	for i, p := range parts {
		if p.Type != jsonb.PartToolCall || p.ArgsRejected != "" {
			continue
		}
		if structured && p.ToolName == FinalizerName {
			if _, err := validate.Decode(p.Args, finalizerArgLimits); err != nil {
				rejectArgs(&parts[i], scanCode(err), argsUnacceptable+" ("+err.Error()+")")
			}
		} else if err := jsonb.Storable(p.Args); err != nil {
			rejectArgs(&parts[i], jsonb.ArgsUnstorable, argsUnacceptable+" ("+err.Error()+")")
		}
	}
}

// maxRejectedBytes bounds the reason stored with a rejected call.
const maxRejectedBytes = 512

// truncate cuts s to at most n bytes on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// finalizerArgLimits are the value limits plus the {"output": ...} wrapper.
var finalizerArgLimits = validate.Limits{
	MaxBytes: validate.ValueLimits.MaxBytes + 64, MaxDepth: validate.ValueLimits.MaxDepth + 1,
	MaxNodes: validate.ValueLimits.MaxNodes + 1, MaxKeyBytes: validate.ValueLimits.MaxKeyBytes,
	MaxNumberLen: validate.ValueLimits.MaxNumberLen,
}

// outputOf extracts the raw output value from {"output": <value>}; on
// failure it says why as an attempt error code too.
func outputOf(args json.RawMessage) (json.RawMessage, string, error) {
	if _, err := validate.Decode(args, finalizerArgLimits); err != nil {
		return nil, string(scanCode(err)), fmt.Errorf("%s: %v", argsUnacceptable, err)
	}
	var wrapper map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(args))
	if err := dec.Decode(&wrapper); err != nil || wrapper == nil {
		return nil, codeArgumentsShape, fmt.Errorf(`the arguments must be an object {"output": <value>}`)
	}
	out, ok := wrapper["output"]
	if !ok || len(wrapper) != 1 {
		return nil, codeArgumentsShape, fmt.Errorf(`the arguments must be exactly {"output": <value>}`)
	}
	return out, "", nil
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
