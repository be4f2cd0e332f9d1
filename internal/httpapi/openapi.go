package httpapi

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
)

// The OpenAPI 3.0 document at /api/v1/openapi.json is built once, at
// start-up, from routeTable and routeDocs; component schemas are derived by
// reflection from the wire types of package client, so they follow the types.

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(s.openapi)
	return nil
}

// OpenAPIDocument is the document GET /api/v1/openapi.json serves.
func (s *Server) OpenAPIDocument() []byte { return s.openapi }

// publicTypes are every wire type of package client, referenced by a route
// or not; a test checks that no exported struct type of the package is
// missing.
var publicTypes = []any{
	client.Chat{}, client.ToolCall{}, client.DynamicTool{}, client.MessagePart{}, client.ChatMessage{},
	client.StructuredOutput{}, client.StructuredOutputError{}, client.QueuedMessage{}, client.ResponseFormat{},
	client.JSONSchemaFormat{}, client.CreateChatRequest{}, client.CreateChatResponse{}, client.SendMessageRequest{},
	client.UpdateChatRequest{}, client.EditMessageRequest{}, client.EditMessageResponse{}, client.DeleteQueuedResponse{},
	client.ToolResultsRequest{}, client.ToolResult{}, client.SendMessageResponse{}, client.ListChatsResponse{},
	client.ListMessagesResponse{}, client.StructuredOutputResult{}, client.Error{}, client.ValidationError{},
	client.ToolResultsResponse{}, client.Health{}, client.StreamTicket{}, client.Usage{},
	client.MessagePartEvent{}, client.PreviewReset{}, client.QueueEvent{}, client.ActionRequired{}, client.StreamError{},
	client.StructuredOutputPartial{},
	client.Attempt{}, client.AttemptError{}, client.SchemaWarning{},
	client.CreateTokenRequest{}, client.CreateTokenResponse{}, client.Token{}, client.ListTokensResponse{},
	client.User{}, client.ListUsersResponse{},
}

// typeDocs describe each component schema (keyed by Go type name).
var typeDocs = map[string]string{
	"Chat":                  "A conversation owned by one user.",
	"ToolCall":              "A pending call of a client-executed tool.",
	"DynamicTool":           "A client-executed tool declared on a chat.",
	"MessagePart":           "One element of a message's content. Input messages take text parts only (`type` and `text`, with text that is not empty or only whitespace).",
	"ChatMessage":           "A committed message. A receipt is an assistant message with `structured_output`.",
	"StructuredOutput":      "The terminal outcome of a structured request, carried only by its receipt message.",
	"StructuredOutputError": "Why a structured request failed or was cancelled.",
	"Attempt":               "One rejected attempt at a structured request's result (a finalization the server refused), with why.",
	"AttemptError":          "One reason an attempt was rejected.",
	"SchemaWarning":         "Something in a response_format schema that chatd admitted but does not check: an unknown keyword or format (an annotation, as JSON Schema says), a key named as an annotation (`_…`, `x-…`, a comment), a keyword the document's dialect does not have, or a keyword beside a Draft-04/06/07 `$ref` (which those dialects ignore).",
	"QueuedMessage":         "A message waiting for the running turn to finish.",
	"ProviderRetry": "A provider call of the running turn that failed and will be made again: the chat's and the lookup's " +
		"`provider_retry`, and the stream's `provider_retry` event.",
	"ResponseFormat":         "Asks for structured output (`json_schema`) or ordinary text (`text`).",
	"JSONSchemaFormat":       "Names and describes the output schema of a structured request.",
	"CreateChatRequest":      "The body of POST /api/v1/chats.",
	"CreateChatResponse":     "The new chat and its first message.",
	"SendMessageRequest":     "The body of POST /api/v1/chats/{chat}/messages.",
	"UpdateChatRequest":      "The body of PATCH /api/v1/chats/{chat}; omitted fields are kept.",
	"EditMessageRequest":     "The body of PATCH /api/v1/chats/{chat}/messages/{message}.",
	"EditMessageResponse":    "What an edit wrote and discarded.",
	"DeleteQueuedResponse":   "The deleted queued message and its cancellation receipt, if it was structured.",
	"ToolResultsRequest":     "Results for every pending client tool call.",
	"ToolResult":             "The output of one client tool call.",
	"SendMessageResponse":    "Where a sent message went: into history (`message`) or the queue (`queued_message`).",
	"ListChatsResponse":      "The caller's chats.",
	"ListMessagesResponse":   "A page of client-visible messages and the chat's whole queue.",
	"StructuredOutputResult": "The state of a structured request by its UUID.",
	"Error":                  "The body of every error response.",
	"ValidationError":        "A request field at fault.",
	"ToolResultsResponse":    "The chat after submitting tool results, and the stored tool message.",
	"Health":                 "A health or readiness answer.",
	"StreamTicket":           "A single-use ticket to open a chat's stream without the Authorization header.",
	"CreateTokenRequest":     "The body of POST /api/v1/tokens.",
	"CreateTokenResponse":    "A new API token: its secret, shown this once (only a digest is stored), and its description.",
	"Token":                  "An API token (never its secret).",
	"ListTokensResponse":     "API tokens, by user name and age.",
	"User": "A chatd user: one named by an operator, or an identity provider's user, keyed by `issuer` and `subject` " +
		"and named `idp:` and a digest of them.",
	"ListUsersResponse": "A page of users by name.",
	"DeleteChatResponse": "What DELETE /api/v1/chats/{chat} removed: the chat and its child chats, and the structured " +
		"requests it cancelled (`chat_deleted`).",
	"ChatDeletion": "A deleted chat's tombstone, as the lookup of one of its structured requests tells it.",
	"ErasureReport": "What erasing a user removed, counted in rows; `cancelled_requests` were pending and got their " +
		"cancelled receipt (`chat_deleted`) first.",
	"MessagePartEvent": "Stream event `message_part`: a preview fragment of the step being generated. Not a result.",
	"PreviewReset":     "Stream event `preview_reset`: previews of earlier generations are void.",
	"StructuredOutputPartial": "Stream event `structured_output_partial`: the value the finalizer call's arguments show so far, " +
		"while the model writes them. Never a result: it may still fail validation, and `preview_reset` voids it.",
	"QueueEvent":     "Stream event `queue`: the whole queue after a change.",
	"ActionRequired": "Stream event `action_required`: the client tool calls the chat waits for.",
	"StreamError":    "Stream event `error`: a failed turn, or the end of the stream because the chat is gone.",
	"Usage": "Tokens of provider steps by kind, as the provider reported them. A null figure was not reported " +
		"(it is not zero). `input_tokens` excludes the cache: the prompt was input + cache_read + cache_write; " +
		"`reasoning_tokens` are part of `output_tokens`.",
}

