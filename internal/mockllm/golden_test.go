package mockllm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden from the current code")

// goldenCall is one request of a golden case; build, when set, makes the
// body after the random source is seeded (Gemini signatures are random).
type goldenCall struct {
	method, path, body string
	build              func() string
}

type goldenCase struct {
	name   string
	opts   func() Options
	script string // Options.Script as JSON, when set
	calls  []goldenCall
}

func post1(path, body string) []goldenCall {
	return []goldenCall{{method: "POST", path: path, body: body}}
}

const (
	chatPath      = "/v1/chat/completions"
	respPath      = "/v1/responses"
	anthPath      = "/v1/messages"
	gemStreamPath = "/v1beta/models/mock-1:streamGenerateContent?alt=sse"
	gemJSONPath   = "/v1beta/models/mock-1:generateContent"
)

const (
	finalizerChat = `{"type":"function","function":{"name":"coder_structured_output","description":"d","parameters":` + finalizerParams + `}}`
	lookupChat    = `{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}`
	finalizerResp = `{"type":"function","name":"coder_structured_output","parameters":` + finalizerParams + `}`
	finalizerAnth = `{"name":"coder_structured_output","description":"d","input_schema":` + finalizerParams + `}`
	finalizerGem  = `{"functionDeclarations":[{"name":"coder_structured_output","parametersJsonSchema":` + finalizerParams + `}]}`
	unsatisfiable = `{"type":"object","properties":{"output":false},"required":["output"]}`
)

func chatCase(name, script string, stream bool, user string, tools ...string) goldenCase {
	return goldenCase{name: name, script: script, calls: post1(chatPath, chatBody(stream, user, tools...))}
}

func respBody(stream bool, input string, extra string) string {
	return fmt.Sprintf(`{"model":"mock-r","input":%s,"stream":%t%s}`, input, stream, extra)
}

func anthBody(stream bool, messages, extra string) string {
	return fmt.Sprintf(`{"model":"claude-mock","max_tokens":4096,"system":"be brief","messages":%s,"stream":%t%s}`, messages, stream, extra)
}

func gemBody(contents, extra string) string {
	return fmt.Sprintf(`{"contents":%s,"systemInstruction":{"parts":[{"text":"be brief"}]}%s}`, contents, extra)
}

const (
	anthUser     = `[{"role":"user","content":"make a card"}]`
	anthThinking = `,"thinking":{"type":"enabled","budget_tokens":1024}`
	gemUser      = `[{"role":"user","parts":[{"text":"make a card"}]}]`
	gemThoughts  = `,"generationConfig":{"maxOutputTokens":2048,"thinkingConfig":{"includeThoughts":true,"thinkingBudget":512}}`
)

// gemReplay is a Gemini tool loop coming back with the signature the mock
// issued on its call.
func gemReplay(signature []byte) string {
	sig := base64.StdEncoding.EncodeToString(signature)
	return gemBody(`[{"role":"user","parts":[{"text":"look it up"}]},`+
		`{"role":"model","parts":[{"text":"hmm","thought":true},{"functionCall":{"id":"c1","name":"lookup","args":{"q":"x"}},"thoughtSignature":"`+sig+`"}]},`+
		`{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"lookup","response":{"result":"found"}}}]}]`,
		`,"tools":[{"functionDeclarations":[{"name":"lookup","parameters":{"type":"OBJECT","properties":{"q":{"type":"STRING"}}}}]}]`)
}

func goldenCases() []goldenCase {
	var cases []goldenCase
	cases = append(cases, chatGoldenCases()...)
	cases = append(cases, responsesGoldenCases()...)
	cases = append(cases, anthropicGoldenCases()...)
	cases = append(cases, geminiGoldenCases()...)
	return append(cases, serverGoldenCases()...)
}

