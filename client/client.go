package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Client calls one chatd server with one bearer token: an API token, or a
// JWT of the server's identity provider from a TokenSource.
type Client struct {
	baseURL string
	token   string
	source  func(context.Context) (string, error)
	actAs   string
	http    *http.Client
}

// NewWithTokenSource returns a client whose every request carries the
// token source returns then: for a JWT of the server's identity provider,
// which the source refreshes before it expires.
func NewWithTokenSource(baseURL string, source func(context.Context) (string, error), httpClient *http.Client) *Client {
	c := New(baseURL, "", httpClient)
	c.source = source
	return c
}

// ActAs returns a copy of the client whose requests act for user (the
// X-Chatd-User header): its token needs the act-as capability.
func (c *Client) ActAs(user string) *Client {
	cp := *c
	cp.actAs = user
	return &cp
}

// authorize sets the request's credentials.
func (c *Client) authorize(ctx context.Context, req *http.Request) error {
	token := c.token
	if c.source != nil {
		t, err := c.source(ctx)
		if err != nil {
			return fmt.Errorf("chatd: token source: %w", err)
		}
		token = t
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if c.actAs != "" {
		req.Header.Set("X-Chatd-User", c.actAs)
	}
	return nil
}

// New returns a client for the server at baseURL (e.g. http://127.0.0.1:8080).
// httpClient may be nil.
func New(baseURL, token string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), token: token, http: httpClient}
}

// APIError is a non-2xx answer.
type APIError struct {
	StatusCode int
	Body       Error
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("chatd: HTTP %d: %s", e.StatusCode, e.Body.Message)
	for _, v := range e.Body.Validations {
		msg += fmt.Sprintf(" [%s: %s]", v.Field, v.Detail)
	}
	return msg
}

type idempotencyKey struct{}