// scopeRef is the schema of a token scope.
var scopeRef = map[string]any{"type": "string", "enum": client.Scopes()}

// fieldDocs refine the reflected schema of single properties (keyed
// "Type.json_name"): descriptions, enums and bounds the Go types cannot say.
// A test checks that every key names an existing property.
var fieldDocs = map[string]map[string]any{
	"Chat.status":             {"enum": client.ChatStatuses()},
	"Chat.mode":               {"enum": client.ChatModes()},
	"Chat.parent_chat_id":     {"description": "Set on a child chat."},
	"Chat.last_error":         {"description": "Only while `status` is `error`: why the last turn failed (a code such as `provider_error` and a short sentence)."},
	"Chat.pending_tool_calls": {"description": "Only while `status` is `requires_action`: the calls to answer with POST .../tool-results."},
	"ToolCall.args":           {"description": "The arguments the model sent (any JSON value)."},
	"DynamicTool.name":        {"pattern": "^[A-Za-z0-9_-]{1,64}$"},
	"DynamicTool.description": {"description": "At most 1024 bytes."},
	"DynamicTool.input_schema": {"type": "object", "additionalProperties": true, "description": "A JSON Schema object for the tool's arguments, " +
		"at most 256 KiB and 64 levels deep."},
	"MessagePart.type": {"description": "One of `text`, `reasoning`, `tool-call`, `tool-result`, `file`, `source`; " +
		"ignore types you do not know."},
	"MessagePart.args":   {"description": "Arguments of a `tool-call` part (any JSON value)."},
	"MessagePart.result": {"description": "Output of a `tool-result` part (any JSON value)."},
	"ChatMessage.role":   {"enum": []client.Role{client.RoleUser, client.RoleAssistant, client.RoleTool}},
	"ChatMessage.structured_output_request_id": {"description": "Set on the user message that asked for structured output: " +
		"the server-minted request UUID."},
	"ChatMessage.structured_output": {"description": "Set only on a receipt: the terminal outcome of the request it names. " +
		"Only this field of a committed receipt is a result."},
	"StructuredOutput.status": {"enum": []client.RequestStatus{client.OutputSucceeded, client.OutputFailed, client.OutputCancelled}},
	"StructuredOutput.value": {"description": "Present exactly when `status` is `succeeded`: the validated value, " +
		"any JSON type, JSON null included (null is a value, distinct from an absent field)."},
	"StructuredOutput.error":             {"description": "Present when `status` is `failed` or `cancelled`."},
	"StructuredOutputError.code":         {"enum": client.ErrorCodes()},
	"MessagePart.args_delta":             {"description": "A fragment of a tool call's arguments; only in `message_part` previews."},
	"StructuredOutputPartial.request_id": {"description": "The structured request the finalizer call answers."},
	"StructuredOutputPartial.seq":        {"description": "The `seq` of the last `message_part` fragment the value includes."},
	"StructuredOutputPartial.value": {"description": "The parse of the arguments' prefix's `output` member: strings and " +
		"containers closed where the prefix stops, a number, `true`, `false` or `null` only once complete, an object key only " +
		"with its value. Each value of a call extends the previous one (strings grow, arrays and objects gain members)."},
	"StructuredOutputError.message": {"description": "A sentence for people; do not parse it. For `validation_exhausted` and `not_produced` it " +
		"says how many attempts were rejected and the first error of the last (`3 attempts were rejected; the last: /command must be of type " +
		"string, not integer.`); the attempts list every error."},
	"StructuredOutputError.attempts": {"description": "On a `failed` receipt (a message): the request's rejected attempts, in order " +
		"(at most 3, as many as it had). Absent when there were none, and always absent from the lookup's `error`, which lists them " +
		"as its own `attempts`."},
	"Attempt.attempt": {"minimum": 1, "description": "Numbers the request's rejected attempts from 1."},
	"Attempt.reason":  {"enum": client.AttemptReasons(), "description": "What kind of rejection it was."},
	"Attempt.errors": {"maxItems": client.AttemptMaxErrors, "description": "The first 20 errors: for `invalid_value`, the schema keywords " +
		"the value failed (validator order); otherwise one error whose keyword is a code."},
	"Attempt.errors_total": {"minimum": 1, "description": "How many errors were found in all."},
	"Attempt.truncated":    {"description": "True when `errors_total` is more than `errors` holds."},
	"AttemptError.instance_path": {"description": "A JSON Pointer into the submitted value (`\"\"` is the whole value); " +
		"at most 1,024 bytes, a longer one is cut and ends with `…`."},
	"AttemptError.keyword": {"description": "The Draft-07 keyword that failed (`type`, `required`, `minLength`, `additionalProperties`, ...) " +
		"or a code: `invalid_json`, `too_large`, `unstorable`, `arguments_shape`, `budget`, `internal`, or the attempt's reason " +
		"(`text_only`, `ineligible_step`, `invalid_batch`, `provider_tools`, `schema_unavailable`)."},
	"AttemptError.message": {"description": "A sentence for people, at most 512 bytes (a longer one is cut and ends with `…`); do not parse it."},
	"StructuredOutputResult.attempts": {"description": "The request's rejected attempts so far, whatever its status: the repairs a " +
		"`succeeded` request needed, or why a `failed` one failed (the receipt's `error.attempts`; the lookup's `error` leaves them out). " +
		"Absent when there were none."},
	"StructuredOutputResult.trace_id": {"pattern": "^[0-9a-f]{32}$", "description": "The OpenTelemetry trace id of the request: " +
		"the API call that admitted it (the caller's own trace when it sent a `traceparent`), its turn and its webhook deliveries " +
		"(docs/operations.md#traces). Absent when the server does not trace, or did not when the request was admitted."},
	"CreateTokenRequest.user": {"minLength": 1, "description": "The user the token is for, by name (created on first use); " +
		"an identity provider's user by its `idp:` name."},
	"CreateTokenRequest.scopes": {"items": scopeRef, "description": "What the token may do: `read` (GET routes and streams), " +
		"`write` (everything a user does; brings `read`), `admin` (this token and user API). Omitted: `read` and `write`."},
	"CreateTokenRequest.act_as": {"description": "The token may send `X-Chatd-User` to act for any user " +
		"(docs/operations.md#identity); for an application's backend."},
	"CreateTokenRequest.expires_in": {"minimum": 0, "maximum": maxTokenExpiresIn,
		"description": "Seconds until the token stops working, on the database clock; omitted or 0: never."},
	"Token.scopes":                  {"items": scopeRef},
	"Token.user":                    {"description": "The user's name."},
	"Token.last_used_at":            {"description": "When the token last authenticated a request (refreshed at most once a minute)."},
	"Token.expires_at":              {"description": "Absent: the token never expires."},
	"Token.expired":                 {"description": "Whether `expires_at` has passed (the token no longer works)."},
	"User.issuer":                   {"description": "Set for an identity provider's user: the `iss` of its JWTs."},
	"User.subject":                  {"description": "Set for an identity provider's user: the value of the server's user claim (`sub` by default)."},
	"ListUsersResponse.next_cursor": {"description": "Present when more users follow: pass it as `cursor`."},
	"QueuedMessage.structured_output_request_id": {"description": "Set when the queued message asks for structured output."},
	"ResponseFormat.type":                        {"enum": []string{"text", "json_schema"}},
	"ResponseFormat.json_schema":                 {"description": "Required with `json_schema`, forbidden with `text`."},
	"JSONSchemaFormat.name":                      {"pattern": "^[A-Za-z0-9_-]{1,64}$"},
	"JSONSchemaFormat.description":               {"description": "At most 1024 UTF-8 bytes."},
	"JSONSchemaFormat.strict": {"enum": []any{true}, "description": "Accepted for requests written for OpenAI's response_format, " +
		"and changes nothing: chatd always validates the result against the whole schema. `false` is refused (400)."},
	"JSONSchemaFormat.schema": {"type": "object", "additionalProperties": true, "description": "An inline JSON Schema document of Draft-04, -06, -07, 2019-09 or 2020-12 " +
		"(its $schema; Draft-07 when absent), read as its dialect says (an object; the value it describes may be of any JSON type). " +
		"Local references only ($ref to #… within the document, definitions, $defs); unknown keywords are annotations, warned; at most 512 KiB."},
	"CreateChatRequest.model":           {"description": "A model id of the server; omitted: the server's default model."},
	"CreateChatRequest.system_prompt":   {"description": "At most 64 KiB."},
	"CreateChatRequest.title":           {"description": "At most 256 bytes; omitted: taken from the first message."},
	"CreateChatRequest.content":         {"minItems": 1, "maxItems": 64, "items": textPartRef, "description": "Text parts only."},
	"CreateChatRequest.response_format": {"nullable": true, "description": "Omitted or null: an ordinary text answer."},
	"CreateChatRequest.plan_mode":       {"description": "Start in plan mode (no structured output there)."},
	"CreateChatRequest.parent_chat_id": {"description": "Make a child chat of one of the caller's chats " +
		"(no structured output there)."},
	"CreateChatRequest.dynamic_tools": {"maxItems": 64, "description": "Client-executed tools, names unique."},
	"CreateChatRequest.mcp_servers": {"maxItems": 16,
		"description": "Opt the chat into MCP servers the operator configured, by name (docs/tools.md); " +
			"an unknown name, or a server not available to the chat's model, is a 400 naming mcp_servers.N."},
	"Chat.mcp_servers": {"description": "The MCP servers the chat opted into at creation."},
	"Chat.parent_tool_call_id": {"description": "Set on a chat its parent's agent spawned with spawn_agent: the id of that tool call, " +
		"which the child's outcome answers (docs/tools.md)."},
	"Chat.spawn_agents": {"description": "The chat may spawn child chats with the spawn_agent tool (its children inherit this)."},
	"Chat.spawn_depth":  {"description": "How many spawns deep the chat is: 0 for a chat created through the API."},
	"CreateChatRequest.spawn_agents": {"description": "Opt the chat into the spawn_agent server tool (the agent may start child chats " +
		"and wait for their results, docs/tools.md). A 400 naming spawn_agents when the server does not enable it."},
	"SendMessageRequest.content":         {"minItems": 1, "maxItems": 64, "items": textPartRef, "description": "Text parts only."},
	"SendMessageRequest.response_format": {"nullable": true, "description": "Omitted or null: an ordinary text answer."},
	// No "default" keyword on request fields: generators make such fields
	// required in request types.
	"SendMessageRequest.busy_behavior": {"enum": []string{client.BusyQueue, client.BusyInterrupt},
		"description": "While a turn runs: `queue` the message (when omitted), or queue it and `interrupt` the running turn."},
	"SendMessageRequest.plan_mode": {"description": "Switch the chat's plan mode before the message is taken."},
	"UpdateChatRequest.title":      {"description": "At most 256 bytes."},
	"EditMessageRequest.content":   {"minItems": 1, "maxItems": 64, "items": textPartRef, "description": "Text parts only."},
	"EditMessageRequest.response_format": {"nullable": true, "description": "Omitted or null: keep the edited message's format; " +
		"`{\"type\":\"text\"}`: clear it; a json_schema format: replace it."},
	"EditMessageResponse.message": {"description": "The replacement."},
	"EditMessageResponse.messages": {"description": "Every client-visible row the edit inserted, in id order: " +
		"the cancellation receipts, then the replacement."},
	"EditMessageResponse.deleted_message_ids": {"description": "The client-visible messages the edit discarded."},
	"DeleteQueuedResponse.messages":           {"description": "The `cancelled` receipt of a structured queued message; empty otherwise."},
	"CreateChatResponse.warnings":             {"maxItems": client.MaxSchemaWarnings, "description": "What the response_format schema holds that chatd admitted but does not check (the first 32, in document order); absent when there is nothing."},
	"SendMessageResponse.warnings":            {"maxItems": client.MaxSchemaWarnings, "description": "As CreateChatResponse.warnings."},
	"EditMessageResponse.warnings":            {"maxItems": client.MaxSchemaWarnings, "description": "As CreateChatResponse.warnings, for a format the edit set (none when it kept or cleared the format)."},
	"SchemaWarning.location":                  {"description": "The JSON Pointer of the keyword in the schema (`\"\"` is the root)."},
	"ToolResultsRequest.results":              {"minItems": 1, "maxItems": 128},
	"ToolResult.output":                       {"description": "Any JSON value, at most 256 KiB."},
	"ToolResult.is_error":                     {"description": "The tool failed; `output` explains why."},
	"SendMessageResponse.queued":              {"description": "True when the message went to the queue."},
	"ListMessagesResponse.has_more":           {"description": "More messages follow; ask again with `after_id` set to the last id."},
	"ListChatsResponse.next_cursor":           {"description": "Present when older chats remain: pass it as `cursor` for the next page."},
	"StructuredOutputResult.status":           {"enum": client.RequestStatuses()},
	"StructuredOutputResult.chat_deleted": {"description": "Set once the request's chat was deleted: the answer comes from its tombstone, " +
		"with the outcome (`status`, `error`, `usage`) but no `value`, `receipt_message_id` or `attempts`."},
	"ChatDeletion.reason": {"enum": client.DeletionReasons(), "description": "`deleted` by its owner (or an operator), `expired` " +
		"under the retention period, `erased` with its user."},
	"StructuredOutputResult.value":              {"description": "As StructuredOutput.value: present exactly when `succeeded`, possibly JSON null."},
	"StructuredOutputResult.receipt_message_id": {"description": "The receipt message, once terminal."},
	"StructuredOutputResult.usage":              {"description": "As StructuredOutput.usage: the receipt's sum, once terminal."},
	"StructuredOutput.usage": {"description": "The tokens of every provider step the request governed, repairs included, " +
		"summed per kind when the receipt was written (a kind no step reported is null). Absent on receipts written " +
		"before chatd recorded usage."},
	"ChatMessage.usage": {"description": "Set on an assistant message a provider step produced: the tokens the provider " +
		"reported for that step (absent on an interrupted step, which the provider never finished)."},
	"Usage.input_tokens":       {"nullable": true, "description": "Prompt tokens not read from or written to the cache."},
	"Usage.output_tokens":      {"nullable": true, "description": "Generated tokens, reasoning included."},
	"Usage.cache_read_tokens":  {"nullable": true, "description": "Prompt tokens read from the provider's cache (OpenAI cached_tokens, Anthropic cache_read_input_tokens)."},
	"Usage.cache_write_tokens": {"nullable": true, "description": "Prompt tokens written to the cache (Anthropic cache_creation_input_tokens; OpenAI reports none)."},
	"Usage.reasoning_tokens":   {"nullable": true, "description": "Reasoning tokens within output_tokens (OpenAI reasoning_tokens; Anthropic reports none)."},
	"Error.message":            {"description": "A sentence for people."},
	"StreamTicket.ticket":      {"description": "Pass it as `ticket` to GET .../stream, once."},
	"StreamTicket.expires_at":  {"description": "Unused after this time, it is void."},
	"Error.validations":        {"description": "The fields at fault, on a 400 (and on some 409s)."},
	"ValidationError.field":    {"description": "A dotted path such as `response_format.json_schema.name` or `content.0.type`; `body` for the body as a whole."},
}

