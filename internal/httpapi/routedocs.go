package httpapi

import (
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/chatd/chatd/client"
)

// routeDoc documents one route of routeTable: the OpenAPI document is built
// from it, and a test fails when a route has no entry (or an entry has no
// route). Status codes list everything the handler can answer; request and
// response bodies are zero values of the public types in package client,
// whose schemas are derived by reflection.
type routeDoc struct {
	// op is the operationId: the name of the Go client's method.
	op, summary, description string
	query                    []queryParam
	headers                  []queryParam
	request                  any // nil: no body
	responses                []response
}

type queryParam struct {
	name, description string
	schema            map[string]any
}

type response struct {
	status      int
	description string
	body        any // nil: no body
}

// cursorPattern is a stream's event id (cursor).
const cursorPattern = "^[0-9]+(:[0-9]+:[0-9]+:[0-9]+)?$"

// exportLines is the body of the export routes.
const exportLines = jsonLines("JSON Lines (docs/operations.md#export-and-import): a `chatd_export` header line, then each chat followed by its " +
	"`structured_request`, `message` and `queued_message` lines, a chat's children after it, and an `end` line counting them. " +
	"An export cut short lacks its end line; `chatd import` reads it.")

// Responses shared by many routes.
var (
	resp400 = response{http.StatusBadRequest, "The request is invalid; `validations` names the field at fault " +
		"(`body` for malformed JSON or trailing data).", client.Error{}}
	resp400Query = response{http.StatusBadRequest, "An unknown or repeated query parameter, or an unusable `X-Chatd-User` (`validations` names it).", client.Error{}}
	resp401      = response{http.StatusUnauthorized, "No bearer token, or the token is not valid: an unknown, revoked or " +
		"expired API token, or a JWT the server refuses (expired, not yet valid, another audience or issuer, an unknown key, " +
		"a bad signature, a disallowed algorithm, too large, a claim of the wrong type). `WWW-Authenticate` says why in " +
		"`error_description`, never echoing the token.", client.Error{}}
	resp403 = response{http.StatusForbidden, "The token lacks the route's scope (`WWW-Authenticate` names it: " +
		"`error=\"insufficient_scope\", scope=\"write\"`), or `X-Chatd-User` was sent with a credential that may not act for users.", client.Error{}}
	resp404 = response{http.StatusNotFound, "No such resource of the caller's (another user's chat is a 404 too), " +
		"or an id in the path is malformed.", client.Error{}}
	resp408 = response{http.StatusRequestTimeout, "The request body did not arrive within the server's body read timeout " +
		"(30 s by default); the connection is closed.", client.Error{}}
	resp429Streams = response{http.StatusTooManyRequests, "The caller already has the server's limit of open event streams " +
		"(chat streams and watches; 32 by default) on this server; close one. `Retry-After` says when to try again.", client.Error{}}
	resp429Runnable = response{http.StatusTooManyRequests, "Starting this turn would give the caller more runnable chats " +
		"(running, or waiting for a running slot, on every replica) than the server's limit (5,000 by default, " +
		"`--max-runnable-per-user`); nothing was stored. `Retry-After` says when to try again.", client.Error{}}
	resp413 = response{http.StatusRequestEntityTooLarge, "The request body is larger than the server's limit (1 MiB by default).", client.Error{}}
	resp415 = response{http.StatusUnsupportedMediaType, "A Content-Type other than application/json was sent.", client.Error{}}
	resp500 = response{http.StatusInternalServerError, "An internal error; the message carries no details.", client.Error{}}
	resp503 = response{http.StatusServiceUnavailable, "The database could not be reached or dropped the connection; " +
		"retry after `Retry-After` seconds. A write answered 503 may have been applied if the connection was lost " +
		"while it committed: repeat a create or send with the same `Idempotency-Key`, or read the state first.", client.Error{}}
)