// WithIdempotencyKey returns a context whose CreateChat or SendMessage
// carries the Idempotency-Key header: retrying the call with the same key
// (and the same request) returns the first answer instead of creating or
// sending again. Use a fresh key, such as a UUID, per intended request.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKey{}, key)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if err := c.authorize(ctx, req); err != nil {
		return err
	}
	if key, ok := ctx.Value(idempotencyKey{}).(string); ok && method == http.MethodPost {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		e := &APIError{StatusCode: resp.StatusCode}
		_ = json.NewDecoder(resp.Body).Decode(&e.Body)
		return e
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if w, ok := out.(io.Writer); ok {
		_, err = io.Copy(w, resp.Body)
		return err
	}
	if raw, ok := out.(*[]byte); ok {
		*raw, err = io.ReadAll(resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// CreateChat creates a chat with its first message.
func (c *Client) CreateChat(ctx context.Context, req CreateChatRequest) (CreateChatResponse, error) {
	var out CreateChatResponse
	return out, c.do(ctx, http.MethodPost, "/api/v1/chats", req, &out)
}

// ListChats lists the caller's chats, most recently active first: at most
// limit (0 means the server's default of 50; the server allows 1 to 200),
// starting after cursor (a previous page's NextCursor; "" for the first).
func (c *Client) ListChats(ctx context.Context, limit int, cursor string) (ListChatsResponse, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := "/api/v1/chats"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out ListChatsResponse
	return out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// ListChildChats returns a page of parent's child chats (spawned by its
// agent or created with parent_chat_id), most recently updated first.
func (c *Client) ListChildChats(ctx context.Context, parent uuid.UUID, limit int, cursor string) (ListChatsResponse, error) {
	q := url.Values{"parent_chat_id": {parent.String()}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var out ListChatsResponse
	return out, c.do(ctx, http.MethodGet, "/api/v1/chats?"+q.Encode(), nil, &out)
}

// GetChat returns one chat.
func (c *Client) GetChat(ctx context.Context, chat uuid.UUID) (Chat, error) {
	var out Chat
	return out, c.do(ctx, http.MethodGet, "/api/v1/chats/"+chat.String(), nil, &out)
}

// DeleteChat deletes a chat and its child chats: pending structured
// requests get their cancelled receipt (chat_deleted) first. Deleting a
// deleted chat is a 404.
func (c *Client) DeleteChat(ctx context.Context, chat uuid.UUID) (DeleteChatResponse, error) {
	var out DeleteChatResponse
	return out, c.do(ctx, http.MethodDelete, "/api/v1/chats/"+chat.String(), nil, &out)
}

// ExportChat writes the chat and its child chats to w in the export format
// (JSON Lines, which chatd import reads).
func (c *Client) ExportChat(ctx context.Context, chat uuid.UUID, w io.Writer) error {
	return c.do(ctx, http.MethodGet, "/api/v1/chats/"+chat.String()+"/export", nil, w)
}

// SendMessage sends a message; it is queued while a turn runs.
func (c *Client) SendMessage(ctx context.Context, chat uuid.UUID, req SendMessageRequest) (SendMessageResponse, error) {
	var out SendMessageResponse
	return out, c.do(ctx, http.MethodPost, "/api/v1/chats/"+chat.String()+"/messages", req, &out)
}

// ListMessages returns client-visible messages with id > afterID (at most
// limit; 0 means the server's default) and the queue.
func (c *Client) ListMessages(ctx context.Context, chat uuid.UUID, afterID int64, limit int) (ListMessagesResponse, error) {
	q := url.Values{}
	if afterID > 0 {
		q.Set("after_id", strconv.FormatInt(afterID, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/api/v1/chats/" + chat.String() + "/messages"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out ListMessagesResponse
	return out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// GetStructuredOutput looks a structured request up by its UUID. With
// wait > 0 the server holds the call until the request is terminal or the
// wait (at most 60s) passes.
func (c *Client) GetStructuredOutput(ctx context.Context, requestID uuid.UUID, wait time.Duration) (StructuredOutputResult, error) {
	path := "/api/v1/structured-outputs/" + requestID.String()
	if wait > 0 {
		path += "?wait=" + url.QueryEscape(wait.String())
	}
	var out StructuredOutputResult
	return out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// WaitStructuredOutput long-polls until the request is terminal or ctx ends.
func (c *Client) WaitStructuredOutput(ctx context.Context, requestID uuid.UUID) (StructuredOutputResult, error) {
	for {
		res, err := c.GetStructuredOutput(ctx, requestID, 30*time.Second)
		if err != nil || res.Status != OutputPending {
			return res, err
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
}

// UpdateChat changes a chat's title or plan mode.
func (c *Client) UpdateChat(ctx context.Context, chat uuid.UUID, req UpdateChatRequest) (Chat, error) {
	var out Chat
	return out, c.do(ctx, http.MethodPatch, "/api/v1/chats/"+chat.String(), req, &out)
}

// EditMessage replaces a user message and discards what followed it.
func (c *Client) EditMessage(ctx context.Context, chat uuid.UUID, message int64, req EditMessageRequest) (EditMessageResponse, error) {
	var out EditMessageResponse
	path := "/api/v1/chats/" + chat.String() + "/messages/" + strconv.FormatInt(message, 10)
	return out, c.do(ctx, http.MethodPatch, path, req, &out)
}

// DeleteQueued removes a queued message (a structured one gets a cancelled receipt).
func (c *Client) DeleteQueued(ctx context.Context, chat uuid.UUID, queued int64) (DeleteQueuedResponse, error) {
	var out DeleteQueuedResponse
	path := "/api/v1/chats/" + chat.String() + "/queue/" + strconv.FormatInt(queued, 10)
	return out, c.do(ctx, http.MethodDelete, path, nil, &out)
}

// Interrupt stops the running turn.
func (c *Client) Interrupt(ctx context.Context, chat uuid.UUID) (Chat, error) {
	var out Chat
	return out, c.do(ctx, http.MethodPost, "/api/v1/chats/"+chat.String()+"/interrupt", nil, &out)
}

// ToolResultsResponse answers SubmitToolResults.
type ToolResultsResponse struct {
	Chat    Chat        `json:"chat"`
	Message ChatMessage `json:"message"`
}

// SubmitToolResults answers every pending client tool call.
func (c *Client) SubmitToolResults(ctx context.Context, chat uuid.UUID, req ToolResultsRequest) (ToolResultsResponse, error) {
	var out ToolResultsResponse
	return out, c.do(ctx, http.MethodPost, "/api/v1/chats/"+chat.String()+"/tool-results", req, &out)
}

// Health asks whether the server process is alive (GET /healthz).
func (c *Client) Health(ctx context.Context) (Health, error) {
	var out Health
	return out, c.do(ctx, http.MethodGet, "/healthz", nil, &out)
}

// Ready asks whether the server can reach its database (GET /readyz); a
// server that cannot answers with an *APIError of status 503.
func (c *Client) Ready(ctx context.Context) (Health, error) {
	var out Health
	return out, c.do(ctx, http.MethodGet, "/readyz", nil, &out)
}

// OpenAPI returns the server's OpenAPI 3.0 document (GET /api/v1/openapi.json).
func (c *Client) OpenAPI(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	return out, c.do(ctx, http.MethodGet, "/api/v1/openapi.json", nil, &out)
}

// Metrics returns the server's Prometheus metrics in the text exposition
// format (GET /metrics; no token needed).
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	var out []byte
	return out, c.do(ctx, http.MethodGet, "/metrics", nil, &out)
}

// Compact asks for the chat's older history to be summarised for the model.
func (c *Client) Compact(ctx context.Context, chat uuid.UUID) (Chat, error) {
	var out Chat
	return out, c.do(ctx, http.MethodPost, "/api/v1/chats/"+chat.String()+"/compact", nil, &out)
}

// CreateStreamTicket returns a single-use ticket for the chat's stream, for
// a browser's EventSource: GET /api/v1/chats/{chat}/stream?ticket=TICKET.
func (c *Client) CreateStreamTicket(ctx context.Context, chat uuid.UUID) (StreamTicket, error) {
	var out StreamTicket
	return out, c.do(ctx, http.MethodPost, "/api/v1/chats/"+chat.String()+"/stream-ticket", nil, &out)
}

// CreateToken creates an API token (admin scope): the secret is in the
// answer only.
func (c *Client) CreateToken(ctx context.Context, req CreateTokenRequest) (CreateTokenResponse, error) {
	var out CreateTokenResponse
	return out, c.do(ctx, http.MethodPost, "/api/v1/tokens", req, &out)
}

// ListTokens lists every token, or user's when not empty (admin scope).
func (c *Client) ListTokens(ctx context.Context, user string) (ListTokensResponse, error) {
	path := "/api/v1/tokens"
	if user != "" {
		path += "?" + url.Values{"user": {user}}.Encode()
	}
	var out ListTokensResponse
	return out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// RevokeToken revokes a token by its id (admin scope): every replica
// refuses it, and ends its streams, within 5 seconds.
func (c *Client) RevokeToken(ctx context.Context, id uuid.UUID) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/tokens/"+id.String(), nil, nil)
}

// ListUsers lists users by name (admin scope): at most limit (0: the
// server's default of 100), after cursor (a previous page's NextCursor).
func (c *Client) ListUsers(ctx context.Context, limit int, cursor string) (ListUsersResponse, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := "/api/v1/users"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out ListUsersResponse
	return out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// EraseUser erases the named user and everything of theirs (admin scope)
// and returns what went.
func (c *Client) EraseUser(ctx context.Context, name string) (ErasureReport, error) {
	var out ErasureReport
	return out, c.do(ctx, http.MethodDelete, "/api/v1/users/"+url.PathEscape(name), nil, &out)
}

// ExportUser writes every chat of the named user to w in the export format
// (admin scope), as the server streams it.
func (c *Client) ExportUser(ctx context.Context, name string, w io.Writer) error {
	return c.do(ctx, http.MethodGet, "/api/v1/users/"+url.PathEscape(name)+"/export", nil, w)
}