// eventStream documents a text/event-stream response: its description lists
// the events and their data types.
type eventStream string

// sseEvent is one event of an event stream: its name and the wire type of
// its data (nil: an empty object).
type sseEvent struct {
	name string
	data any
}

// streamEvents are the events of each event-stream route. The response's
// schema has one branch per event (`event`, `id`, `data` as decoded),
// discriminated by `event`, so the event types are part of the document.
var streamEvents = map[string][]sseEvent{
	streamRoute: {{"message", client.ChatMessage{}}, {"message_part", client.MessagePartEvent{}}, {"status", client.Chat{}},
		{"queue", client.QueueEvent{}}, {"action_required", client.ActionRequired{}}, {"history_reset", nil},
		{"preview_reset", client.PreviewReset{}}, {"structured_output_partial", client.StructuredOutputPartial{}},
		{"provider_retry", client.ProviderRetry{}}, {"error", client.StreamError{}}},
	"GET /api/v1/chats/watch": {{"chat", client.Chat{}}, {"error", client.StreamError{}}},
}

// eventSchema is the schema of one event of a stream: only `message`
// events carry an SSE `id` (the highest message id sent).
func (g *schemaGen) eventSchema(descr string, events []sseEvent) map[string]any {
	if len(events) == 0 {
		panic("httpapi: an event stream without streamEvents: " + descr) // static data
	}
	var branches []any
	for _, ev := range events {
		data := map[string]any{"type": "object", "description": "Always `{}`."}
		if ev.data != nil {
			data = g.schema(reflect.TypeOf(ev.data))
		}
		props := map[string]any{"event": map[string]any{"type": "string", "enum": []string{ev.name}}, "data": data}
		if ev.name == "message" {
			props["id"] = map[string]any{"type": "string", "description": "The highest message id sent; " +
				"absent when the message is an update of one sent before."}
		}
		branches = append(branches, map[string]any{"type": "object", "required": []string{"event", "data"}, "properties": props})
	}
	return map[string]any{"description": "One event, its `data` line decoded. " + descr, "oneOf": branches}
}