// Idempotency-Key, on the routes that create.
var (
	idempotentNote = "With an `Idempotency-Key` header the request can be retried safely: the first one with a key does " +
		"the work and keeps its answer in the same transaction; a repeat within 24 hours with the same method, path and body " +
		"gets the same status and body again, with `Idempotent-Replayed: true`, and changes nothing."
	actAsParam = queryParam{ActAsHeader, "Act for this user (a token with the act-as capability only; otherwise 403): " +
		"with an identity provider configured, the user's subject there (the value of the server's --jwt-user-claim), the same " +
		"user as that user's own JWT; without one, a user name. The user is created on first use; the request is then theirs " +
		"in every respect, with the token's scopes less `admin`.", map[string]any{"type": "string", "minLength": 1, "maxLength": maxActAsLen}}
	idempotencyKeyParam = queryParam{IdempotencyKeyHeader, "1 to 255 visible ASCII characters chosen by the client, " +
		"unique per request it means (a UUID, say); scoped to the caller.", map[string]any{"type": "string", "minLength": 1, "maxLength": 255}}
	respKeyRace   = response{http.StatusConflict, "A request with the same `Idempotency-Key` was being processed; retry.", client.Error{}}
	respKeyReused = response{http.StatusUnprocessableEntity, "The `Idempotency-Key` was used in the last 24 hours for another " +
		"method, path or body (`validations` names `Idempotency-Key`).", client.Error{}}
)

// withBody adds the answers of every route that decodes a JSON body.
func withBody(rs ...response) []response { return append(rs, resp400, resp408, resp413, resp415) }