func chatGoldenCases() []goldenCase {
	const (
		calls     = `{"steps":[{"reasoning":"thinking it over","text":"calling","tool_calls":[{"name":"lookup","arguments":"{\"q\":\"x\"}"},{"id":"call_fixed","name":"coder_structured_output","value":{"title":"abc","tags":["a"]}}]}]}`
		details   = `{"steps":[{"reasoning":"signed thoughts that run long enough to be cut in pieces","reasoning_details":true,"text":"done"}]}`
		refusal   = `{"steps":[{"refusal":"I cannot help with that."}]}`
		length    = `{"steps":[{"text":"cut short","finish_reason":"length"}]}`
		truncate  = `{"steps":[{"text":"a long answer that the stream cuts half-way through","truncate":true}]}`
		usage     = `{"steps":[{"text":"counted","reasoning":"r","usage":{"input_tokens":10,"output_tokens":20,"cache_read_tokens":5,"reasoning_tokens":3}}]}`
		rateLimit = `{"steps":[{"error":{"status":429,"message":"slow down","retry_after":1.5,"should_retry":true}}]}`
		invalid   = `{"steps":[{"invalid":true},{"text_only":true}]}`
	)
	signed := `{"role":"assistant","content":"","reasoning_details":[{"type":"reasoning.text","text":"prior","signature":"` + SignThinking("prior") +
		`","format":"anthropic-claude-v1","index":0}],"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{}"}}]}`
	replay := `{"model":"mock-1","messages":[{"role":"user","content":"look it up"},` + signed +
		`,{"role":"tool","tool_call_id":"call_1","content":"found"}],"tools":[` + lookupChat + `]}`
	return []goldenCase{
		chatCase("chat_echo_json", "", false, "hello there"),
		chatCase("chat_echo_stream", "", true, "hello there"),
		{name: "chat_echo_stream_no_usage", calls: post1(chatPath, `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"parts"}]}]}`)},
		chatCase("chat_finalizer_json", "", false, "make a card", finalizerChat),
		chatCase("chat_finalizer_stream", "", true, "make a card", finalizerChat),
		{name: "chat_mode_invalid_stream", opts: func() Options { return Options{Mode: ModeInvalid} },
			calls: post1(chatPath, chatBody(true, "make a card", finalizerChat))},
		{name: "chat_mode_text_stream", opts: func() Options { return Options{Mode: ModeText} },
			calls: post1(chatPath, chatBody(true, "make a card", finalizerChat))},
		chatCase("chat_calls_reasoning_json", calls, false, "go", finalizerChat, lookupChat),
		chatCase("chat_calls_reasoning_stream", calls, true, "go", finalizerChat, lookupChat),
		chatCase("chat_details_json", details, false, "think"),
		chatCase("chat_details_stream", details, true, "think"),
		{name: "chat_details_replay", script: details, calls: []goldenCall{
			{method: "POST", path: chatPath, body: chatBody(false, "think")},
			{method: "POST", path: chatPath, body: `{"model":"mock-1","messages":[{"role":"user","content":"think"},` +
				`{"role":"assistant","content":"done","reasoning_content":"signed thoughts that run long enough to be cut in pieces"},{"role":"user","content":"again"}]}`},
			{method: "POST", path: chatPath, body: replay},
		}},
		chatCase("chat_refusal_json", refusal, false, "bad"),
		chatCase("chat_refusal_stream", refusal, true, "bad"),
		chatCase("chat_length_json", length, false, "go"),
		chatCase("chat_truncate_json", truncate, false, "go"),
		chatCase("chat_truncate_stream", truncate, true, "go"),
		chatCase("chat_usage_json", usage, false, "go"),
		chatCase("chat_usage_stream", usage, true, "go"),
		chatCase("chat_error_429", rateLimit, true, "go"),
		{name: "chat_invalid_then_text", script: invalid, calls: []goldenCall{
			{method: "POST", path: chatPath, body: chatBody(false, "make a card", finalizerChat)},
			{method: "POST", path: chatPath, body: chatBody(false, "make a card", finalizerChat)},
			{method: "POST", path: chatPath, body: chatBody(false, "make a card", finalizerChat)},
		}},
		{name: "chat_bad_pairing", calls: post1(chatPath, `{"model":"mock-1","messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"nope","content":"y"}]}`)},
		{name: "chat_bad_unanswered", calls: post1(chatPath, `{"model":"mock-1","messages":[{"role":"user","content":"x"},`+
			`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{}"}}]}]}`)},
		{name: "chat_bad_strict", calls: post1(chatPath, `{"model":"mock-1","messages":[{"role":"user","content":"x"}],`+
			`"tools":[{"type":"function","function":{"name":"s","strict":true,"parameters":{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}}}]}`)},
		{name: "chat_bad_json", calls: post1(chatPath, `{"model":`)},
		{name: "chat_bad_signature", calls: post1(chatPath, `{"model":"mock-1","messages":[{"role":"user","content":"x"},`+
			`{"role":"assistant","content":"y","reasoning_details":[{"type":"reasoning.text","text":"t","signature":"forged","format":"anthropic-claude-v1"}]},{"role":"user","content":"z"}]}`)},
		{name: "chat_mockllm_error", calls: post1(chatPath, chatBody(false, "make a card", toolJSON(FinalizerTool, unsatisfiable)))},
	}
}

