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

// ruleStep is the step index nextStep gives rule 0; rule i is ruleStep-i.
const ruleStep = -2

// nextStep takes the step of the named script's first matching rule, or its
// next step; index is -1 for an unscripted answer and ruleStep-i for
// rule i.
func (s *Server) nextStep(name string, sc *Script, req *Request) (st Step, index int) {
	if sc == nil {
		return Step{}, -1
	}
	for i, r := range sc.Rules {
		if r.matches(req) {
			return r.Step, ruleStep - i
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(sc.Steps) == 0 {
		return Step{}, -1
	}
	if n := s.next[name]; n < len(sc.Steps) {
		s.next[name] = n + 1
		return sc.Steps[n], n
	}
	if sc.Then == ThenRepeat {
		return sc.Steps[len(sc.Steps)-1], len(sc.Steps) - 1
	}
	return Step{}, -1
}

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