// routeDocs is keyed by "METHOD pattern", as in routeTable.
func routeDocs() map[string]routeDoc { //nolint:funlen // a table: one entry per route
	docs := map[string]routeDoc{
		"GET /healthz": {op: "Health", summary: "Liveness",
			description: "Answers while the process serves HTTP; does not touch the database.",
			responses:   []response{{http.StatusOK, "The process is alive.", client.Health{}}}},
		"GET /readyz": {op: "Ready", summary: "Readiness",
			description: "Answers 200 when the database answers a ping within 2 seconds.",
			responses: []response{{http.StatusOK, "Ready to serve.", client.Health{}},
				{http.StatusServiceUnavailable, "The database is not reachable.", client.Error{}}}},
		"GET /metrics": {op: "Metrics", summary: "Prometheus metrics",
			description: "This process's metrics in the Prometheus text exposition format 0.0.4 (`text/plain; version=0.0.4`): " +
				"HTTP requests, structured requests finished, rejections, provider calls and errors, claimed chats, open " +
				"streams, and queue depths read from the database at scrape time. No token needed: it carries no chat or " +
				"user data; keep it on a private network. See docs/operations.md for every metric.",
			responses: []response{{http.StatusOK, "The metrics.", plainText("Prometheus text exposition format 0.0.4.")}}},
		"GET /api/v1/openapi.json": {op: "OpenAPI", summary: "This OpenAPI document",
			description: "The OpenAPI 3.0 description of every route and public type. No token needed.",
			responses:   []response{{http.StatusOK, "The OpenAPI document.", map[string]any{}}}},
		"POST /api/v1/chats": {op: "CreateChat", summary: "Create a chat with its first message",
			description: "Creates a chat owned by the caller and its first user message, and starts a turn. " +
				"With a json_schema `response_format` the message carries a fresh `structured_output_request_id`. " +
				"All validation happens before anything is stored. The `Location` header names the new chat. " +
				idempotentNote,
			headers: []queryParam{idempotencyKeyParam},
			request: client.CreateChatRequest{},
			responses: withBody(response{http.StatusCreated, "The chat and its first message.", client.CreateChatResponse{}},
				resp401, respKeyRace, respKeyReused, resp429Runnable, resp500)},
		"GET /api/v1/chats": {op: "ListChats", summary: "List the caller's chats",
			description: "Most recently updated first, a page at a time: `next_cursor`, present when older chats remain, " +
				"is passed as `cursor` for the next page. A chat updated while you page moves to the front: it shows up " +
				"in a fresh first page, not in the later pages.",
			query: []queryParam{{"limit", "How many chats to return (default 50).", map[string]any{"type": "integer", "minimum": 1, "maximum": 200}},
				{"cursor", "The previous page's `next_cursor`.", map[string]any{"type": "string"}},
				{"parent_chat_id", "Only the children of this chat (spawned by its agent or created with `parent_chat_id`).",
					map[string]any{"type": "string", "format": "uuid"}}},
			responses: []response{{http.StatusOK, "The chats.", client.ListChatsResponse{}},
				{http.StatusBadRequest, "`limit` is out of range, `cursor` is not a cursor, or `parent_chat_id` is not a chat id.", client.Error{}}, resp401, resp500}},
		"GET /api/v1/chats/{chat}": {op: "GetChat", summary: "Get a chat",
			description: "The chat with its status; while it is `requires_action`, `pending_tool_calls` lists the client tool calls to answer " +
				"(empty while it waits only for child chats it spawned).",
			responses: []response{{http.StatusOK, "The chat.", client.Chat{}}, resp401, resp404, resp500}},
		"PATCH /api/v1/chats/{chat}": {op: "UpdateChat", summary: "Change a chat's title or plan mode",
			description: "Omitted fields are kept. Switching into plan mode is refused with 409 while a structured request " +
				"of the chat is active or queued (the message names it); a child chat cannot switch into plan mode (409).",
			request: client.UpdateChatRequest{},
			responses: withBody(response{http.StatusOK, "The updated chat.", client.Chat{}},
				resp401, resp404, response{http.StatusConflict, "Plan mode would drop a pending structured request, or the chat is a child chat.", client.Error{}},
				resp500)},
		"DELETE /api/v1/chats/{chat}": {op: "DeleteChat", summary: "Delete a chat",
			description: "Deletes the chat and its child chats in one transaction. A running turn is fenced first (no worker " +
				"on any replica writes into the chat afterwards); every structured request still pending gets its `cancelled` " +
				"receipt (`chat_deleted`), delivered to webhooks and to the lookup; a spawned child its parent awaits answers " +
				"the parent's call with an error result; then the messages, queue, requests and tool results go. A tombstone " +
				"remains (docs/operations.md#deleting-expiring-and-exporting): the lookup of the chat's requests answers " +
				"their outcome with `chat_deleted` set, and open streams of the chat end with an `error` event of code " +
				"`chat_deleted`. Deleting again answers 404 saying when and why the chat was deleted. No request body.",
			responses: []response{{http.StatusOK, "The deleted chats and the requests the deletion cancelled.", client.DeleteChatResponse{}},
				resp401, response{http.StatusNotFound, "No such chat of the caller's, or the chat was deleted before (the message " +
					"says when and why), or the id is malformed.", client.Error{}}, resp500}},
		"GET /api/v1/chats/{chat}/export": {op: "ExportChat", summary: "Export a chat",
			description: "The chat and its child chats with their structured requests, messages (model-only rows, receipts " +
				"and deleted rows included) and queued messages, read in one snapshot, in the export format that `chatd import` reads.",
			responses: []response{{http.StatusOK, "The export.", exportLines},
				resp401, response{http.StatusNotFound, "No such chat of the caller's (a deleted one says so), or the id is malformed.", client.Error{}},
				resp500}},
		"GET /api/v1/chats/{chat}/messages": {op: "ListMessages", summary: "List messages and the queue",
			description: "Client-visible messages with id greater than `after_id`, oldest first, receipts included, " +
				"plus the whole queue, read in one snapshot.",
			query: []queryParam{
				{"after_id", "Only messages with a larger id (default 0).", map[string]any{"type": "integer", "format": "int64", "minimum": 0}},
				{"limit", "How many messages to return (default 100); `has_more` says whether more follow.", map[string]any{"type": "integer", "minimum": 1, "maximum": 1000}},
			},
			responses: []response{{http.StatusOK, "A page of messages and the queue.", client.ListMessagesResponse{}},
				{http.StatusBadRequest, "`after_id` or `limit` is out of range.", client.Error{}}, resp401, resp404, resp500}},
		"POST /api/v1/chats/{chat}/messages": {op: "SendMessage", summary: "Send a message",
			description: "An idle chat (`waiting` or `error`) takes the message into history and starts a turn (`message` is set). " +
				"A busy chat queues it (`queued` is true, `queued_message` is set); with `busy_behavior: interrupt` the " +
				"running turn is interrupted too and the message runs once the queue reaches it. " +
				"`response_format` is validated before anything is queued or interrupted. " + idempotentNote,
			headers: []queryParam{idempotencyKeyParam},
			request: client.SendMessageRequest{},
			responses: withBody(response{http.StatusOK, "Where the message went.", client.SendMessageResponse{}},
				resp401, resp404,
				response{http.StatusConflict, "The queue is full (20 messages), or `plan_mode: true` would drop a pending structured request, " +
					"or a request with the same `Idempotency-Key` was being processed (retry).", client.Error{}}, respKeyReused,
				resp429Runnable, resp500)},
		"PATCH /api/v1/chats/{chat}/messages/{message}": {op: "EditMessage", summary: "Edit a user message",
			description: "Replaces a user message and discards everything after it. In one transaction: collect the pending " +
				"structured requests the edit discards (active and queued), soft-delete the suffix and clear the queue, " +
				"write a `cancelled` receipt (`superseded`) for each, insert the replacement. An omitted or null " +
				"`response_format` keeps the edited message's format (with a fresh request id), `{\"type\":\"text\"}` " +
				"clears it, a json_schema format replaces it.",
			request: client.EditMessageRequest{},
			responses: withBody(response{http.StatusOK, "The replacement, every inserted row and the deleted ids.", client.EditMessageResponse{}},
				resp401, response{http.StatusNotFound, "No such chat or message, or the message was already deleted.", client.Error{}},
				resp500)},
		"DELETE /api/v1/chats/{chat}/queue/{queued}": {op: "DeleteQueued", summary: "Delete a queued message",
			description: "Removes a queued message. A structured one gets a `cancelled` receipt (`queue_deleted`) in the same " +
				"transaction; it is returned and visible in history. A running turn is not disturbed.",
			responses: []response{{http.StatusOK, "The deleted id and the receipt, if any.", client.DeleteQueuedResponse{}},
				resp401, response{http.StatusNotFound, "No such chat or queued message (it may already have started or been deleted).", client.Error{}},
				resp500}},
		"POST /api/v1/chats/{chat}/interrupt": {op: "Interrupt", summary: "Interrupt the running turn",
			description: "Asks the running turn to stop; the chat is `interrupting` until its worker keeps the partial " +
				"output, writes a `cancelled` receipt (`interrupted`) for the turn's pending structured request and " +
				"lets the queue move on. Interrupting an `interrupting` chat is a no-op. No request body.",
			responses: []response{{http.StatusAccepted, "The interrupt was recorded; the chat as it is now.", client.Chat{}},
				resp401, resp404, response{http.StatusConflict, "The chat is `waiting` or `error`: there is no turn to interrupt.", client.Error{}},
				resp500}},
		"POST /api/v1/chats/{chat}/tool-results": {op: "SubmitToolResults", summary: "Answer pending client tool calls",
			description: "Answers every pending client tool call of a `requires_action` chat at once and resumes the turn. " +
				"The results must match `pending_tool_calls` exactly: one result per pending call, no unknown, duplicate " +
				"or missing ids, and never a call of the server-owned finalizer.",
			request: client.ToolResultsRequest{},
			responses: withBody(response{http.StatusOK, "The chat (running again) and the stored tool message.", client.ToolResultsResponse{}},
				resp401, resp404, response{http.StatusConflict, "The chat is not `requires_action`.", client.Error{}},
				resp500)},
		"POST /api/v1/chats/{chat}/compact": {op: "Compact", summary: "Ask for compaction",
			description: "Asks for the chat's history before its current turn to be summarised for the model (originals " +
				"are kept, marked compressed, and no longer sent to the provider). It happens at the chat's next step, or at " +
				"the start of its next turn if it is idle. Receipts are never summarised and budgets are unaffected. No request body.",
			responses: []response{{http.StatusAccepted, "The request was recorded; the chat as it is now.", client.Chat{}},
				resp401, resp404, resp500}},
		"GET /api/v1/chats/{chat}/stream": {op: "Stream", summary: "Follow a chat live (Server-Sent Events)",
			description: "First the committed client-visible messages after `after_id` (or the `Last-Event-ID` header, or " +
				"`after`), the queue and the status; while a step runs, its preview so far (a catch-up: the fragments the " +
				"stream lacks, one `message_part` per part, `from_seq` to `seq`); then live events until the client leaves or " +
				"the server shuts down, or until the token it was opened with (directly or through a ticket) is revoked or " +
				"expires: then an `error` event ends it within 5 seconds (a stream opened with a JWT, directly or through a " +
				"ticket, ends when the server stops accepting the JWT: its exp plus 30 s). See docs/streams.md.",
			query: []queryParam{{"after_id", "Send only messages with a larger id (default 0: all).",
				map[string]any{"type": "integer", "format": "int64", "minimum": 0}},
				{"after", "Resume after an SSE `id` this stream sent, as `Last-Event-ID` does (for clients that cannot send " +
					"the header): a message id, or `message:history:attempt:seq`, which resumes the running step's preview " +
					"after that fragment too. Wins over `after_id`.",
					map[string]any{"type": "string", "pattern": cursorPattern}},
				{"ticket", "A stream ticket (POST .../stream-ticket) in place of the Authorization header, for EventSource.",
					map[string]any{"type": "string"}}},
			headers: []queryParam{{"Last-Event-ID", "Sent by a reconnecting client: the last SSE `id` it received (a " +
				"message id, or `message:history:attempt:seq` after a preview fragment: the stream resumes the running " +
				"step's preview after it, or sends `preview_reset` and the whole preview when it cannot); wins over " +
				"`after` and `after_id`. One the server did not send is ignored.", map[string]any{"type": "string", "pattern": cursorPattern}}},
			responses: []response{{http.StatusOK, "An event stream.", eventStream("Events: `message` (ChatMessage), " +
				"`message_part` (MessagePartEvent), `status` (Chat), `queue` (QueueEvent), " +
				"`action_required` (ActionRequired), `history_reset` ({}), `preview_reset` (PreviewReset), " +
				"`structured_output_partial` (StructuredOutputPartial), `error` (StreamError). The SSE `id` of `message`, " +
				"`message_part` and `preview_reset` events is where a reconnection resumes: the highest message id sent, " +
				"then `:history:attempt:seq` of the last preview fragment sent, if any of the running generation. " +
				"Comments `: keep-alive` every 15 s.")},
				{http.StatusBadRequest, "`after_id` is not a non-negative integer, or `after` is not an event id.", client.Error{}},
				resp401, resp404, resp429Streams, resp500}},
		"POST /api/v1/chats/{chat}/stream-ticket": {op: "CreateStreamTicket", summary: "Get a ticket to open the chat's stream from a browser",
			description: "A browser's EventSource cannot send the Authorization header: it opens GET .../stream?ticket=TICKET " +
				"instead. A ticket is good for one stream of this chat, once, within 60 seconds (or until the JWT that asked " +
				"for it stops being accepted, when sooner); any replica redeems it. " +
				"To reconnect, get a new ticket (and pass `after`, the last event id). No request body.",
			responses: []response{{http.StatusCreated, "The ticket.", client.StreamTicket{}}, resp401, resp404, resp500}},
		"GET /api/v1/chats/watch": {op: "Watch", summary: "Follow all the caller's chats (Server-Sent Events)",
			description: "A `chat` event (Chat) for each of the caller's chats (most recently active first), then one after each " +
				"committed change of a chat (coalesced: the latest state, not every intermediate one).",
			responses: []response{{http.StatusOK, "An event stream.", eventStream("Events: `chat` (Chat); `error` (StreamError), the last one, when the stream's token " +
				"was revoked or expired. Comments `: keep-alive` every 15 s.")},
				resp401, resp429Streams, resp500}},
		"GET /api/v1/structured-outputs/{request_id}": {op: "GetStructuredOutput", summary: "Look up a structured request",
			description: "The state of a structured request by its UUID. With `wait`, a `pending` request is held until it " +
				"is terminal or the wait ends (woken by the database), then answered as it is: check `status`.",
			query: []queryParam{{"wait", "Long-poll for up to this Go duration (e.g. `30s`); capped at 60s.",
				map[string]any{"type": "string", "example": "30s"}}},
			responses: []response{{http.StatusOK, "The request's state, with the value or error once terminal.", client.StructuredOutputResult{}},
				{http.StatusBadRequest, "`wait` is not a duration.", client.Error{}}, resp401,
				response{http.StatusNotFound, "No such request of the caller's.", client.Error{}}, resp500}},
	}
	maps.Copy(docs, tokenRouteDocs())
	// Every route that takes a token refuses unknown and repeated query
	// parameters and missing scopes, and acts for a user on X-Chatd-User.
	for key, d := range docs {
		if !strings.Contains(key, " /api/v1/") || key == "GET /api/v1/openapi.json" {
			continue
		}
		d.responses = append(slices.Clone(d.responses), resp403)
		d.headers = append(slices.Clone(d.headers), actAsParam)
		i := slices.IndexFunc(d.responses, func(r response) bool { return r.status == http.StatusBadRequest })
		if i < 0 {
			d.responses = append(d.responses, resp400Query)
		} else {
			d.responses = slices.Clone(d.responses)
			d.responses[i].description += " " + resp400Query.description
		}
		docs[key] = d
	}
	// Every route that reads the database can find it unreachable.
	for key, d := range docs {
		if slices.ContainsFunc(d.responses, func(r response) bool { return r.status == http.StatusInternalServerError }) {
			d.responses = append(d.responses, resp503)
			docs[key] = d
		}
	}
	return docs
}

