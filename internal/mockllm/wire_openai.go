package mockllm

import (
	"cmp"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// What the two OpenAI formats (Chat Completions and Responses) share: the
// error envelope, call ids, the usage figures and the strict-schema rules.

// writeError answers in OpenAI's envelope, {"error":{"message","type",
// "param","code"}}, with the type and code OpenAI uses for the status.
func writeError(w http.ResponseWriter, e ErrorSpec) {
	status := cmp.Or(e.Status, http.StatusInternalServerError)
	typ := e.Type
	if typ == "" {
		switch {
		case status == http.StatusTooManyRequests:
			typ = "requests"
		case status >= 500:
			typ = "server_error"
		default:
			typ = "invalid_request_error"
		}
	}
	code := any(nil)
	if e.Code != "" {
		code = e.Code
	} else if status == http.StatusTooManyRequests {
		code = "rate_limit_exceeded"
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatFloat(e.RetryAfter, 'f', -1, 64))
	}
	if e.ShouldRetry != nil {
		w.Header().Set("X-Should-Retry", strconv.FormatBool(*e.ShouldRetry))
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"message": cmp.Or(e.Message, http.StatusText(status)),
		"type":    typ,
		"param":   nil,
		"code":    code,
	}})
}

// usage is Chat Completions' usage object.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
		AudioTokens  int `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens          int `json:"reasoning_tokens"`
		AudioTokens              int `json:"audio_tokens"`
		AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
		RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
	} `json:"completion_tokens_details"`
}

// usageFor counts the figures from the lengths of the request body and of
// the answer: every format's figures when the step scripts none.
func usageFor(req *Request, rep reply) *usage {
	out := len(rep.text) + len(rep.reasoning)
	for _, c := range rep.calls {
		out += len(c.name) + len(c.args)
	}
	u := &usage{PromptTokens: tokens(len(req.Body)), CompletionTokens: tokens(out)}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	if rep.reasoning != "" {
		u.CompletionTokensDetails.ReasoningTokens = tokens(len(rep.reasoning))
	}
	return u
}

// openAIUsage is a scripted usage object of the OpenAI APIs: Chat
// Completions names (prompt, completion) or Responses names (input,
// output).
func openAIUsage(u *Usage, responses bool) map[string]any {
	in, out, details, outDetails := "prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"
	if responses {
		in, out, details, outDetails = "input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details"
	}
	m := map[string]any{}
	var total int64
	if u.InputTokens != nil {
		n := *u.InputTokens
		if u.CacheReadTokens != nil {
			n += *u.CacheReadTokens
		}
		m[in], total = n, total+n
	}
	if u.OutputTokens != nil {
		m[out], total = *u.OutputTokens, total+*u.OutputTokens
	}
	if u.CacheReadTokens != nil {
		m[details] = map[string]any{"cached_tokens": *u.CacheReadTokens}
	}
	if u.ReasoningTokens != nil {
		m[outDetails] = map[string]any{"reasoning_tokens": *u.ReasoningTokens}
	}
	m["total_tokens"] = total
	return m
}

func newCallID() string { return "call_" + rand.Text() }

// checkStrictTools applies OpenAI's strict-mode rules to the tools sent
// with strict:true, as the real API does before generating anything: every
// object schema must list all its properties in required and set
// additionalProperties:false. (The real rules go further, refusing many
// keywords; these two are the ones an ordinary Draft-07 schema breaks
// first.) Tools without strict:true are not checked.
func checkStrictTools(tools []Tool) error {
	for _, t := range tools {
		if t.Strict == nil || !*t.Strict {
			continue
		}
		var schema any
		dec := json.NewDecoder(strings.NewReader(string(t.Parameters)))
		dec.UseNumber()
		if err := dec.Decode(&schema); err != nil {
			return fmt.Errorf("Invalid schema for function '%s': %v", t.Name, err)
		}
		if err := strictSchema(schema, nil); err != nil {
			return fmt.Errorf("Invalid schema for function '%s': %v", t.Name, err)
		}
	}
	return nil
}

func strictSchema(s any, path []string) error {
	m, ok := s.(map[string]any)
	if !ok {
		return nil
	}
	if props, ok := m["properties"].(map[string]any); ok || m["type"] == "object" {
		if ap, ok := m["additionalProperties"].(bool); !ok || ap {
			return fmt.Errorf("%s, 'additionalProperties' is required to be supplied and to be false.", strictContext(path))
		}
		var required []string
		if list, ok := m["required"].([]any); ok {
			for _, r := range list {
				if s, ok := r.(string); ok {
					required = append(required, s)
				}
			}
		}
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !slices.Contains(required, k) {
				return fmt.Errorf("%s, 'required' is required to be supplied and to be an array including every key in properties. Missing '%s'.",
					strictContext(path), k)
			}
			if err := strictSchema(props[k], append(slices.Clip(path), "properties", k)); err != nil {
				return err
			}
		}
	}
	if items, ok := m["items"]; ok {
		if err := strictSchema(items, append(slices.Clip(path), "items")); err != nil {
			return err
		}
	}
	for _, kw := range []string{"anyOf", "allOf", "oneOf"} {
		list, _ := m[kw].([]any)
		for i, sub := range list {
			if err := strictSchema(sub, append(slices.Clip(path), kw, fmt.Sprint(i))); err != nil {
				return err
			}
		}
	}
	return nil
}

func strictContext(path []string) string {
	quoted := make([]string, len(path))
	for i, p := range path {
		quoted[i] = "'" + p + "'"
	}
	return "In context=(" + strings.Join(quoted, ", ") + ")"
}
