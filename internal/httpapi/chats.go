package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/longpoll"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/tracing"
	"github.com/chatd/chatd/internal/validate"
)

type createChatBody struct {
	Model          *string              `json:"model"`
	SystemPrompt   *string              `json:"system_prompt"`
	Title          *string              `json:"title"`
	Content        []client.MessagePart `json:"content"`
	ResponseFormat json.RawMessage      `json:"response_format"`
	PlanMode       *bool                `json:"plan_mode"`
	ParentChatID   *string              `json:"parent_chat_id"`
	DynamicTools   []client.DynamicTool `json:"dynamic_tools"`
	MCPServers     []string             `json:"mcp_servers"`
	SpawnAgents    *bool                `json:"spawn_agents"`
}

type sendMessageBody struct {
	Content        []client.MessagePart `json:"content"`
	ResponseFormat json.RawMessage      `json:"response_format"`
	BusyBehavior   *string              `json:"busy_behavior"`
	PlanMode       *bool                `json:"plan_mode"`
}

const (
	maxSystemPromptBytes = 64 << 10
)

func (s *Server) createChat(w http.ResponseWriter, r *http.Request) error {
	key, replayed, err := s.idempotency(w, r)
	if replayed || err != nil {
		return err
	}
	var body createChatBody
	if err := decodeBody(w, r, s.maxBody, &body); err != nil {
		return err
	}
	p := store.NewChat{OwnerID: currentUser(r).ID}
	if err := s.chatBasics(&p, body); err != nil {
		return err
	}
	if err := s.chatCapabilities(&p, body); err != nil {
		return err
	}
	if key != nil {
		p.Key = key
		p.Answer = func(chat store.Chat, msg store.Message) (int, []byte, error) {
			out, err := createAnswer(chat, msg)
			if err != nil {
				return 0, nil, err
			}
			out.Warnings = schemaWarnings(p.Request)
			body, err := encodeJSON(out)
			return http.StatusCreated, body, err
		}
	}
	// A free running slot of this process takes the chat straight from the
	// admission (internal/handoff); the slot is given back if it fails.
	p.MaxRunnable = s.maxRunnable
	seat, local := s.slots.Reserve()
	if local {
		defer seat.Cancel()
		p.Claim = &store.LocalClaim{Worker: seat.Worker, Lease: seat.Lease}
	}
	chat, msg, err := s.store.CreateChat(r.Context(), p)
	if err == nil && local {
		seat.Hand(p.Claim.Turn)
	}
	if errors.Is(err, store.ErrUnknownParent) {
		return badField("parent_chat_id", "no such chat of yours (child chats cannot have children)")
	}
	if errors.Is(err, store.ErrKeyTaken) {
		return s.replayRace(w, r, key)
	}
	if err != nil {
		return err
	}
	noteChat(r, chat.ID)
	out, err := createAnswer(chat, msg)
	if err != nil {
		return err
	}
	out.Warnings = schemaWarnings(p.Request)
	w.Header().Set("Location", "/api/v1/chats/"+chat.ID.String())
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// chatBasics checks and copies the new chat's model, texts, first message
// and mode.
func (s *Server) chatBasics(p *store.NewChat, body createChatBody) error {
	p.Model = s.models.Default()
	if body.Model != nil {
		p.Model = *body.Model
	}
	if p.Model == "" {
		return badField("model", "no model given and the server has no default model")
	}
	if !s.models.Has(p.Model) {
		return badField("model", fmt.Sprintf("unknown model %q; available: %s", p.Model, strings.Join(s.models.IDs(), ", ")))
	}
	if body.SystemPrompt != nil {
		if err := textField("system_prompt", *body.SystemPrompt, maxSystemPromptBytes); err != nil {
			return err
		}
		p.SystemPrompt = *body.SystemPrompt
	}
	if body.Title != nil {
		if err := textField("title", *body.Title, store.MaxTitleBytes); err != nil {
			return err
		}
		p.Title = *body.Title
	}
	content, err := inputParts(body.Content)
	if err != nil {
		return err
	}
	p.Content = content
	if body.PlanMode != nil && *body.PlanMode {
		p.Mode = client.ModePlan
	}
	if body.ParentChatID != nil {
		id, err := uuid.Parse(*body.ParentChatID)
		if err != nil {
			return badField("parent_chat_id", "must be a chat id")
		}
		if p.Mode == client.ModePlan {
			return badField("plan_mode", "a child chat cannot be in plan mode")
		}
		p.ParentChatID = uuid.NullUUID{UUID: id, Valid: true}
		p.Mode = client.ModeChild
	}
	return nil
}

// chatCapabilities checks and copies what the new chat's agent may use
// (dynamic tools, MCP servers, spawn_agent) and its structured request.
func (s *Server) chatCapabilities(p *store.NewChat, body createChatBody) error {
	tools, err := s.dynamicTools(body.DynamicTools)
	if err != nil {
		return err
	}
	p.DynamicTools = tools
	if p.MCPServers, err = s.mcpServers(body.MCPServers, p.Model); err != nil {
		return err
	}
	if body.SpawnAgents != nil && *body.SpawnAgents {
		if !s.spawnAgents {
			return badField("spawn_agents", "spawn_agent is not enabled on this server (spawn_agent in its configuration)")
		}
		p.SpawnAgents = true
	}
	if p.Request, err = s.admitFormat(body.ResponseFormat); err != nil {
		return err
	}
	return s.checkStructured(p.Request, p.Mode, p.Model, tools)
}

func createAnswer(chat store.Chat, msg store.Message) (client.CreateChatResponse, error) {
	m, err := toMessage(msg)
	if err != nil {
		return client.CreateChatResponse{}, err
	}
	return client.CreateChatResponse{Chat: toChat(chat), Messages: []client.ChatMessage{m}}, nil
}

// admitFormat applies the response_format rules and the experiment gate,
// before anything is persisted.
func (s *Server) admitFormat(raw json.RawMessage) (*store.RequestSpec, error) {
	if validate.IsAbsent(raw) {
		return nil, nil
	}
	f, fe := validate.ParseResponseFormat(raw)
	enabled := s.experiments[ExperimentStructuredOutput]
	if !enabled && (f != nil || (fe != nil && strings.HasPrefix(fe.Field, "response_format.json_schema"))) {
		return nil, badField("response_format", "structured output is disabled on this server (experiment "+ExperimentStructuredOutput+")")
	}
	if fe != nil {
		return nil, fromFieldError(fe)
	}
	if f == nil {
		return nil, nil
	}
	return &store.RequestSpec{Name: f.Name, Description: f.Description, Schema: f.Schema}, nil
}

// schemaWarnings lists what an admitted request's schema holds that chatd
// does not check (validate.Warning), for the create/send/edit response.
// The compiled schema is the one admission just cached.
func schemaWarnings(spec *store.RequestSpec) []client.SchemaWarning {
	if spec == nil {
		return nil
	}
	s, err := validate.CompileCached(spec.Schema)
	if err != nil {
		return nil
	}
	var out []client.SchemaWarning
	for _, w := range s.Warnings {
		out = append(out, client.SchemaWarning{Location: w.Location, Keyword: w.Keyword, Message: w.Message})
	}
	return out
}

// textField checks a string stored in a text column: at most max bytes,
// and no U+0000, which PostgreSQL text cannot hold. (Message text may
// contain it: the jsonb codec encodes it.)
func textField(field, v string, max int) error {
	if len(v) > max {
		return badField(field, fmt.Sprintf("must be at most %d bytes", max))
	}
	if strings.IndexByte(v, 0) >= 0 {
		return badField(field, "must not contain U+0000")
	}
	return nil
}

// maxInputParts bounds the parts of one input message.
const maxInputParts = 64

// inputParts checks client input: text parts only, at least one, each
// with some text that is not whitespace (providers refuse empty text, and
// the turn would fail after admission). Every bad part is named.
func inputParts(in []client.MessagePart) ([]jsonb.Part, error) {
	if len(in) == 0 {
		return nil, badField("content", "at least one content part is required")
	}
	if len(in) > maxInputParts {
		return nil, badField("content", fmt.Sprintf("at most %d parts", maxInputParts))
	}
	var bad []client.ValidationError
	out := make([]jsonb.Part, 0, len(in))
	for i, p := range in {
		field := "content." + strconv.Itoa(i)
		extra := p
		extra.Type, extra.Text = "", ""
		switch {
		case p.Type != "text":
			bad = append(bad, client.ValidationError{Field: field + ".type", Detail: `must be "text"`})
		case !isZeroPart(extra):
			bad = append(bad, client.ValidationError{Field: field, Detail: "a text part has only type and text"})
		case strings.TrimSpace(p.Text) == "":
			bad = append(bad, client.ValidationError{Field: field + ".text", Detail: "must contain text other than whitespace"})
		}
		out = append(out, jsonb.Text(p.Text))
	}
	if bad != nil {
		return nil, badFields(bad)
	}
	return out, nil
}

func isZeroPart(p client.MessagePart) bool {
	return p.Type == "" && p.Text == "" && p.ToolCallID == "" && p.ToolName == "" && len(p.Args) == 0 && p.ArgsDelta == "" &&
		len(p.Result) == 0 && !p.IsError && !p.ProviderExecuted && p.MediaType == "" && p.Name == "" &&
		len(p.Data) == 0 && p.SourceID == "" && p.URL == "" && p.Title == ""
}

func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request) error {
	chatID, err := pathUUID(r, "chat")
	if err != nil {
		return err
	}
	key, replayed, err := s.idempotency(w, r)
	if replayed || err != nil {
		return err
	}
	var body sendMessageBody
	if err := decodeBody(w, r, s.maxBody, &body); err != nil {
		return err
	}
	content, err := inputParts(body.Content)
	if err != nil {
		return err
	}
	interrupt := false
	if body.BusyBehavior != nil {
		switch *body.BusyBehavior {
		case client.BusyQueue:
		case client.BusyInterrupt:
			interrupt = true
		default:
			return badField("busy_behavior", `must be "queue" or "interrupt"`)
		}
	}
	spec, err := s.admitFormat(body.ResponseFormat)
	if err != nil {
		return err
	}
	if spec != nil && body.PlanMode != nil && *body.PlanMode {
		return badField("response_format", "structured output is not available in plan mode")
	}
	params := store.SendParams{
		OwnerID: currentUser(r).ID, ChatID: chatID, Content: content, Request: spec,
		Interrupt: interrupt, PlanMode: body.PlanMode, MaxRunnable: s.maxRunnable,
		Check: func(chat store.Chat, mode client.ChatMode) error {
			return s.checkStructured(spec, mode, chat.Model, chat.DynamicTools)
		},
	}
	if key != nil {
		params.Key = key
		params.Answer = func(res store.SendResult) (int, []byte, error) {
			out, err := sendAnswer(res)
			if err != nil {
				return 0, nil, err
			}
			out.Warnings = schemaWarnings(spec)
			body, err := encodeJSON(out)
			return http.StatusOK, body, err
		}
	}
	seat, local := s.slots.Reserve() // see createChat
	if local {
		defer seat.Cancel()
		params.Claim = &store.LocalClaim{Worker: seat.Worker, Lease: seat.Lease}
	}
	res, err := s.store.SendMessage(r.Context(), params)
	if err == nil && res.Claimed {
		seat.Hand(params.Claim.Turn)
	}
	if errors.Is(err, store.ErrKeyTaken) {
		return s.replayRace(w, r, key)
	}
	if err != nil {
		return err
	}
	out, err := sendAnswer(res)
	if err != nil {
		return err
	}
	out.Warnings = schemaWarnings(spec)
	writeJSON(w, http.StatusOK, out)
	return nil
}

