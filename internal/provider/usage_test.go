package provider

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"charm.land/fantasy"

	"github.com/chatd/chatd/client"
)

// The event streams in testdata/usage are the first streamed responses of
// fantasy v0.41.2's recorded provider traffic (providertests/testdata):
// OpenAI Chat Completions (o4-mini), OpenAI Responses (o4-mini, reasoning
// summary), Anthropic Messages (claude-sonnet-4 with thinking) and two
// OpenAI-compatible servers (Z.ai's GLM with cached and reasoning tokens,
// llama.cpp with neither detail).

func n(v int64) *int64 { return &v }

func usageString(u client.Usage) string {
	f := func(p *int64) string {
		if p == nil {
			return "null"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("{input:%s output:%s cache_read:%s cache_write:%s reasoning:%s}", f(u.InputTokens),
		f(u.OutputTokens), f(u.CacheReadTokens), f(u.CacheWriteTokens), f(u.ReasoningTokens))
}

// streamUsage streams one call of a model of type typ against a server
// that answers with body, and returns the usage chatd records.
func streamUsage(t *testing.T, typ, body string) client.Usage {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	base := srv.URL + "/v1"
	if typ == "anthropic" {
		base = srv.URL
	}
	r := registry(t, `{"providers":[{"name":"p","type":"`+typ+`","base_url":"`+base+`"}],
		"models":[{"id":"m","provider":"p","model":"gpt-4o"}]}`, nil)
	m, err := r.Model(t.Context(), "m")
	if err != nil {
		t.Fatal(err)
	}
	ctx, obs := Observe(t.Context())
	stream, err := m.LM.Stream(ctx, fantasy.Call{Prompt: fantasy.Prompt{fantasy.NewUserMessage("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	var u fantasy.Usage
	finished := false
	for part := range stream {
		switch part.Type {
		case fantasy.StreamPartTypeFinish:
			u, finished = part.Usage, true
		case fantasy.StreamPartTypeError:
			t.Fatalf("stream error: %v", part.Error)
		}
	}
	if !finished {
		t.Fatal("the stream did not finish")
	}
	return StepUsage(u, obs.Verdict())
}

func TestWireUsage(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		b, err := os.ReadFile("testdata/usage/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	chat := read("openai-chat_o4-mini.sse")
	anthropic := read("anthropic_claude-sonnet-4.sse")
	// The same streams without the usage chunk, and with cache figures.
	var noUsage []string
	for ev := range strings.SplitSeq(chat, "\n\n") {
		if !strings.Contains(ev, `"usage":{`) {
			noUsage = append(noUsage, ev)
		}
	}
	cached := strings.NewReplacer(`"cache_read_input_tokens":0`, `"cache_read_input_tokens":2048`,
		`"cache_creation_input_tokens":0`, `"cache_creation_input_tokens":512`).Replace(anthropic)
	for _, tc := range []struct {
		name, typ, body string
		want            client.Usage
	}{
		// prompt 19 (0 cached), completion 84 of which 64 reasoning.
		{"chat completions", "openai-chat", chat,
			client.Usage{InputTokens: n(19), OutputTokens: n(84), CacheReadTokens: n(0), ReasoningTokens: n(64)}},
		{"chat completions without a usage chunk", "openai-chat", strings.Join(noUsage, "\n\n"), client.Usage{}},
		// input 60 (0 cached), output 225 of which 192 reasoning.
		{"responses", "openai", read("openai_o4-mini.sse"),
			client.Usage{InputTokens: n(60), OutputTokens: n(225), CacheReadTokens: n(0), ReasoningTokens: n(192)}},
		// message_start: input 424, output 5; message_delta: output 119.
		// No reasoning figure: thinking is output.
		{"anthropic", "anthropic", anthropic,
			client.Usage{InputTokens: n(424), OutputTokens: n(119), CacheReadTokens: n(0), CacheWriteTokens: n(0)}},
		{"anthropic with cache figures", "anthropic", cached,
			client.Usage{InputTokens: n(424), OutputTokens: n(119), CacheReadTokens: n(2048), CacheWriteTokens: n(512)}},
		// prompt 173 of which 172 cached: input 1.
		{"openai-compatible with cached and reasoning tokens", "openai-compatible", read("openai-compatible_zai-glm-4-7-flash.sse"),
			client.Usage{InputTokens: n(1), OutputTokens: n(87), CacheReadTokens: n(172), ReasoningTokens: n(63)}},
		{"openai-compatible without details", "openai-compatible", read("openai-compatible_llama-cpp-gpt-oss.sse"),
			client.Usage{InputTokens: n(84), OutputTokens: n(57)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := streamUsage(t, tc.typ, tc.body); usageString(got) != usageString(tc.want) {
				t.Errorf("usage %s, want %s", usageString(got), usageString(tc.want))
			}
		})
	}
}

// TestStepUsageUnobserved: without an observed stream a zero figure cannot
// be told from an absent one, and counts as not reported.
func TestStepUsageUnobserved(t *testing.T) {
	t.Parallel()
	got := StepUsage(fantasy.Usage{InputTokens: 7, OutputTokens: 3}, Verdict{})
	if want := (client.Usage{InputTokens: n(7), OutputTokens: n(3)}); usageString(got) != usageString(want) {
		t.Errorf("usage %s, want %s", usageString(got), usageString(want))
	}
	// A negative or absurd figure is no token count: not recorded.
	got = StepUsage(fantasy.Usage{InputTokens: -5, OutputTokens: 1 << 62, CacheReadTokens: 2},
		Verdict{Seen: true, Reported: Reported{Input: true, Output: true, CacheRead: true}})
	if want := (client.Usage{CacheReadTokens: n(2)}); usageString(got) != usageString(want) {
		t.Errorf("usage %s, want %s", usageString(got), usageString(want))
	}
}

// TestGeminiBlockedPrompt: a prompt Gemini blocks comes back with
// promptFeedback.blockReason and no candidate; fantasy reports an
// incomplete stream (which would be retried), chatd a content-filter
// finish, and the wire says so too.
func TestGeminiBlockedPrompt(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"promptFeedback\":{\"blockReason\":\"PROHIBITED_CONTENT\"},\"usageMetadata\":{\"promptTokenCount\":9,\"totalTokenCount\":9}}\r\n\r\n"))
	}))
	t.Cleanup(srv.Close)
	r := registry(t, `{"providers":[{"name":"g","type":"google","base_url":"`+srv.URL+`"}],"models":[{"id":"m","provider":"g","model":"gemini-2.5-flash"}]}`, nil)
	m, err := r.Model(t.Context(), "m")
	if err != nil {
		t.Fatal(err)
	}
	ctx, obs := Observe(t.Context())
	stream, err := m.LM.Stream(ctx, fantasy.Call{Prompt: fantasy.Prompt{fantasy.NewUserMessage("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	var finish *fantasy.StreamPart
	for part := range stream {
		switch part.Type {
		case fantasy.StreamPartTypeFinish:
			finish = &part
		case fantasy.StreamPartTypeError:
			t.Fatalf("stream error: %v", part.Error)
		}
	}
	v := obs.Verdict()
	if finish == nil || finish.FinishReason != fantasy.FinishReasonContentFilter || finish.Usage.InputTokens != 9 ||
		v.FinishReason != fantasy.FinishReasonContentFilter || v.Incomplete {
		t.Fatalf("finish %+v verdict %+v", finish, v)
	}
}
