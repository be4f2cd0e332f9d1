package provider

import (
	"fmt"
	"testing"
)

// chatChunks is a Chat Completions stream as providers send it: the
// model's first chunk, argument deltas (some formatted with spaces, one
// whose arguments name the keys the observation reads), a refusal, the
// finish, a usage-only chunk, and chunks with null usage after it.
var chatChunks = []string{
	`{"id":"c1","object":"chat.completion.chunk","model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":null},"finish_reason":null}],"usage":null}`,
	`{"id":"c1","model":"gpt-x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"output\":"}}]},"finish_reason":null}]}`,
	`{"id":"c1", "model": "gpt-x", "choices": [ {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"usage\": 1, \"finish_reason\": \"x\"}"}}]}, "finish_reason" : null } ] }`,
	`{"id":"c1","model":"gpt-x","choices":[{"index":0,"delta":{"refusal":"I can"},"finish_reason":null}]}`,
	`{"id":"c1","model":"gpt-x","choices":[{"index":0,"delta":{"refusal":"not."},"finish_reason":null}]}`,
	`{"id":"c1","model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	`{"id":"c1","model":"gpt-x","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":2}}}`,
	`{"id":"c1","model":"gpt-x","choices":[],"usage" :  {"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`,
	`{"id":"c1","model":"gpt-x","choices":[{"index":0,"delta":{"content":"tail"},"finish_reason":null}],"usage":null}`,
	`[DONE]`,
}

// TestObservationSkipsChunksAsDecoded: the chunks the observation of a
// Chat Completions stream does not decode leave it as decoding them
// would, after every chunk of the stream and of its prefixes.
func TestObservationSkipsChunksAsDecoded(t *testing.T) {
	t.Parallel()
	for end := 1; end <= len(chatChunks); end++ {
		fast, full := &Observation{api: apiChat}, &Observation{api: apiChat}
		for _, c := range chatChunks[:end] {
			fast.event([]byte(c))
			if c == "[DONE]" {
				full.event([]byte(c))
			} else {
				full.decode([]byte(c))
			}
		}
		if got, want := state(fast), state(full); got != want {
			t.Fatalf("after %d chunks: skipping %s, decoding %s", end, got, want)
		}
	}
	if chatChunkTells([]byte(chatChunks[1])) {
		t.Fatal("an argument delta was decoded")
	}
}

func state(o *Observation) string {
	return fmt.Sprintf("model %q finish %q terminal %v refusal %q usage %+v", o.model, o.finish, o.terminal, o.refusal.String(), o.usage)
}

// BenchmarkObserveChatChunk: what observing one argument delta costs.
func BenchmarkObserveChatChunk(b *testing.B) {
	o := &Observation{api: apiChat, model: "gpt-x"}
	chunk := []byte(chatChunks[1])
	b.ReportAllocs()
	for b.Loop() {
		o.event(chunk)
	}
}

// BenchmarkDecodeChatChunk: what decoding it costs (the observation's
// work before it skipped such chunks).
func BenchmarkDecodeChatChunk(b *testing.B) {
	o := &Observation{api: apiChat, model: "gpt-x"}
	chunk := []byte(chatChunks[1])
	b.ReportAllocs()
	for b.Loop() {
		o.decode(chunk)
	}
}
