// Package mockllm is a local LLM provider for chatd's tests, demos and
// benchmarks. It speaks three wire formats, each on its own route, shaped
// after the recorded traffic in fantasy's providertests/testdata cassettes:
//
//   - OpenAI Chat Completions (FormatOpenAI, POST /v1/chat/completions; chatd
//     types openai-compatible and openai-chat, base URL http://HOST/v1):
//     streaming server-sent events (chat.completion.chunk, tool-call deltas
//     with index/id/type/function, delta.reasoning_content, delta.refusal, a
//     finish_reason chunk, a usage chunk with empty choices when
//     stream_options.include_usage is set, then "data: [DONE]") or a plain
//     chat.completion JSON object.
//   - OpenAI Responses (FormatResponses, POST /v1/responses; type openai,
//     base URL http://HOST/v1): named events response.created,
//     output_item.added/done for reasoning (summary parts and deltas),
//     message (output_text or refusal parts) and function_call items
//     (arguments deltas), then response.completed or, for length and
//     content_filter, response.incomplete with its reason; or the response
//     object as JSON.
//   - Anthropic Messages (FormatAnthropic, POST /v1/messages; type
//     anthropic, base URL http://HOST since the SDK adds /v1): message_start,
//     content_block_start/delta/stop with thinking_delta + signature_delta,
//     text_delta and input_json_delta, message_delta with stop_reason
//     (end_turn, tool_use, max_tokens, refusal), message_stop; or the
//     message as JSON.
//
// Errors come in each format's envelope ({"error":{"message","type","param",
// "code"}} for OpenAI, {"type":"error","error":{"type","message"}} with
// Anthropic's error types for Anthropic) with Retry-After. GET /v1/models
// answers for every model. Options.Formats limits the formats served;
// anything else is a JSON 404.
//
// Like the real APIs, the mock refuses (400) a conversation that breaks the
// format's rules, so that replay bugs fail tests: a tool result without its
// call or a call without its result (all formats), an Anthropic thinking
// block whose signature it did not issue (see SignThinking) or missing
// before the tool_use of the turn being continued while thinking is on, an
// Anthropic thinking budget under 1024 or not below max_tokens, a Responses
// item_reference (store is false), and a tool sent with strict:true whose
// schema is not in OpenAI's strict subset (every property required,
// additionalProperties:false).
//
// # Unscripted answers
//
// When the request offers the finalizer tool coder_structured_output, the
// answer is exactly one call of it with arguments {"output": V}, V generated
// by GenerateValue to satisfy the tool's output schema (Options.Mode
// "invalid" generates a violating V instead; "text" never calls the tool).
// Otherwise the answer is the text "mockllm: " followed by the last user
// message, cut to 200 bytes.
//
// # Scripts
//
// A Script gives one Step per request, in order; when the steps run out the
// server answers unscripted again ("then": "unscripted", the default) or
// repeats the last step ("then": "repeat"). Options.Scripts holds named
// scripts: a conversation whose first user message contains
// "[script:NAME]" plays Scripts[NAME], each at its own position, so one
// server can play many conversations at once. Example:
//
//	{
//	  "steps": [
//	    {"invalid": true},
//	    {"text_only": true, "text": "I'm not done yet."},
//	    {"error": {"status": 500, "message": "upstream overloaded", "retry_after": 1}},
//	    {"error": {"status": 429, "retry_after": 2, "should_retry": false}},
//	    {"text": "Let me think.", "truncate": true},
//	    {"reasoning": "The user wants a title.", "value": {"title": "Hello"}},
//	    {"tool_calls": [
//	      {"name": "read_file", "arguments": "{\"path\":\"README.md\"}"},
//	      {"id": "call_fixed", "name": "coder_structured_output", "value": 42}
//	    ], "chunk_delay_ms": 20},
//	    {"tool_calls": [{"name": "read_file", "arguments": "{not json"}]},
//	    {"text": "cut short", "finish_reason": "length", "delay_ms": 250},
//	    {}
//	  ],
//	  "then": "repeat"
//	}
//
// Step fields (all optional):
//
//   - text: assistant text; alone it is the whole answer, with tool calls
//     it comes first.
//   - tool_calls: calls sent as given; id defaults to a fresh call_ id,
//     arguments is sent verbatim even if it is not JSON, and value (instead
//     of arguments) makes the arguments {"output": value}.
//   - value: one coder_structured_output call with arguments
//     {"output": value}, the value's bytes kept exactly as written.
//   - invalid: one coder_structured_output call whose output violates the
//     offered schema (arguments {} if the tool is not offered).
//   - text_only: text even though the finalizer is offered (text defaults
//     to the unscripted echo).
//   - refusal: a refusal with this text, in the format's shape
//     (delta.refusal, a Responses refusal part, Anthropic stop_reason
//     "refusal").
//   - reasoning: sent first: delta.reasoning_content (non-streaming:
//     message.reasoning_content), which fantasy's openaicompat provider
//     reports as reasoning; a Responses reasoning item with this summary;
//     an Anthropic thinking block with its signature, only when the request
//     enabled thinking (which then always gets one, by default a short
//     one).
//   - finish_reason: stop, length, content_filter or tool_calls instead of
//     the natural one (Responses: length and content_filter end as
//     response.incomplete; Anthropic: max_tokens and refusal).
//   - error: {status (default 500), message, type, code, retry_after
//     (seconds, Retry-After header), should_retry (x-should-retry header,
//     which the bare openai-go SDK obeys instead of retrying 408/409/429/5xx
//     twice; fantasy disables SDK retries and retries in its agent)}; the
//     other fields are then ignored.
//   - delay_ms: wait before responding, on top of Options.Latency.
//   - chunk_delay_ms: wait between stream chunks instead of
//     Options.ChunkDelay.
//   - truncate: send only the first half of the response. A stream ends
//     without its terminal event (finish_reason / response.completed /
//     message_stop); fantasy reports that as a retryable incomplete-stream
//     error, except on Chat Completions when a tool call had already
//     started, which it then reports as a tool call with partial arguments
//     (chatd detects the missing finish_reason on the wire). A JSON body is
//     cut in half.
//
// tool_calls, value, invalid, text_only and refusal are mutually exclusive;
// unknown keys are rejected. An empty step {} is the unscripted answer, so
// {"delay_ms": 500} is "the normal answer, slowly".
//
// # Value generation
//
// GenerateValue builds a value for a Draft-07 schema and checks it with a
// small built-in validator before returning it; GenerateInvalid builds one
// the validator rejects. Supported: boolean schemas, local $ref (#/...),
// type (string or array: the first type that works), const, enum (first
// fitting entry), properties / required / additionalProperties /
// patternProperties / min-maxProperties / array-form dependencies, items
// (schema or tuple) / additionalItems / min-maxItems / uniqueItems /
// contains, min-maxLength / format (email, date, date-time, time, uri,
// uri-reference, iri, iri-reference, uri-template, uuid, ipv4, ipv6,
// hostname, json-pointer, relative-json-pointer, regex) / pattern, numbers
// with minimum / maximum / exclusiveMinimum / exclusiveMaximum (number or
// Draft-04 boolean) / multipleOf in exact rational arithmetic, integer,
// allOf (merged), anyOf / oneOf (branches tried in order), not and
// if/then/else (candidates are filtered by the validator).
//
// Limits: patterns are matched with Go's RE2, so ECMA-only syntax
// (lookaround, backreferences) is ignored, and strings for a pattern are
// built from its syntax tree with a few repetition counts, which may fail to
// meet length bounds or a second pattern from allOf; format and pattern are
// not combined (a format example must match the pattern as is); only local
// $ref is resolved ($id, remote refs and $ref siblings are not); schema-form
// dependencies and propertyNames are checked but not used to build values;
// nesting is limited to 32 levels and the work per call is bounded, so
// deeply recursive or combinatorially large schemas fail with an error
// instead of hanging. Numbers whose exponent exceeds 400 are not handled.
package mockllm