func sendAnswer(res store.SendResult) (client.SendMessageResponse, error) {
	out := client.SendMessageResponse{Queued: res.Queued != nil}
	if res.Message != nil {
		m, err := toMessage(*res.Message)
		if err != nil {
			return out, err
		}
		out.Message = &m
	}
	if res.Queued != nil {
		q, err := toQueued(*res.Queued)
		if err != nil {
			return out, err
		}
		out.QueuedMessage = &q
	}
	return out, nil
}

func (s *Server) listChats(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", 50, 1, 200)
	if err != nil {
		return err
	}
	var before *store.Chat
	if v := r.URL.Query().Get("cursor"); v != "" {
		if before, err = parseChatCursor(v); err != nil {
			return err
		}
	}
	var parent uuid.NullUUID
	if v := r.URL.Query().Get("parent_chat_id"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			return badField("parent_chat_id", "must be a chat id")
		}
		parent = uuid.NullUUID{UUID: id, Valid: true}
	}
	// One row more than asked says whether another page exists.
	chats, err := s.store.ListChats(r.Context(), currentUser(r).ID, int32(limit)+1, before, parent)
	if err != nil {
		return err
	}
	out := client.ListChatsResponse{Chats: make([]client.Chat, 0, min(len(chats), limit))}
	if len(chats) > limit {
		chats = chats[:limit]
		out.NextCursor = chatCursor(chats[limit-1])
	}
	for _, c := range chats {
		out.Chats = append(out.Chats, toChat(c))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// A chat list cursor is the position (updated_at, id) of the last chat of
// a page, opaque to clients: base64url of "<RFC 3339 time>|<uuid>".
func chatCursor(c store.Chat) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.UpdatedAt.UTC().Format(time.RFC3339Nano) + "|" + c.ID.String()))
}