// plainText documents a text/plain response.
type plainText string

// jsonLines documents an export: JSON Lines (application/x-ndjson).
type jsonLines string

// pathParams describe the wildcards of the route patterns.
var pathParams = map[string]struct {
	description string
	schema      map[string]any
}{
	"chat":       {"The chat's id.", map[string]any{"type": "string", "format": "uuid"}},
	"message":    {"The message's id.", map[string]any{"type": "integer", "format": "int64", "minimum": 1}},
	"queued":     {"The queued message's id.", map[string]any{"type": "integer", "format": "int64", "minimum": 1}},
	"request_id": {"The structured request's UUID.", map[string]any{"type": "string", "format": "uuid"}},
	"token":      {"The token's id (not its secret).", map[string]any{"type": "string", "format": "uuid"}},
	"user":       {"The user's name (as GET /api/v1/users lists it).", map[string]any{"type": "string", "minLength": 1}},
}

var wildcardRE = regexp.MustCompile(`\{([^}]*)\}`)

// patternParams returns the wildcard names of a mux pattern, in order.
func patternParams(pattern string) []string {
	var out []string
	for _, m := range wildcardRE.FindAllStringSubmatch(pattern, -1) {
		if name := strings.TrimSuffix(m[1], "..."); name != "$" {
			out = append(out, name)
		}
	}
	return out
}

