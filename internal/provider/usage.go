package provider

import (
	"encoding/json"

	"charm.land/fantasy"

	"github.com/chatd/chatd/client"
)

// Reported says which token figures a provider's usage object carried.
// fantasy's Usage holds an absent figure as zero; the wire tells the two
// apart, so that a figure the provider did not report is null, not 0.
type Reported struct {
	Input, Output, CacheRead, CacheWrite, Reasoning bool
}

type reported = Reported

// maxFigure bounds a figure chatd records, so that sums over any number of
// steps stay far inside int64 (and a metric never goes backwards).
const maxFigure = 1 << 40

// StepUsage is a step's usage as chatd records it: fantasy's figures, each
// kept only when the provider reported it. Without an observed event
// stream (a non-streaming call, a model not built by a Registry) presence
// cannot be told, and a zero figure counts as not reported.
func StepUsage(u fantasy.Usage, v Verdict) client.Usage {
	r := v.Reported
	if !v.Seen {
		r = Reported{Input: u.InputTokens != 0, Output: u.OutputTokens != 0, CacheRead: u.CacheReadTokens != 0,
			CacheWrite: u.CacheCreationTokens != 0, Reasoning: u.ReasoningTokens != 0}
	}
	figure := func(ok bool, n int64) *int64 {
		if !ok || n < 0 || n > maxFigure {
			return nil // not a token count: a hostile or broken server
		}
		return &n
	}
	return client.Usage{
		InputTokens:      figure(r.Input, u.InputTokens),
		OutputTokens:     figure(r.Output, u.OutputTokens),
		CacheReadTokens:  figure(r.CacheRead, u.CacheReadTokens),
		CacheWriteTokens: figure(r.CacheWrite, u.CacheCreationTokens),
		ReasoningTokens:  figure(r.Reasoning, u.ReasoningTokens),
	}
}

// present decodes a usage object's members, each non-nil when the member
// is there with a number (JSON null counts as absent).
func present(raw json.RawMessage, into any) bool {
	return len(raw) > 0 && json.Unmarshal(raw, into) == nil
}

// chatUsage reads a Chat Completions usage object the way fantasy's
// DefaultStreamUsageFunc does: nothing when total_tokens is zero or
// absent; input is prompt_tokens less cached_tokens, which are the cache
// reads; OpenAI reports no cache writes.
func chatUsage(raw json.RawMessage) reported {
	var u struct {
		PromptTokens        *int64 `json:"prompt_tokens"`
		CompletionTokens    *int64 `json:"completion_tokens"`
		TotalTokens         *int64 `json:"total_tokens"`
		PromptTokensDetails *struct {
			CachedTokens *int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails *struct {
			ReasoningTokens *int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
	if !present(raw, &u) || u.TotalTokens == nil || *u.TotalTokens == 0 {
		return reported{}
	}
	return reported{
		Input:     u.PromptTokens != nil,
		Output:    u.CompletionTokens != nil,
		CacheRead: u.PromptTokensDetails != nil && u.PromptTokensDetails.CachedTokens != nil,
		Reasoning: u.CompletionTokensDetails != nil && u.CompletionTokensDetails.ReasoningTokens != nil,
	}
}

// responsesUsage reads the usage of response.completed or
// response.incomplete, as fantasy's responsesUsage: input less the cached
// tokens, which are the cache reads; no cache writes.
func responsesUsage(raw json.RawMessage) reported {
	var u struct {
		InputTokens        *int64 `json:"input_tokens"`
		OutputTokens       *int64 `json:"output_tokens"`
		InputTokensDetails *struct {
			CachedTokens *int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokensDetails *struct {
			ReasoningTokens *int64 `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	}
	if !present(raw, &u) {
		return reported{}
	}
	return reported{
		Input:     u.InputTokens != nil,
		Output:    u.OutputTokens != nil,
		CacheRead: u.InputTokensDetails != nil && u.InputTokensDetails.CachedTokens != nil,
		Reasoning: u.OutputTokensDetails != nil && u.OutputTokensDetails.ReasoningTokens != nil,
	}
}

// anthropicUsage folds an Anthropic usage object into r as
// anthropic-sdk-go accumulates it: message_start sets every figure,
// message_delta always replaces output_tokens and the others only when it
// carries them (delta says raw is a message_delta's). Anthropic reports no
// separate reasoning figure (thinking is output).
func anthropicUsage(raw json.RawMessage, r reported, delta bool) reported {
	var u struct {
		InputTokens              *int64 `json:"input_tokens"`
		OutputTokens             *int64 `json:"output_tokens"`
		CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	}
	if !present(raw, &u) {
		r.Output = r.Output && !delta
		return r
	}
	r.Output = u.OutputTokens != nil
	r.Input = r.Input || u.InputTokens != nil
	r.CacheWrite = r.CacheWrite || u.CacheCreationInputTokens != nil
	r.CacheRead = r.CacheRead || u.CacheReadInputTokens != nil
	return r
}