// tokenRouteDocs document the token and user API (the admin scope).
func tokenRouteDocs() map[string]routeDoc {
	return map[string]routeDoc{
		"POST /api/v1/tokens": {op: "CreateToken", summary: "Create an API token",
			description: "What `chatd token create` does: a token for a user (created on first use), with scopes, the act-as " +
				"capability and an expiry. The secret is in this answer only; the database keeps its SHA-256 digest.",
			request: client.CreateTokenRequest{},
			responses: withBody(response{http.StatusCreated, "The token's secret and description.", client.CreateTokenResponse{}},
				resp401, resp500)},
		"GET /api/v1/tokens": {op: "ListTokens", summary: "List API tokens",
			description: "What `chatd token list` shows: every token, or one user's, never a secret.",
			query:       []queryParam{{"user", "Only this user's tokens (by name).", map[string]any{"type": "string"}}},
			responses:   []response{{http.StatusOK, "The tokens.", client.ListTokensResponse{}}, resp401, resp500}},
		"DELETE /api/v1/tokens/{token}": {op: "RevokeToken", summary: "Revoke an API token",
			description: "What `chatd token revoke` does: the token stops working on every replica, and the streams opened " +
				"with it (directly or through a ticket) end, within 5 seconds. No request body.",
			responses: []response{{http.StatusNoContent, "Revoked.", nil}, resp401,
				response{http.StatusNotFound, "No such token (or the id is malformed).", client.Error{}}, resp500}},
		"GET /api/v1/users": {op: "ListUsers", summary: "List users",
			description: "Every user by name, a page at a time: named users and identity providers' users (created by their " +
				"first JWT or X-Chatd-User).",
			query: []queryParam{{"limit", "How many users to return (default 100).", map[string]any{"type": "integer", "minimum": 1, "maximum": 1000}},
				{"cursor", "The previous page's `next_cursor`.", map[string]any{"type": "string"}}},
			responses: []response{{http.StatusOK, "The users.", client.ListUsersResponse{}},
				{http.StatusBadRequest, "`limit` is out of range.", client.Error{}}, resp401, resp500}},
		"DELETE /api/v1/users/{user}": {op: "EraseUser", summary: "Erase a user",
			description: "What `chatd user erase` does: deletes the user and everything of theirs — their tokens and stream " +
				"tickets first, then every chat as DELETE /api/v1/chats/{chat} does (reason `erased`), then their idempotency " +
				"keys, follower rows, the webhook deliveries owed for their requests (sent or not), their tombstones and the user " +
				"row — and answers what went. Tokens cached by other replicas stop working within 5 seconds. Erasing again " +
				"answers 404. No request body.",
			responses: []response{{http.StatusOK, "What the erasure removed, counted.", client.ErasureReport{}}, resp401,
				response{http.StatusNotFound, "No such user.", client.Error{}}, resp500}},
		"GET /api/v1/users/{user}/export": {op: "ExportUser", summary: "Export a user's chats",
			description: "What `chatd export --user` writes: every chat of the user in the export format, streamed a page of " +
				"100 top-level chats (with their descendants) per read-only snapshot, so memory does not grow with the number of chats.",
			responses: []response{{http.StatusOK, "The export.", exportLines}, resp401,
				response{http.StatusNotFound, "No such user.", client.Error{}}, resp500}},
	}
}