// openAPIPath turns a mux pattern into an OpenAPI path template.
func openAPIPath(pattern string) string {
	p := strings.ReplaceAll(pattern, "{$}", "")
	return strings.ReplaceAll(p, "...}", "}")
}

// buildOpenAPI assembles the document. Routes without documentation are
// left out (the route documentation test fails on them).
func buildOpenAPI(routes []route, docs map[string]routeDoc) map[string]any {
	g := &schemaGen{components: map[string]any{}}
	for _, t := range publicTypes {
		g.schema(reflect.TypeOf(t))
	}
	g.schema(reflect.TypeFor[client.MessagePart]())
	g.unions()
	paths := map[string]any{}
	for _, rt := range routes {
		d, ok := docs[rt.method+" "+rt.pattern]
		if !ok {
			continue
		}
		path := openAPIPath(rt.pattern)
		item, _ := paths[path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[path] = item
		}
		item[strings.ToLower(rt.method)] = g.operation(rt, d)
	}
	return openAPIRoot(paths, g.components)
}

// operation is one route's OpenAPI operation object.
func (g *schemaGen) operation(rt route, d routeDoc) map[string]any {
	op := map[string]any{"operationId": d.op, "summary": d.summary, "description": d.description}
	switch {
	case rt.scope != scopeNone && rt.method+" "+rt.pattern == streamRoute:
		op["security"] = []any{map[string]any{"bearerAuth": []string{}}, map[string]any{"streamTicket": []string{}}}
	case rt.scope != scopeNone:
		op["security"] = []any{map[string]any{"bearerAuth": []string{}}}
	default:
		op["security"] = []any{}
	}
	if rt.scope != scopeNone {
		// OpenAPI 3.0 lists no scopes for an http scheme: an extension
		// names the token scope the route needs, and so does the text.
		op["x-chatd-scope"] = string(rt.scope)
		op["description"] = d.description + " Needs a token with the `" + string(rt.scope) + "` scope."
	}
	if params := operationParams(rt, d); len(params) > 0 {
		op["parameters"] = params
	}
	if d.request != nil {
		op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
			"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(d.request))}}}
	}
	resps := map[string]any{}
	for _, r := range d.responses {
		out := map[string]any{"description": r.description}
		if content := g.responseContent(rt, r); content != nil {
			out["content"] = content
		}
		out["headers"] = responseHeaders(rt, d, r.status)
		resps[strconv.Itoa(r.status)] = out
	}
	op["responses"] = resps
	return op
}