func responsesGoldenCases() []goldenCase {
	const (
		reasoning = `{"steps":[{"reasoning":"weighing the options","text":"here you go"}]}`
		calls     = `{"steps":[{"reasoning":"weighing","tool_calls":[{"name":"lookup","arguments":"{\"q\":\"x\"}"}]}]}`
		refusal   = `{"steps":[{"refusal":"No."}]}`
		length    = `{"steps":[{"text":"cut","finish_reason":"length"}]}`
		filtered  = `{"steps":[{"text":"hidden","finish_reason":"content_filter"}]}`
		truncate  = `{"steps":[{"text":"a long answer that the stream cuts half-way through","truncate":true}]}`
		usage     = `{"steps":[{"text":"counted","usage":{"input_tokens":10,"output_tokens":20,"cache_read_tokens":5}}]}`
		failed    = `{"steps":[{"error":{"status":503,"message":"overloaded"}}]}`
		encrypted = `,"include":["reasoning.encrypted_content"],"reasoning":{"effort":"low"},"max_output_tokens":900`
	)
	tools := `,"tools":[` + finalizerResp + `,{"type":"function","name":"lookup","parameters":{"type":"object"}},{"type":"web_search"}]`
	replay := `[{"role":"user","content":[{"type":"input_text","text":"look it up"}]},` +
		`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"` + EncryptReasoning("prior") + `"},` +
		`{"type":"function_call","call_id":"call_1","name":"lookup","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"found"}]`
	return []goldenCase{
		{name: "resp_echo_json", calls: post1(respPath, respBody(false, `"hello there"`, `,"instructions":"be brief"`))},
		{name: "resp_echo_stream", calls: post1(respPath, respBody(true, `"hello there"`, ""))},
		{name: "resp_finalizer_json", calls: post1(respPath, respBody(false, `"make a card"`, tools))},
		{name: "resp_finalizer_stream", calls: post1(respPath, respBody(true, `"make a card"`, tools))},
		{name: "resp_reasoning_json", script: reasoning, calls: post1(respPath, respBody(false, `"think"`, encrypted))},
		{name: "resp_reasoning_stream", script: reasoning, calls: post1(respPath, respBody(true, `"think"`, encrypted))},
		{name: "resp_reasoning_plain_stream", script: reasoning, calls: post1(respPath, respBody(true, `"think"`, ""))},
		{name: "resp_calls_stream", script: calls, calls: post1(respPath, respBody(true, `"go"`, tools))},
		{name: "resp_refusal_json", script: refusal, calls: post1(respPath, respBody(false, `"bad"`, ""))},
		{name: "resp_refusal_stream", script: refusal, calls: post1(respPath, respBody(true, `"bad"`, ""))},
		{name: "resp_length_json", script: length, calls: post1(respPath, respBody(false, `"go"`, ""))},
		{name: "resp_length_stream", script: length, calls: post1(respPath, respBody(true, `"go"`, ""))},
		{name: "resp_filter_stream", script: filtered, calls: post1(respPath, respBody(true, `"go"`, ""))},
		{name: "resp_truncate_json", script: truncate, calls: post1(respPath, respBody(false, `"go"`, ""))},
		{name: "resp_truncate_stream", script: truncate, calls: post1(respPath, respBody(true, `"go"`, ""))},
		{name: "resp_usage_stream", script: usage, calls: post1(respPath, respBody(true, `"go"`, ""))},
		{name: "resp_error_503", script: failed, calls: post1(respPath, respBody(true, `"go"`, ""))},
		{name: "resp_replay", calls: post1(respPath, respBody(false, replay, `,"tools":[{"type":"function","name":"lookup","parameters":{"type":"object"}}]`))},
		{name: "resp_bad_reference", calls: post1(respPath, respBody(false, `[{"type":"item_reference","id":"msg_1"}]`, ""))},
		{name: "resp_bad_reasoning", calls: post1(respPath, respBody(false, `[{"type":"reasoning","id":"rs_1","encrypted_content":"forged"},{"role":"assistant","content":"x"}]`, ""))},
		{name: "resp_bad_output", calls: post1(respPath, respBody(false, `[{"role":"user","content":"x"},{"type":"function_call_output","call_id":"c9","output":"y"}]`, ""))},
		{name: "resp_bad_model", calls: post1(respPath, `{"input":"x"}`)},
	}
}

