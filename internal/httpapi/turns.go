package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/provider"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/validate"
)

const (
	maxDynamicTools       = 64
	maxToolDescription    = 1024
	maxToolResults        = 128
	maxToolResultOutBytes = 256 << 10
)

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// dynamicTools checks client tool declarations and returns them as stored.
func (s *Server) dynamicTools(tools []client.DynamicTool) (json.RawMessage, error) {
	if len(tools) == 0 {
		return json.RawMessage("[]"), nil
	}
	if len(tools) > maxDynamicTools {
		return nil, badField("dynamic_tools", fmt.Sprintf("at most %d tools", maxDynamicTools))
	}
	seen := map[string]bool{}
	for i, t := range tools {
		field := "dynamic_tools." + strconv.Itoa(i)
		if !toolNameRE.MatchString(t.Name) {
			return nil, badField(field+".name", "must match ^[A-Za-z0-9_-]{1,64}$")
		}
		if seen[t.Name] {
			return nil, badField(field+".name", fmt.Sprintf("duplicate tool name %q", t.Name))
		}
		if s.serverTools[t.Name] {
			return nil, badField(field+".name", fmt.Sprintf("%q is the name of a server tool", t.Name))
		}
		if s.mcp.Reserves(t.Name) {
			return nil, badField(field+".name", fmt.Sprintf("%q is in the namespace of an MCP server", t.Name))
		}
		seen[t.Name] = true
		if err := textField(field+".description", t.Description, maxToolDescription); err != nil {
			return nil, err // stored in jsonb, which cannot hold U+0000 either
		}
		if len(t.InputSchema) > 0 {
			doc, err := validate.Decode(t.InputSchema, validate.SchemaLimits)
			if err != nil {
				return nil, badField(field+".input_schema", err.Error())
			}
			if _, ok := doc.(map[string]any); !ok {
				return nil, badField(field+".input_schema", "must be a JSON Schema object")
			}
		}
	}
	return json.Marshal(tools)
}

// maxMCPServers bounds a chat's opt-ins (chats_mcp_servers_bounded).
const maxMCPServers = 16

// mcpServers checks a chat's opt-ins: each a server the operator
// configured for the chat's model, once. The API names servers; it never
// defines or changes one.
func (s *Server) mcpServers(names []string, model string) ([]string, error) {
	if len(names) > maxMCPServers {
		return nil, badField("mcp_servers", fmt.Sprintf("at most %d servers", maxMCPServers))
	}
	out := make([]string, 0, len(names))
	for i, n := range names {
		field := "mcp_servers." + strconv.Itoa(i)
		if err := s.mcp.Usable(n, model); err != nil {
			return nil, badField(field, err.Error())
		}
		if slices.Contains(out, n) {
			return nil, badField(field, fmt.Sprintf("%q is listed twice", n))
		}
		out = append(out, n)
	}
	return out, nil
}

// checkStructured repeats the state-dependent rules for a structured
// request: not in plan mode, not in a child chat, no client tool may take
// the finalizer's name, and the chat's model must be configured so that
// the finalizer can be sent as it is (provider.StructuredOutputSupported;
// a failure is a configuration_error, never a rewritten schema).
func (s *Server) checkStructured(spec *store.RequestSpec, mode client.ChatMode, model string, dynamicTools json.RawMessage) error {
	if spec == nil {
		return nil
	}
	if err := s.models.StructuredOutputSupported(model, spec.Schema); err != nil && !errors.Is(err, provider.ErrUnknownModel) {
		return badField("response_format", "configuration_error: "+err.Error())
	}
	switch mode {
	case client.ModePlan:
		return badField("response_format", "structured output is not available in plan mode")
	case client.ModeChild:
		return badField("response_format", "structured output is not available in a child chat")
	}
	var tools []client.DynamicTool
	_ = json.Unmarshal(dynamicTools, &tools)
	for _, t := range tools {
		if t.Name == client.FinalizerName {
			return badField("response_format", "the chat declares a client tool named "+client.FinalizerName+
				", which structured output reserves for its finalizer")
		}
	}
	return nil
}

type updateChatBody struct {
	Title    *string `json:"title"`
	PlanMode *bool   `json:"plan_mode"`
}

func (s *Server) updateChat(w http.ResponseWriter, r *http.Request) error {
	chatID, err := pathUUID(r, "chat")
	if err != nil {
		return err
	}
	var body updateChatBody
	if err := decodeBody(w, r, s.maxBody, &body); err != nil {
		return err
	}
	if body.Title != nil {
		if err := textField("title", *body.Title, store.MaxTitleBytes); err != nil {
			return err
		}
	}
	c, err := s.store.UpdateChat(r.Context(), currentUser(r).ID, chatID, store.ChatUpdate{Title: body.Title, PlanMode: body.PlanMode})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toChat(c))
	return nil
}

type editBody struct {
	Content        []client.MessagePart `json:"content"`
	ResponseFormat json.RawMessage      `json:"response_format"`
}