// operationParams: the path's parameters, the documented query parameters
// and headers, and X-Request-ID.
func operationParams(rt route, d routeDoc) []any {
	var params []any
	for _, name := range patternParams(rt.pattern) {
		pp := pathParams[name]
		params = append(params, map[string]any{"name": name, "in": "path", "required": true,
			"description": pp.description, "schema": pp.schema})
	}
	for _, q := range d.query {
		params = append(params, map[string]any{"name": q.name, "in": "query", "required": false,
			"description": q.description, "schema": q.schema})
	}
	for _, h := range append(d.headers, requestIDParam) {
		params = append(params, map[string]any{"name": h.name, "in": "header", "required": false,
			"description": h.description, "schema": h.schema})
	}
	return params
}

// responseContent is a response's body by media type; nil: no body.
func (g *schemaGen) responseContent(rt route, r response) map[string]any {
	switch b := r.body.(type) {
	case nil:
		return nil
	case eventStream:
		return map[string]any{"text/event-stream": map[string]any{
			"schema": g.eventSchema(string(b), streamEvents[rt.method+" "+rt.pattern])}}
	case jsonLines:
		return map[string]any{exportContentType: map[string]any{"schema": map[string]any{
			"type": "string", "description": string(b)}}}
	case plainText:
		return map[string]any{"text/plain": map[string]any{"schema": map[string]any{
			"type": "string", "description": string(b)}}}
	}
	return map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(r.body))}}
}