func anthropicGoldenCases() []goldenCase {
	const (
		reasoning = `{"steps":[{"reasoning":"weighing the options at some length","text":"here you go"}]}`
		calls     = `{"steps":[{"text":"calling","tool_calls":[{"name":"lookup","arguments":"{\"q\":\"x\"}"},{"name":"lookup","arguments":"not json"}]}]}`
		refusal   = `{"steps":[{"refusal":"No."}]}`
		length    = `{"steps":[{"text":"cut","finish_reason":"length"}]}`
		truncate  = `{"steps":[{"text":"a long answer that the stream cuts half-way through","truncate":true}]}`
		usage     = `{"steps":[{"text":"counted","usage":{"input_tokens":10,"output_tokens":20,"cache_read_tokens":5,"cache_write_tokens":7}}]}`
		overload  = `{"steps":[{"error":{"status":529,"message":"Overloaded","retry_after":2}}]}`
	)
	tools := `,"tools":[` + finalizerAnth + `,{"name":"lookup","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"}]`
	replay := `[{"role":"user","content":"look it up"},{"role":"assistant","content":[` +
		`{"type":"thinking","thinking":"prior","signature":"` + SignThinking("prior") + `"},` +
		`{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}},{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},` +
		`{"type":"text","text":"checking"},{"type":"tool_use","id":"toolu_1","name":"lookup","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"found"}],"is_error":true},{"type":"text","text":"go on"}]}]`
	return []goldenCase{
		{name: "anth_echo_json", calls: post1(anthPath, anthBody(false, anthUser, ""))},
		{name: "anth_echo_stream", calls: post1(anthPath, anthBody(true, `[{"role":"user","content":[{"type":"text","text":"hello"},{"type":"image"}]}]`, ""))},
		{name: "anth_thinking_finalizer_json", calls: post1(anthPath, anthBody(false, anthUser, anthThinking+tools))},
		{name: "anth_thinking_finalizer_stream", calls: post1(anthPath, anthBody(true, anthUser, anthThinking+tools))},
		{name: "anth_reasoning_stream", script: reasoning, calls: post1(anthPath, anthBody(true, anthUser, anthThinking))},
		{name: "anth_reasoning_off_stream", script: reasoning, calls: post1(anthPath, anthBody(true, anthUser, ""))},
		{name: "anth_calls_json", script: calls, calls: post1(anthPath, anthBody(false, anthUser, tools))},
		{name: "anth_calls_stream", script: calls, calls: post1(anthPath, anthBody(true, anthUser, tools))},
		{name: "anth_refusal_stream", script: refusal, calls: post1(anthPath, anthBody(true, anthUser, ""))},
		{name: "anth_length_json", script: length, calls: post1(anthPath, anthBody(false, anthUser, ""))},
		{name: "anth_truncate_json", script: truncate, calls: post1(anthPath, anthBody(false, anthUser, ""))},
		{name: "anth_truncate_stream", script: truncate, calls: post1(anthPath, anthBody(true, anthUser, ""))},
		{name: "anth_usage_stream", script: usage, calls: post1(anthPath, anthBody(true, anthUser, ""))},
		{name: "anth_error_529", script: overload, calls: post1(anthPath, anthBody(true, anthUser, ""))},
		{name: "anth_replay_stream", calls: post1(anthPath, anthBody(true, replay, anthThinking+tools))},
		{name: "anth_bad_signature", calls: post1(anthPath, anthBody(false, `[{"role":"user","content":"x"},`+
			`{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"forged"},{"type":"text","text":"y"}]},{"role":"user","content":"z"}]`, ""))},
		{name: "anth_bad_budget", calls: post1(anthPath, anthBody(false, anthUser, `,"thinking":{"type":"enabled","budget_tokens":100}`))},
		{name: "anth_bad_missing_thinking", calls: post1(anthPath, anthBody(false, `[{"role":"user","content":"x"},`+
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"lookup","input":{}}]},`+
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"r"}]}]`, anthThinking))},
		{name: "anth_bad_unanswered", calls: post1(anthPath, anthBody(false, `[{"role":"user","content":"x"},`+
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"lookup","input":{}}]},{"role":"user","content":"z"}]`, ""))},
		{name: "anth_bad_result", calls: post1(anthPath, anthBody(false, `[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"r"}]}]`, ""))},
		{name: "anth_bad_tool", calls: post1(anthPath, anthBody(false, anthUser, `,"tools":[{"name":"x","input_schema":{"type":"string"}}]`))},
	}
}

func geminiGoldenCases() []goldenCase {
	const (
		reasoning = `{"steps":[{"reasoning":"weighing the options","text":"here you go"}]}`
		refusal   = `{"steps":[{"refusal":"No."}]}`
		malformed = `{"steps":[{"tool_calls":[{"name":"lookup","arguments":"[1]"}]}]}`
		length    = `{"steps":[{"text":"cut","finish_reason":"length"}]}`
		truncate  = `{"steps":[{"text":"a long answer that the stream cuts half-way through","truncate":true}]}`
		usage     = `{"steps":[{"text":"counted","usage":{"input_tokens":10,"output_tokens":20,"cache_read_tokens":5,"reasoning_tokens":3}}]}`
		limited   = `{"steps":[{"error":{"status":429,"message":"Resource exhausted","retry_after":3}}]}`
	)
	tools := `,"tools":[` + finalizerGem + `]`
	openAPI := `,"tools":[{"functionDeclarations":[{"name":"coder_structured_output","parameters":` +
		`{"type":"OBJECT","properties":{"output":{"type":"OBJECT","properties":{"n":{"type":"INTEGER","minimum":3}},"required":["n"]}},"required":["output"]}}]}]`
	return []goldenCase{
		{name: "gem_echo_json", calls: post1(gemJSONPath, gemBody(gemUser, ""))},
		{name: "gem_echo_stream", calls: post1(gemStreamPath, gemBody(gemUser, ""))},
		{name: "gem_thoughts_finalizer_json", calls: post1(gemJSONPath, gemBody(gemUser, gemThoughts+tools))},
		{name: "gem_thoughts_finalizer_stream", calls: post1(gemStreamPath, gemBody(gemUser, gemThoughts+tools))},
		{name: "gem_openapi_stream", calls: post1(gemStreamPath, gemBody(gemUser, openAPI))},
		{name: "gem_reasoning_stream", script: reasoning, calls: post1(gemStreamPath, gemBody(gemUser, gemThoughts))},
		{name: "gem_refusal_stream", script: refusal, calls: post1(gemStreamPath, gemBody(gemUser, ""))},
		{name: "gem_malformed_stream", script: malformed, calls: post1(gemStreamPath, gemBody(gemUser, ""))},
		{name: "gem_length_json", script: length, calls: post1(gemJSONPath, gemBody(gemUser, ""))},
		{name: "gem_truncate_json", script: truncate, calls: post1(gemJSONPath, gemBody(gemUser, ""))},
		{name: "gem_truncate_stream", script: truncate, calls: post1(gemStreamPath, gemBody(gemUser, ""))},
		{name: "gem_usage_stream", script: usage, calls: post1(gemStreamPath, gemBody(gemUser, ""))},
		{name: "gem_error_429", script: limited, calls: post1(gemStreamPath, gemBody(gemUser, ""))},
		{name: "gem_replay_stream", calls: []goldenCall{{method: "POST", path: gemStreamPath,
			build: func() string { return gemReplay(ThoughtSignature("lookup")) }}}},
		{name: "gem_bad_signature", calls: post1(gemStreamPath, gemReplay([]byte("forged")))},
		{name: "gem_bad_missing_signature", calls: post1(gemStreamPath, gemReplay(nil))},
		{name: "gem_bad_response", calls: post1(gemStreamPath, gemBody(`[{"role":"user","parts":[{"functionResponse":{"name":"x","response":{}}}]}]`, ""))},
		{name: "gem_bad_ref", calls: post1(gemStreamPath, gemBody(gemUser,
			`,"tools":[{"functionDeclarations":[{"name":"f","parametersJsonSchema":{"type":"object","properties":{"a":{"$ref":"#/$defs/A","type":"string"}},"$defs":{"A":{}}}}]}]`))},
		{name: "gem_bad_method", calls: post1("/v1beta/models/mock-1:countTokens", gemBody(gemUser, ""))},
	}
}

func serverGoldenCases() []goldenCase {
	const (
		rules = `{"rules":[{"contains":"#weather","tool":"lookup","step":{"tool_calls":[{"id":"call_w","name":"lookup","arguments":"{\"city\":\"Florence\"}"}]}},` +
			`{"contains":"#fail","step":{"error":{"status":400,"message":"no","code":"bad"}}}],` +
			`"steps":[{"text":"first"},{"text":"second"}],"then":"repeat"}`
		named = `{"steps":[{"text":"from demo"}]}`
		slow  = `{"steps":[{"text":"a slow answer in several events","delay_ms":7,"chunk_delay_ms":3}]}`
	)
	chat := func(user string) goldenCall {
		return goldenCall{method: "POST", path: chatPath, body: chatBody(false, user, lookupChat)}
	}
	hookFails := func() Options {
		return Options{BeforeRespond: func(context.Context, *Request) error { return errors.New("hook says no") }}
	}
	chunkFails := func() Options {
		return Options{BeforeChunk: func(_ context.Context, _ *Request, n int) error {
			if n == 3 {
				return errors.New("stop")
			}
			return nil
		}}
	}
	return []goldenCase{
		{name: "server_rules_and_steps", script: rules, calls: []goldenCall{
			chat("what is the #weather"), chat("hello"), chat("#fail please"), chat("hello"), chat("hello"),
			{method: "POST", path: anthPath, body: anthBody(false, `[{"role":"user","content":"#weather"}]`, `,"tools":[{"name":"lookup","input_schema":{"type":"object"}}]`)},
		}},
		{name: "server_named_script", opts: func() Options {
			sc, err := ParseScript([]byte(named))
			if err != nil {
				panic(err)
			}
			return Options{Scripts: map[string]*Script{"demo": sc}}
		}, calls: []goldenCall{chat("[script:demo] hi"), chat("[script:demo] hi"), chat("[script:other] hi")}},
		{name: "server_stream_chunks", opts: func() Options {
			return Options{StreamChunks: 3, ChunkDelay: 10 * time.Millisecond, Latency: 5 * time.Millisecond}
		}, calls: []goldenCall{
			{method: "POST", path: chatPath, body: chatBody(true, "chunked answer with a few pieces of text in it")},
			{method: "POST", path: chatPath, body: chatBody(false, "chunked")},
			{method: "POST", path: anthPath, body: anthBody(true, anthUser, "")},
		}},
		{name: "server_delays", script: slow, calls: post1(chatPath, chatBody(true, "slow"))},
		{name: "server_hook_error", opts: hookFails, calls: []goldenCall{
			{method: "POST", path: chatPath, body: chatBody(false, "x")},
			{method: "POST", path: anthPath, body: anthBody(false, anthUser, "")},
			{method: "POST", path: gemJSONPath, body: gemBody(gemUser, "")},
		}},
		{name: "server_chunk_error", opts: chunkFails, calls: post1(chatPath, chatBody(true, "a stream cut by the hook after a few events"))},
		{name: "server_mockllm_error", calls: []goldenCall{
			{method: "POST", path: anthPath, body: anthBody(false, anthUser, `,"tools":[{"name":"coder_structured_output","input_schema":`+unsatisfiable+`}]`)},
			{method: "POST", path: respPath, body: respBody(false, `"x"`, `,"tools":[{"type":"function","name":"coder_structured_output","parameters":`+unsatisfiable+`}]`)},
		}},
		{name: "server_formats_limited", opts: func() Options { return Options{Formats: []string{FormatAnthropic}} }, calls: []goldenCall{
			{method: "POST", path: chatPath, body: chatBody(false, "x")},
			{method: "POST", path: "/messages", body: anthBody(false, anthUser, "")},
		}},
		{name: "server_routes", calls: []goldenCall{
			{method: "GET", path: "/v1/models"},
			{method: "GET", path: "/models/some-model"},
			{method: "GET", path: "/nowhere"},
			{method: "POST", path: "/chat/completions", body: chatBody(false, "no prefix")},
			{method: "GET", path: "/_mockllm/stats"},
			{method: "POST", path: "/_mockllm/stats/reset"},
		}},
	}
}

// writeSizes records where the handler's writes begin, to keep the event
// boundaries (one event per Write, which BeforeChunk relies on) in the
// golden files too.
type writeSizes struct {
	*httptest.ResponseRecorder
	sizes []int
}

func (w *writeSizes) Write(b []byte) (int, error) {
	w.sizes = append(w.sizes, len(b))
	return w.ResponseRecorder.Write(b)
}

// run answers the case's calls on a fresh server and renders each request
// and its whole response: status, headers, write sizes and body bytes.
func (c goldenCase) run(t *testing.T) []byte {
	var out bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		var opts Options
		if c.opts != nil {
			opts = c.opts()
		}
		if c.script != "" {
			sc, err := ParseScript([]byte(c.script))
			if err != nil {
				t.Fatal(err)
			}
			opts.Script = sc
		}
		s := New(opts)
		for _, call := range c.calls {
			body := call.body
			if call.build != nil {
				body = call.build()
			}
			r := httptest.NewRequestWithContext(t.Context(), call.method, call.path, strings.NewReader(body))
			w := &writeSizes{ResponseRecorder: httptest.NewRecorder()}
			s.ServeHTTP(w, r)
			fmt.Fprintf(&out, "=== %s %s\n%s\n--- %d\n", call.method, call.path, body, w.Code)
			h := w.Header()
			for _, k := range slices.Sorted(maps.Keys(h)) {
				fmt.Fprintf(&out, "%s: %s\n", k, strings.Join(h[k], ", "))
			}
			fmt.Fprintf(&out, "--- writes %v\n", w.sizes)
			out.Write(w.Body.Bytes())
			out.WriteString("\n")
		}
	})
	return out.Bytes()
}

// TestWireGolden pins the exact bytes every wire format writes (streamed
// and not, tool calls, thinking and its signatures, Gemini thought
// signatures, the modes, script rules and steps, errors) against files
// made from the code: a refactoring must leave them unchanged. The random
// ids and signatures come from a seeded crypto/rand and the clock is
// synctest's, so each run writes the same bytes. Regenerate with
// go test ./internal/mockllm -run TestWireGolden -update-golden.
//
// Not parallel: cryptotest.SetGlobalRandom replaces crypto/rand for the
// whole process, which a parallel test would draw from too.
func TestWireGolden(t *testing.T) {
	dir := filepath.Join("testdata", "golden")
	seen := map[string]bool{}
	for _, c := range goldenCases() {
		if seen[c.name] {
			t.Fatalf("duplicate golden case %s", c.name)
		}
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			cryptotest.SetGlobalRandom(t, 49)
			got := c.run(t)
			path := filepath.Join(dir, c.name+".golden")
			if *updateGolden {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update-golden to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the code's output:\n%s", path, firstDifference(want, got))
			}
		})
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".golden"); !seen[name] {
			t.Errorf("%s has no golden case", f)
		}
	}
}

// firstDifference shows the first line where want and got part.
func firstDifference(want, got []byte) string {
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := range max(len(wl), len(gl)) {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d\nwant: %.400s\ngot:  %.400s", i+1, w, g)
		}
	}
	return "same lines, different bytes"
}

// TestWireGoldenIsDeterministic guards the golden test itself: the same
// case run twice gives the same bytes, and a different seed changes them
// (the seed reaches the ids, so the files are not blind to them).
func TestWireGoldenIsDeterministic(t *testing.T) {
	c := goldenCase{name: "det", calls: []goldenCall{{method: "POST", path: gemStreamPath,
		build: func() string { return gemReplay(ThoughtSignature("lookup")) }}}}
	cryptotest.SetGlobalRandom(t, 1)
	a := c.run(t)
	cryptotest.SetGlobalRandom(t, 1)
	b := c.run(t)
	cryptotest.SetGlobalRandom(t, 2)
	d := c.run(t)
	if !bytes.Equal(a, b) {
		t.Fatalf("same seed, different bytes:\n%s", firstDifference(a, b))
	}
	if bytes.Equal(a, d) {
		t.Fatal("a different seed gave the same bytes: the ids are not under the seed")
	}
	if !strings.Contains(string(a), `"thoughtSignature"`) || !strings.Contains(string(a), "--- 200") {
		t.Fatalf("the replay was not answered with a signature:\n%s", a)
	}
}

// generationSchemas add to generatorSchemas the cases that reach the rest
// of value generation: Draft-04 bounds, grids, merges, distinct elements,
// near misses of every kind, schemas with no answer.
var generationSchemas = []string{
	`{"type":"array","items":{"type":"string"},"maxItems":2,"minItems":1}`,
	`{"type":"string","maxLength":4}`,
	`{"type":"integer","minimum":1,"maximum":5}`,
	`{"type":"number","exclusiveMinimum":true,"minimum":0}`,
	`{"type":"number","minimum":2,"exclusiveMinimum":true,"maximum":3}`,
	`{"type":"number","maximum":-5}`,
	`{"type":"number","exclusiveMaximum":-5}`,
	`{"type":"number","minimum":-7.25,"exclusiveMaximum":-5}`,
	`{"type":"integer","maximum":-5,"multipleOf":3}`,
	`{"type":"integer","exclusiveMaximum":-6,"multipleOf":3}`,
	`{"type":"number","exclusiveMinimum":0.25,"multipleOf":0.25}`,
	`{"type":"integer","exclusiveMinimum":8,"exclusiveMaximum":9}`,
	`{"type":"array","items":[{"type":"integer"}],"additionalItems":{"type":"string"},"minItems":3}`,
	`{"type":"array","items":[{"type":"integer"},{"type":"boolean"}],"additionalItems":false}`,
	`{"type":"array","items":{"type":"integer"},"uniqueItems":true,"minItems":3,"contains":{"const":7}}`,
	`{"type":"array","items":{"type":"number","minimum":1,"maximum":2},"minItems":5,"uniqueItems":true}`,
	`{"type":"array","items":{"type":"integer","maximum":3,"multipleOf":2},"minItems":4,"uniqueItems":true}`,
	`{"type":"array","items":false}`,
	`{"type":"array","items":false,"minItems":1}`,
	`{"type":"array","maxItems":0}`,
	`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a","b"]}`,
	`{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"},"minItems":1}},"required":["a"]}`,
	`{"type":"object","maxProperties":0}`,
	`{"allOf":[{"type":["integer","string"]},{"type":["number"]}],"minimum":2,"maximum":9,"multipleOf":2}`,
	`{"allOf":[{"minLength":2,"maxLength":9},{"minLength":4,"maxLength":6}],"type":"string"}`,
	`{"allOf":[{"minimum":1,"exclusiveMaximum":10},{"minimum":3,"exclusiveMaximum":8}],"type":"integer"}`,
	`{"allOf":[{"multipleOf":0.3},{"multipleOf":0.4}],"type":"number"}`,
	`{"allOf":[{"items":{"minimum":3}},{"items":{"maximum":5}}],"type":"array","minItems":2,"uniqueItems":true}`,
	`{"allOf":[{"items":[{"type":"integer"}]},{"items":{"type":"integer"}}],"type":"array","minItems":1}`,
	`{"allOf":[{"not":{"const":1}},{"not":{"const":0}}],"type":"integer"}`,
	`{"allOf":[{"uniqueItems":true},{"uniqueItems":false,"minItems":2}],"type":"array","items":{"type":"boolean"}}`,
	`{"allOf":[{"additionalProperties":{"type":"integer"}},{"additionalProperties":{"minimum":4}}],"minProperties":1}`,
	`{"allOf":[{"properties":{"a":{"type":"string"}},"required":"a"},{"required":["b"]}]}`,
	`{"anyOf":[{"type":"string","minLength":3},{"type":"integer","maximum":-1}],"not":{"type":"string"}}`,
	`{"type":"string","format":"date","minLength":12}`,
	`{"type":"string","pattern":"^x{2,3}[^a-z]$","maxLength":3}`,
	`{"type":"string","pattern":"(?=lookahead)"}`,
	`{"type":"string","pattern":"^\\p{Greek}+\\s.$"}`,
	`{"type":"string","enum":[1,2]}`,
	`{"type":"object","propertyNames":{"maxLength":3},"minProperties":1}`,
	`{"type":"object","dependencies":{"a":{"required":["b"]}},"properties":{"a":{"type":"integer"}},"required":["a"]}`,
	`{"$ref":"#/definitions/a","definitions":{"a":{"$ref":"#/definitions/a"}}}`,
	`{"$ref":"#/nowhere"}`,
	`{"$ref":"#","minimum":3,"title":"self"}`,
	`{"type":"number","multipleOf":1e-3,"minimum":1e2}`,
	`{"type":"number","minimum":1e999}`,
	`{}`,
	`true`,
	`false`,
	`[]`,
}

// TestGenerateGolden pins GenerateValue's and GenerateInvalid's answers
// (values and errors) for every schema the generation tests use, in
// testdata/generate.golden; the values are the tool call arguments the
// wire formats send, so a refactoring must leave them unchanged.
// Regenerate with -update-golden.
func TestGenerateGolden(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	schemas := slices.Clone(generationSchemas)
	for _, tc := range generatorSchemas {
		schemas = append(schemas, tc.schema)
	}
	for _, schema := range schemas {
		fmt.Fprintf(&out, "%s\n", schema)
		v, err := GenerateValue(json.RawMessage(schema))
		fmt.Fprintf(&out, "  valid:   %s %v\n", v, err)
		v, err = GenerateInvalid(json.RawMessage(schema))
		fmt.Fprintf(&out, "  invalid: %s %v\n", v, err)
	}
	path := filepath.Join("testdata", "generate.golden")
	if *updateGolden {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-golden to create it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("%s differs from the code's output:\n%s", path, firstDifference(want, out.Bytes()))
	}
}
