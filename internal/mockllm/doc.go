// Package mockllm is a local LLM provider for chatd's tests, demos and
// benchmarks. It speaks four wire formats, each on its own route, shaped
// after the recorded traffic in fantasy's providertests/testdata cassettes:
//
//   - OpenAI Chat Completions (FormatOpenAI, POST /v1/chat/completions; chatd
//     types openai-compatible and openai-chat, base URL http://HOST/v1):
//     streaming server-sent events (chat.completion.chunk, tool-call deltas
//     with index/id/type/function, delta.reasoning_content (or, for a step
//     with ReasoningDetails, OpenRouter's delta.reasoning and
//     delta.reasoning_details with a signature), delta.refusal, a
//     finish_reason chunk, a usage chunk with empty choices when
//     stream_options.include_usage is set, then "data: [DONE]") or a plain
//     chat.completion JSON object.
//   - OpenAI Responses (FormatResponses, POST /v1/responses; type openai,
//     base URL http://HOST/v1): named events response.created,
//     output_item.added/done for reasoning (summary parts and deltas; with
//     include reasoning.encrypted_content, the done item's encrypted
//     content, see EncryptReasoning, and a placeholder on the added item),
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
//   - Gemini (FormatGemini, POST /v1beta/models/MODEL:streamGenerateContent
//     and :generateContent; type google, base URL http://HOST since genai
//     adds /v1beta): events "data: {...}" with candidates[0].content.parts
//     (thought text when the request includes thoughts, text, whole
//     functionCall parts with ids), the cumulative usageMetadata on every
//     event and the finishReason (STOP, MAX_TOKENS, SAFETY,
//     MALFORMED_FUNCTION_CALL) on the last; or the response as JSON. The
//     first function call of an answer carries a binary thoughtSignature
//     (see ThoughtSignature), an answer without calls one on its last part.
//
// Errors come in each format's envelope ({"error":{"message","type","param",
// "code"}} for OpenAI, {"type":"error","error":{"type","message"}} with
// Anthropic's error types for Anthropic, {"error":{"code","message",
// "status"}} for Gemini, whose retry delay is a google.rpc.RetryInfo
// detail instead) with Retry-After. GET /v1/models answers
// for every model. GET /_mockllm/stats counts the calls in flight (see
// Stats). Options.Formats limits the formats served; anything else is a
// JSON 404.
//
// Like the real APIs, the mock refuses (400) a conversation that breaks the
// format's rules, so that replay bugs fail tests: a tool result without its
// call or a call without its result (all formats), an Anthropic thinking
// block whose signature it did not issue (see SignThinking) or missing
// before the tool_use of the turn being continued while thinking is on, an
// Anthropic thinking budget under 1024 or not below max_tokens, a Chat
// Completions reasoning_details entry whose signature it did not issue or
// an assistant message that replays reasoning sent as reasoning_details
// without them, a Responses item_reference (store is false) or reasoning
// item without an encrypted content it issued or without its following
// item, a Gemini thought signature it did not issue ("Corrupted thought
// signature.") or a function call of the current turn (after the last
// user text) whose content's first call lacks its signature, a Gemini
// function response without its call, a $ref beside keywords other than
// description and default or not of the form "#/$defs/NAME", and a tool
// sent with strict:true whose
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
// A Script (docs/mockllm.md documents the file format) has rules, which
// answer by content — the first Rule whose text the request's last user
// message contains answers it — and steps, one per request, in order; when
// the steps run out the server answers unscripted again ("then":
// "unscripted", the default) or repeats the last step ("then": "repeat"). A
// step with hold waits until the client leaves or Server.Release is called.
// Options.Scripts holds named scripts: a conversation whose first user
// message contains "[script:NAME]" plays Scripts[NAME], each at its own
// position, so one server can play many conversations at once.
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
// $ref is resolved, recursion included ($id and remote refs are not), and
// keywords beside a $ref apply with it (the 2020-12 reading); schema-form
// dependencies and propertyNames are checked but not used to build values;
// nesting is limited to 32 levels and the work per call is bounded, so
// deeply recursive or combinatorially large schemas fail with an error
// instead of hanging. Numbers whose exponent exceeds 400 are not handled.
//
// # Reading the code
//
// A request passes through the files in this order:
//
//   - server.go: Options, New (the routes) and Server.serve, the steps of
//     every request: admit (read, parse, check, record), chooseStep, wait,
//     plan, write. server_pacing.go times the bytes (latency, chunk
//     delays, StreamChunks, the BeforeChunk hook); server_stats.go counts
//     the calls in flight.
//   - wire.go: what the wire formats share: Request (a request in a form
//     common to them), reply (an answer independent of them) and the
//     wireFormat interface. Each format is one file that parses and checks
//     its requests and writes its answers, streams and errors:
//     wire_chat.go (Chat Completions), wire_responses.go (Responses),
//     wire_anthropic.go (Anthropic Messages), wire_gemini.go (Gemini);
//     wire_openai.go holds what the two OpenAI formats share.
//   - script.go: the script format (Script, Rule, Step) and its checks;
//     script_play.go picks the step that answers a request (a rule, the
//     script's next step, or none) and makes its reply, the unscripted
//     answers included.
//   - generate.go: GenerateValue, GenerateInvalid and the candidates of
//     each type; generate_flatten.go resolves $ref and flattens allOf,
//     anyOf, oneOf and if/then/else; generate_scalars.go builds strings
//     and numbers (exact arithmetic); generate_validator.go is the
//     validator that picks among candidates; generate_invalid.go makes
//     the near misses.
package mockllm