// openAPIRoot wraps the paths and the component schemas.
func openAPIRoot(paths, schemas map[string]any) map[string]any {
	return map[string]any{
		"openapi": "3.0.3",
		"servers": []any{map[string]any{"url": "/", "description": "The server that serves this document."}},
		"info": map[string]any{
			"title":   "chatd API",
			"version": "1",
			"description": "A durable agent-chat backend. Every error has the `Error` shape. Request bodies are JSON " +
				"(at most 1 MiB by default), decoded strictly: unknown fields, wrong types and trailing data are 400s " +
				"naming the field. Unknown routes are JSON 404s; a known path with another method is a JSON 405 whose " +
				"`Allow` header lists the path's methods. Every response carries `X-Request-ID`. See docs/api.md for the rules in full.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": schemas,
			"securitySchemes": map[string]any{"bearerAuth": map[string]any{"type": "http", "scheme": "bearer",
				"description": "A token from `chatd token create --user NAME`."},
				"streamTicket": map[string]any{"type": "apiKey", "in": "query", "name": "ticket",
					"description": "A single-use stream ticket from POST /api/v1/chats/{chat}/stream-ticket (GET .../stream only)."}},
		},
	}
}

// requestIDParam is the optional X-Request-ID of every request.
var requestIDParam = queryParam{RequestIDHeader, "An id for this request, echoed in the response and logged as " +
	"`request_id`: 1 to 128 visible ASCII characters without quotes or backslashes (otherwise a fresh UUID is used).",
	map[string]any{"type": "string", "minLength": 1, "maxLength": 128}}

func header(description string, schema map[string]any) map[string]any {
	return map[string]any{"description": description, "schema": schema}
}

