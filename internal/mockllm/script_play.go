package mockllm

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Playing scripts: which step answers a request (a rule, the next step of
// its script, or none) and the reply a step makes, unscripted answers
// included.

// scriptMarker selects a named script (Options.Scripts).
var scriptMarker = regexp.MustCompile(`\[script:([A-Za-z0-9_.-]+)\]`)

// scriptFor names the script for req: the marker in its first user message,
// if Options.Scripts has that name.
func (s *Server) scriptFor(req *Request) (string, *Script) {
	for _, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		if sub := scriptMarker.FindStringSubmatch(m.Content); sub != nil {
			if sc, ok := s.opts.Scripts[sub[1]]; ok {
				return sub[1], sc
			}
		}
		break
	}
	return "", s.opts.Script
}

// stepChoice is the step that answers a request and where it came from.
type stepChoice struct {
	step     Step
	rule     int    // index of the rule that matched, -1 when none did
	contains string // that rule's text
	index    int    // index of the script step taken, -1 when none was
	stepFor  bool   // Options.StepFor chose the step
}

// logArgs say in the request's log lines where the step came from.
func (c stepChoice) logArgs() []any {
	if c.rule >= 0 {
		return []any{"rule", c.rule, "contains", c.contains, "step_for", c.stepFor}
	}
	return []any{"script_step", c.index, "step_for", c.stepFor}
}

// chooseStep picks the step that answers req: Options.StepFor's when it
// has one, else one of its script sc (see nextStep).
func (s *Server) chooseStep(req *Request, sc *Script) stepChoice {
	if pick := s.opts.StepFor; pick != nil {
		if st, ok := pick(req); ok {
			return stepChoice{step: st, rule: -1, index: -1, stepFor: true}
		}
	}
	return s.nextStep(req.Script, sc, req)
}

// nextStep takes the step of the named script's first matching rule, or its
// next step; none (an unscripted answer) when it has neither.
func (s *Server) nextStep(name string, sc *Script, req *Request) stepChoice {
	none := stepChoice{rule: -1, index: -1}
	if sc == nil {
		return none
	}
	for i, r := range sc.Rules {
		if r.matches(req) {
			return stepChoice{step: r.Step, rule: i, contains: r.Contains, index: -1}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(sc.Steps) == 0 {
		return none
	}
	if n := s.position[name]; n < len(sc.Steps) {
		s.position[name] = n + 1
		return stepChoice{step: sc.Steps[n], rule: -1, index: n}
	}
	if sc.Then == ThenRepeat {
		return stepChoice{step: sc.Steps[len(sc.Steps)-1], rule: -1, index: len(sc.Steps) - 1}
	}
	return none
}

// plan makes the reply of step st: its refusal, text, tool calls or value
// or, unscripted, a finalizer call or an echo; newID makes tool call ids
// in the format's style.
func (s *Server) plan(req *Request, st Step, newID func() string) (reply, error) {
	rep := reply{reasoning: st.Reasoning, details: st.ReasoningDetails && st.Reasoning != "", text: st.Text, truncate: st.Truncate, usage: st.Usage}
	var err error
	switch {
	case st.Refusal != "":
		rep.refusal = st.Refusal
	case st.TextOnly:
		rep.text = cmp.Or(rep.text, echo(req))
	case len(st.ToolCalls) > 0:
		for _, tc := range st.ToolCalls {
			args := tc.Arguments
			if tc.Value != nil {
				args = wrapOutput(tc.Value)
			}
			rep.calls = append(rep.calls, call{id: cmp.Or(tc.ID, newID()), name: tc.Name, args: args})
		}
	case st.Value != nil:
		rep.calls = []call{{id: newID(), name: FinalizerTool, args: wrapOutput(st.Value)}}
	case st.Invalid:
		rep.calls, err = finalizerCall(req, true, newID)
	case st.Text != "":
	case s.opts.Mode == ModeText || req.Tool(FinalizerTool) == nil:
		rep.text = echo(req)
	default:
		rep.calls, err = finalizerCall(req, s.opts.Mode == ModeInvalid, newID)
	}
	rep.finish = st.FinishReason
	if rep.finish == "" {
		rep.finish = "stop"
		if len(rep.calls) > 0 {
			rep.finish = "tool_calls"
		}
	}
	return rep, err
}

// finalizerCall generates the arguments against the offered tool's whole
// parameters schema, which yields {"output": V} (or, for an invalid value,
// usually {"output": V'} with V' violating the output schema).
func finalizerCall(req *Request, invalid bool, newID func() string) ([]call, error) {
	tool := req.Tool(FinalizerTool)
	args := json.RawMessage(`{}`) // no schema to violate: omit the required output
	var err error
	switch {
	case tool != nil && invalid:
		args, err = GenerateInvalid(tool.Parameters)
	case tool != nil:
		args, err = GenerateValue(tool.Parameters)
	case !invalid:
		return nil, fmt.Errorf("request does not offer the %s tool", FinalizerTool)
	}
	if err != nil {
		return nil, fmt.Errorf("%s arguments: %w", FinalizerTool, err)
	}
	return []call{{id: newID(), name: FinalizerTool, args: string(args)}}, nil
}

// wrapOutput builds {"output": value} by concatenation so that the value's
// bytes are sent exactly as scripted.
func wrapOutput(v json.RawMessage) string { return `{"output":` + string(v) + `}` }

// echo is the unscripted text answer: a bounded echo of the last user text.
func echo(req *Request) string {
	text := "(no user message)"
	for _, m := range slices.Backward(req.Messages) {
		if m.Role == "user" {
			text = strings.Join(strings.Fields(m.Content), " ")
			break
		}
	}
	const limit = 200
	if len(text) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	return "mockllm: " + text
}