func parseChatCursor(v string) (*store.Chat, error) {
	bad := badField("cursor", "is not a cursor from a previous page's next_cursor")
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil, bad
	}
	ts, id, ok := strings.Cut(string(raw), "|")
	if !ok {
		return nil, bad
	}
	var c store.Chat
	if c.UpdatedAt, err = time.Parse(time.RFC3339Nano, ts); err != nil {
		return nil, bad
	}
	if c.ID, err = uuid.Parse(id); err != nil {
		return nil, bad
	}
	return &c, nil
}

func (s *Server) getChat(w http.ResponseWriter, r *http.Request) error {
	chatID, err := pathUUID(r, "chat")
	if err != nil {
		return err
	}
	c, err := s.store.GetChat(r.Context(), currentUser(r).ID, chatID)
	if err != nil {
		return err
	}
	out := toChat(c)
	pending, err := s.store.PendingToolCalls(r.Context(), c)
	if err != nil {
		return err
	}
	for _, p := range pending {
		out.PendingToolCalls = append(out.PendingToolCalls, client.ToolCall{ToolCallID: p.ToolCallID, ToolName: p.ToolName, Args: p.Args})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request) error {
	chatID, err := pathUUID(r, "chat")
	if err != nil {
		return err
	}
	after, err := queryInt(r, "after_id", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	h, err := s.store.ListMessages(r.Context(), currentUser(r).ID, chatID, int64(after), int32(limit))
	if err != nil {
		return err
	}
	out := client.ListMessagesResponse{Messages: make([]client.ChatMessage, 0, len(h.Messages)),
		QueuedMessages: make([]client.QueuedMessage, 0, len(h.Queue)), HasMore: h.HasMore}
	for _, row := range h.Messages {
		m, err := toMessage(row)
		if err != nil {
			return err
		}
		out.Messages = append(out.Messages, m)
	}
	for _, row := range h.Queue {
		q, err := toQueued(row)
		if err != nil {
			return err
		}
		out.QueuedMessages = append(out.QueuedMessages, q)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// maxWait bounds long polls.
const maxWait = 60 * time.Second

func (s *Server) getStructuredOutput(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "request_id")
	if err != nil {
		return err
	}
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		if wait, err = time.ParseDuration(v); err != nil || wait < 0 {
			return badField("wait", "must be a duration such as 30s")
		}
		wait = min(wait, maxWait)
	}
	poll, err := longpoll.Poller{Hub: s.hub, Store: s.store, TestSignals: &s.signals.LongPoll}.Open(r.Context(), currentUser(r).ID, id, wait)
	if err != nil {
		return err
	}
	defer poll.Close()
	noteChat(r, poll.ChatID())
	st, err := poll.Wait(r.Context())
	if err != nil {
		return err
	}
	out, err := toResult(st)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func pathUUID(r *http.Request, name string) (uuid.UUID, error) {
	id, err := uuid.Parse(r.PathValue(name))
	if err != nil {
		return uuid.Nil, errNotFound
	}
	return id, nil
}

func queryInt(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badField(name, fmt.Sprintf("must be an integer from %d to %d", lo, hi))
	}
	return n, nil
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

// Projection of rows to public types.

func toChat(c store.Chat) client.Chat {
	out := client.Chat{ID: c.ID, Title: c.Title, Status: c.Status, Model: c.Model, Mode: c.Mode,
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
	if c.ParentChatID.Valid {
		id := c.ParentChatID.UUID
		out.ParentChatID = &id
	}
	if len(c.MCPServers) > 0 {
		out.MCPServers = c.MCPServers
	}
	out.ParentToolCallID, out.SpawnAgents, out.SpawnDepth = c.SpawnToolCallID, c.SpawnAgents, int(c.SpawnDepth)
	if c.Status == client.StatusError {
		e := chatError(c)
		out.LastError = &e
	}
	out.ProviderRetry = providerRetry(c)
	return out
}

// providerRetry is the chat's provider retry while its turn runs (nil
// otherwise, or if the stored value cannot be read).
func providerRetry(c store.Chat) *client.ProviderRetry {
	if len(c.ProviderRetry) == 0 || (c.Status != client.StatusRunning && c.Status != client.StatusInterrupting) {
		return nil
	}
	var r client.ProviderRetry
	if json.Unmarshal(c.ProviderRetry, &r) != nil {
		return nil
	}
	return &r
}

// publicParts drops internal parts and fields; a receipt's outcome is
// returned separately.
func publicParts(parts []jsonb.Part) ([]client.MessagePart, *jsonb.Outcome) {
	out := make([]client.MessagePart, 0, len(parts))
	var outcome *jsonb.Outcome
	for _, p := range parts {
		switch p.Type {
		case jsonb.PartOutcome:
			outcome = p.Outcome
			continue
		case jsonb.PartHookContext:
			continue
		case jsonb.PartHookNotice:
			p.Type = jsonb.PartText // a control row an earlier release wrote
		}
		out = append(out, client.MessagePart{
			Type: string(p.Type), Text: p.Text, ToolCallID: p.ToolCallID, ToolName: p.ToolName,
			Args: p.Args, Result: p.Result, IsError: p.IsError, ProviderExecuted: p.ProviderExecuted,
			MediaType: p.MediaType, Name: p.Name, Data: p.Data, SourceID: p.SourceID, URL: p.URL, Title: p.Title,
		})
	}
	return out, outcome
}

func toMessage(row store.Message) (client.ChatMessage, error) {
	parts, err := jsonb.ParseContent(row.Content)
	if err != nil {
		return client.ChatMessage{}, err
	}
	content, outcome := publicParts(parts)
	m := client.ChatMessage{ID: row.ID, ChatID: row.ChatID, Role: row.Role, Content: content, CreatedAt: row.CreatedAt}
	if row.StructuredRequestID.Valid && row.Kind == store.KindMessage && row.Role == client.RoleUser {
		id := row.StructuredRequestID.UUID
		m.StructuredOutputRequestID = &id
	}
	if row.Kind == store.KindReceipt && outcome != nil {
		if m.StructuredOutput, err = toOutput(row.StructuredRequestID.UUID, outcome); err != nil {
			return m, err
		}
	}
	if row.Kind == store.KindMessage && row.Role == client.RoleAssistant && len(row.Usage) > 0 && string(row.Usage) != "null" {
		m.Usage = &client.Usage{}
		if err := json.Unmarshal(row.Usage, m.Usage); err != nil {
			return m, fmt.Errorf("usage of message %d: %w", row.ID, err)
		}
	}
	return m, nil
}

// toOutput renders a receipt's outcome: the one place a receipt's
// structured_output (messages, the stream, the lookup) is made.
func toOutput(id uuid.UUID, o *jsonb.Outcome) (*client.StructuredOutput, error) {
	out := &client.StructuredOutput{RequestID: id, Status: client.RequestStatus(o.Status)}
	if out.Status == client.OutputSucceeded {
		out.Value = o.Value
		if len(out.Value) == 0 {
			out.Value = json.RawMessage("null")
		}
	}
	if o.Error != nil {
		out.Error = &client.StructuredOutputError{Code: client.ErrorCode(o.Error.Code), Message: o.Error.Message}
		var err error
		if out.Error.Attempts, err = toAttempts(o.Error.Attempts); err != nil {
			return nil, err
		}
	}
	if len(o.Usage) > 0 {
		out.Usage = &client.Usage{}
		if err := json.Unmarshal(o.Usage, out.Usage); err != nil {
			return nil, fmt.Errorf("usage of the receipt of %s: %w", id, err)
		}
	}
	return out, nil
}

// toAttempts decodes a list of rejected attempts as the ledger stores it
// (and a failed receipt copies it); empty for none.
func toAttempts(raw json.RawMessage) ([]client.Attempt, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var out []client.Attempt
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode rejected attempts: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func toQueued(row store.QueuedMessage) (client.QueuedMessage, error) {
	parts, err := jsonb.ParseContent(row.Content)
	if err != nil {
		return client.QueuedMessage{}, err
	}
	content, _ := publicParts(parts)
	q := client.QueuedMessage{ID: row.ID, ChatID: row.ChatID, Content: content, CreatedAt: row.CreatedAt}
	if row.StructuredRequestID.Valid {
		id := row.StructuredRequestID.UUID
		q.StructuredOutputRequestID = &id
	}
	return q, nil
}

// RenderResult renders a request as GET /api/v1/structured-outputs/{id}
// answers it (the receipt webhooks' payload).
func RenderResult(st store.RequestState) (client.StructuredOutputResult, error) { return toResult(st) }

func toResult(st store.RequestState) (client.StructuredOutputResult, error) {
	out := client.StructuredOutputResult{RequestID: st.Request.RequestID, ChatID: st.Request.ChatID, Status: st.Request.Status,
		TraceID: tracing.TraceID(st.Request.TraceParent)}
	var err error
	if out.Attempts, err = toAttempts(st.Request.Attempts); err != nil {
		return out, err
	}
	if len(st.ProviderRetry) > 0 {
		var r client.ProviderRetry
		if json.Unmarshal(st.ProviderRetry, &r) == nil {
			out.ProviderRetry = &r
		}
	}
	if st.Deleted != nil {
		return tombstoneResult(out, st), nil
	}
	if st.Receipt == nil {
		return out, nil
	}
	m, err := toMessage(*st.Receipt)
	if err != nil {
		return out, err
	}
	out.ReceiptMessageID = &st.Receipt.ID
	if so := m.StructuredOutput; so != nil {
		out.Value, out.Usage = so.Value, so.Usage
		if so.Error != nil {
			// The lookup lists the attempts once, as attempts (for any
			// status); the receipt's error.attempts would repeat them.
			e := *so.Error
			e.Attempts = nil
			out.Error = &e
		}
	}
	return out, nil
}

// tombstoneResult is a deleted chat's request as its tombstone keeps it:
// the outcome, without value, receipt or attempts.
func tombstoneResult(out client.StructuredOutputResult, st store.RequestState) client.StructuredOutputResult {
	out.ChatDeleted = &client.ChatDeletion{Reason: client.DeletionReason(st.Deleted.Reason), DeletedAt: st.Deleted.DeletedAt.UTC()}
	if st.Request.ErrorCode != nil {
		out.Error = &client.StructuredOutputError{Code: *st.Request.ErrorCode}
		if st.Request.ErrorMessage != nil {
			out.Error.Message = *st.Request.ErrorMessage
		}
	}
	var u client.Usage
	if len(st.Deleted.Usage) > 0 && json.Unmarshal(st.Deleted.Usage, &u) == nil {
		out.Usage = &u
	}
	out.Attempts = nil
	return out
}