// responseHeaders lists the headers of one documented response.
func responseHeaders(rt route, d routeDoc, status int) map[string]any {
	str := map[string]any{"type": "string"}
	h := map[string]any{RequestIDHeader: header("The request's id: the request's own `X-Request-ID` if acceptable, "+
		"otherwise a fresh UUID.", str)}
	switch {
	case status == http.StatusUnauthorized:
		h["WWW-Authenticate"] = header("The Bearer challenge.", str)
	case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
		h["Retry-After"] = header("Seconds to wait before retrying.", map[string]any{"type": "integer", "minimum": 0})
	case status/100 == 2 && slices.ContainsFunc(d.headers, func(q queryParam) bool { return q.name == IdempotencyKeyHeader }):
		h[ReplayedHeader] = header("`true` when this is the stored answer of an earlier request with the same "+
			"`Idempotency-Key` (nothing was done again).", map[string]any{"type": "string", "enum": []string{"true"}})
	}
	if status == http.StatusCreated && rt.pattern == "/api/v1/chats" {
		h["Location"] = header("The new chat's path.", str)
	}
	return h
}

// openAPIDocument is buildOpenAPI as JSON.
func openAPIDocument(routes []route, docs map[string]routeDoc) []byte {
	b, err := json.MarshalIndent(buildOpenAPI(routes, docs), "", "  ")
	if err != nil {
		panic("httpapi: the OpenAPI document does not encode: " + err.Error()) // static data
	}
	return b
}

// schemaGen derives OpenAPI schemas from Go types: json tags name the
// properties, omitempty and pointers make them optional, pointers make them
// nullable, named structs become components referenced by $ref.
type schemaGen struct {
	components map[string]any
}

var (
	typeUUID    = reflect.TypeFor[uuid.UUID]()
	typeTime    = reflect.TypeFor[time.Time]()
	typeRawJSON = reflect.TypeFor[json.RawMessage]()
)

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	switch t {
	case typeUUID:
		return map[string]any{"type": "string", "format": "uuid"}
	case typeTime:
		return map[string]any{"type": "string", "format": "date-time"}
	case typeRawJSON:
		return map[string]any{"description": "Any JSON value."}
	}
	switch t.Kind() {
	case reflect.Pointer:
		// Every pointer of the wire types is omitempty: absent when nil,
		// never null. Request fields that accept null say so in fieldDocs.
		return g.schema(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Uint32, reflect.Int16, reflect.Int8, reflect.Uint8, reflect.Uint16:
		return map[string]any{"type": "integer", "format": "int32"}
	case reflect.Int64, reflect.Uint64, reflect.Uint:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Float32:
		return map[string]any{"type": "number", "format": "float"}
	case reflect.Float64:
		return map[string]any{"type": "number", "format": "double"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte"}
		}
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Interface:
		return map[string]any{"description": "Any JSON value."}
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t)
		}
		if _, done := g.components[t.Name()]; !done {
			g.components[t.Name()] = map[string]any{} // placeholder for recursive types
			obj := g.object(t)
			if d, ok := typeDocs[t.Name()]; ok {
				obj["description"] = d
			}
			g.components[t.Name()] = obj
		}
		return map[string]any{"$ref": "#/components/schemas/" + t.Name()}
	}
	panic("httpapi: no OpenAPI schema for Go type " + t.String())
}

// object builds the schema of a struct's JSON object.
func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for _, f := range jsonFields(t) {
		docs := fieldDocs[t.Name()+"."+f.name]
		if f.typ.Kind() == reflect.Pointer && !f.omit {
			if docs["nullable"] != true {
				panic("httpapi: " + t.Name() + "." + f.name + " is a pointer without omitempty, encoded as null: document it")
			}
			f.required = true // always present, possibly null
		}
		s := g.schema(f.typ)
		for k, v := range docs {
			s[k] = v
		}
		if _, isRef := s["$ref"]; isRef && len(s) > 1 {
			// $ref siblings are ignored in OpenAPI 3.0: wrap it (nullable
			// needs a type beside it).
			ref := map[string]any{"$ref": s["$ref"]}
			delete(s, "$ref")
			s["allOf"] = []any{ref}
			if s["nullable"] == true {
				s["type"] = "object"
			}
		}
		props[f.name] = s
		if f.required {
			required = append(required, f.name)
		}
	}
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

// jsonField is one member of a struct's JSON encoding.
type jsonField struct {
	name     string
	typ      reflect.Type
	required bool
	omit     bool // omitempty or omitzero
}

// jsonFields lists the members encoding/json writes for t, in field order
// (embedded structs flattened).
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
		out = append(out, jsonField{name: name, typ: f.Type, required: !omit && f.Type.Kind() != reflect.Pointer, omit: omit})
	}
	return out
}