func (s *Server) editMessage(w http.ResponseWriter, r *http.Request) error {
	chatID, err := pathUUID(r, "chat")
	if err != nil {
		return err
	}
	msgID, err := strconv.ParseInt(r.PathValue("message"), 10, 64)
	if err != nil || msgID <= 0 {
		return errNotFound
	}
	var body editBody
	if err := decodeBody(w, r, s.maxBody, &body); err != nil {
		return err
	}
	content, err := inputParts(body.Content)
	if err != nil {
		return err
	}
	p := store.EditParams{OwnerID: currentUser(r).ID, ChatID: chatID, MessageID: msgID, Content: content}
	if validate.IsAbsent(body.ResponseFormat) {
		p.Format = store.FormatPreserve
	} else {
		spec, err := s.admitFormat(body.ResponseFormat)
		if err != nil {
			return err
		}
		p.Format, p.Request = store.FormatClear, spec
		if spec != nil {
			p.Format = store.FormatReplace
		}
	}
	p.Check = func(chat store.Chat, spec *store.RequestSpec) error {
		if spec != nil && p.Format == store.FormatPreserve {
			// The preserved format is admitted again, gate included.
			if !s.experiments[ExperimentStructuredOutput] {
				return badField("response_format", "structured output is disabled on this server (experiment "+
					ExperimentStructuredOutput+"); send {\"type\":\"text\"} to edit this message into an ordinary one")
			}
			if _, err := validate.CompileCached(spec.Schema); err != nil {
				return badField("response_format", "the edited message's format is no longer accepted: "+err.Error())
			}
		}
		return s.checkStructured(spec, chat.Mode, chat.Model, chat.DynamicTools)
	}
	res, err := s.store.EditMessage(r.Context(), p)
	if errors.Is(err, store.ErrNotEditable) {
		return badField("message", "only user messages can be edited")
	}
	if err != nil {
		return err
	}
	out := client.EditMessageResponse{Messages: make([]client.ChatMessage, 0, len(res.Inserted)), DeletedMessageIDs: res.DeletedIDs}
	if out.DeletedMessageIDs == nil {
		out.DeletedMessageIDs = []int64{}
	}
	for _, row := range res.Inserted {
		m, err := toMessage(row)
		if err != nil {
			return err
		}
		out.Messages = append(out.Messages, m)
	}
	if out.Message, err = toMessage(res.Message); err != nil {
		return err
	}
	out.Warnings = schemaWarnings(p.Request)
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteQueued(w http.ResponseWriter, r *http.Request) error {
	chatID, err := pathUUID(r, "chat")
	if err != nil {
		return err
	}
	queued, err := strconv.ParseInt(r.PathValue("queued"), 10, 64)
	if err != nil || queued <= 0 {
		return errNotFound
	}
	q, receipts, err := s.store.DeleteQueued(r.Context(), currentUser(r).ID, chatID, queued)
	if err != nil {
		return err
	}
	out := client.DeleteQueuedResponse{QueuedMessageID: q.ID, Messages: []client.ChatMessage{}}
	for _, row := range receipts {
		m, err := toMessage(row)
		if err != nil {
			return err
		}
		out.Messages = append(out.Messages, m)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) interrupt(w http.ResponseWriter, r *http.Request) error {
	chatID, err := pathUUID(r, "chat")
	if err != nil {
		return err
	}
	c, err := s.store.Interrupt(r.Context(), currentUser(r).ID, chatID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, toChat(c))
	return nil
}

type toolResultsBody struct {
	Results []struct {
		ToolCallID *string         `json:"tool_call_id"`
		Output     json.RawMessage `json:"output"`
		IsError    bool            `json:"is_error"`
	} `json:"results"`
}

func (s *Server) toolResults(w http.ResponseWriter, r *http.Request) error {
	chatID, err := pathUUID(r, "chat")
	if err != nil {
		return err
	}
	var body toolResultsBody
	if err := decodeBody(w, r, s.maxBody, &body); err != nil {
		return err
	}
	if len(body.Results) == 0 {
		return badField("results", "at least one result is required")
	}
	if len(body.Results) > maxToolResults {
		return badField("results", fmt.Sprintf("at most %d results", maxToolResults))
	}
	results := make([]store.ToolResult, 0, len(body.Results))
	for i, res := range body.Results {
		field := "results." + strconv.Itoa(i)
		if res.ToolCallID == nil || *res.ToolCallID == "" {
			return badField(field+".tool_call_id", "is required")
		}
		if len(res.Output) == 0 {
			return badField(field+".output", "is required (any JSON value)")
		}
		if len(res.Output) > maxToolResultOutBytes {
			return badField(field+".output", fmt.Sprintf("must be at most %d bytes", maxToolResultOutBytes))
		}
		if err := jsonb.Storable(res.Output); err != nil {
			return badField(field+".output", err.Error()) // jsonb could not store it (a number out of range, say)
		}
		results = append(results, store.ToolResult{ToolCallID: *res.ToolCallID, Output: res.Output, IsError: res.IsError})
	}
	c, msg, err := s.store.SubmitToolResults(r.Context(), currentUser(r).ID, chatID, results, client.FinalizerName)
	var tre *store.ToolResultsError
	if errors.As(err, &tre) {
		return toolResultsError(tre)
	}
	if err != nil {
		return err
	}
	m, err := toMessage(msg)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, client.ToolResultsResponse{Chat: toChat(c), Message: m})
	return nil
}

func (s *Server) compact(w http.ResponseWriter, r *http.Request) error {
	chatID, err := pathUUID(r, "chat")
	if err != nil {
		return err
	}
	c, err := s.store.RequestCompaction(r.Context(), currentUser(r).ID, chatID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, toChat(c))
	return nil
}
