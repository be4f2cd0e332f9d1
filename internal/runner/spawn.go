package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"charm.land/fantasy"

	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/validate"
)

// SpawnOptions enable the spawn_agent server tool (docs/tools.md): a chat
// created with "spawn_agents": true may start child chats and wait for
// their outcome. Nil Options.Spawn offers it to no chat.
type SpawnOptions struct {
	// MaxDepth bounds nesting: a chat at this depth (API chats are at 0)
	// cannot spawn (default 3).
	MaxDepth int
	// MaxPerTurn and MaxPerChat bound the children of one turn and of one
	// chat (defaults 8 and 32).
	MaxPerTurn, MaxPerChat int
	// StructuredOutput admits a child's response_format (the API's
	// structured output experiment).
	StructuredOutput bool
}

func (o *SpawnOptions) defaults() {
	if o.MaxDepth <= 0 {
		o.MaxDepth = 3
	}
	if o.MaxPerTurn <= 0 {
		o.MaxPerTurn = 8
	}
	if o.MaxPerChat <= 0 {
		o.MaxPerChat = 32
	}
}

// SpawnToolName is the server tool that spawns a child chat.
const SpawnToolName = store.SpawnTool

// maxSpawnPromptBytes bounds a child's first message.
const maxSpawnPromptBytes = 256 << 10

func spawnTool() fantasy.FunctionTool {
	return fantasy.FunctionTool{
		Name: SpawnToolName,
		Description: "Start a sub-agent in a child chat with its own prompt and wait for its answer: its final text, " +
			"or with response_format its result receipt ({\"status\", \"value\" | \"error\"}). " +
			"The child sees only the prompt. Several calls in one message run in parallel.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"prompt": map[string]any{"type": "string", "description": "The child's task; it sees nothing else."},
				"model":  map[string]any{"type": "string", "description": "A model id of this server (default: yours)."},
				"response_format": map[string]any{"type": "object", "description": "Ask the child for one JSON value: " +
					"{\"type\":\"json_schema\",\"json_schema\":{\"name\":…,\"schema\":{…}}}."},
				"title": map[string]any{"type": "string", "description": "The child chat's title."},
			},
			"required":             []string{"prompt"},
			"additionalProperties": false,
		},
	}
}

// spawnArgs are spawn_agent's arguments.
type spawnArgs struct {
	Prompt         *string         `json:"prompt"`
	Model          *string         `json:"model"`
	ResponseFormat json.RawMessage `json:"response_format"`
	Title          *string         `json:"title"`
}

// spawnOffered says whether the chat is offered spawn_agent.
func (a *action) spawnOffered() bool {
	return a.opts.Spawn != nil && a.turn.Chat.SpawnAgents
}

// turnStart is the id of the turn's input message (0 if none).
func (a *action) turnStart() int64 {
	for i := len(a.msgs) - 1; i >= 0; i-- {
		if a.msgs[i].row.UserInput() {
			return a.msgs[i].row.ID
		}
	}
	return 0
}

// spawnCall answers one spawn_agent call: an error result when its
// arguments or a cap refuse it, otherwise the child to create in the
// commit. awaited: the call already has a child the chat waits for.
func (a *action) spawnCall(step *parsed, call jsonb.Part, n *store.SpawnCounts) (res *jsonb.Part, sp *store.Spawn, awaited bool) {
	refuse := func(msg string) (*jsonb.Part, *store.Spawn, bool) {
		r := errorResult(call, "Not run: "+msg)
		return &r, nil, false
	}
	switch n.Step[call.ToolCallID] {
	case store.SpawnAwaited:
		return nil, nil, true
	case store.SpawnDelivered, store.SpawnDetached:
		return refuse("the child chat of this call ended without its result reaching this chat.")
	}
	o, chat := a.opts.Spawn, a.turn.Chat
	var args spawnArgs
	dec := json.NewDecoder(bytes.NewReader(call.Args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil {
		return refuse(`the arguments must be {"prompt", "model"?, "response_format"?, "title"?} (` + err.Error() + ").")
	}
	if args.Prompt == nil || strings.TrimSpace(*args.Prompt) == "" {
		return refuse("prompt is required.")
	}
	if len(*args.Prompt) > maxSpawnPromptBytes {
		return refuse(fmt.Sprintf("prompt must be at most %d bytes.", maxSpawnPromptBytes))
	}
	model := chat.Model
	if args.Model != nil {
		if !a.models.Has(*args.Model) {
			return refuse(fmt.Sprintf("unknown model %q.", *args.Model))
		}
		model = *args.Model
	}
	title := ""
	if args.Title != nil {
		if len(*args.Title) > store.MaxTitleBytes || strings.IndexByte(*args.Title, 0) >= 0 {
			return refuse(fmt.Sprintf("title must be at most %d bytes, without U+0000.", store.MaxTitleBytes))
		}
		title = *args.Title
	}
	var spec *store.RequestSpec
	if !validate.IsAbsent(args.ResponseFormat) {
		if !o.StructuredOutput {
			return refuse("response_format: structured output is disabled on this server.")
		}
		f, fe := validate.ParseResponseFormat(args.ResponseFormat)
		if fe != nil {
			return refuse(fe.Field + ": " + fe.Detail)
		}
		if f != nil {
			if err := a.models.StructuredOutputSupported(model, f.Schema); err != nil {
				return refuse("response_format: " + err.Error())
			}
			spec = &store.RequestSpec{Name: f.Name, Description: f.Description, Schema: f.Schema}
		}
	}
	switch {
	case int(chat.SpawnDepth) >= o.MaxDepth:
		return refuse(fmt.Sprintf("the depth cap max_depth (%d) is reached: this chat is at depth %d and cannot spawn.", o.MaxDepth, chat.SpawnDepth))
	case n.ThisTurn >= o.MaxPerTurn:
		return refuse(fmt.Sprintf("the fan-out cap max_children_per_turn (%d) is reached for this turn.", o.MaxPerTurn))
	case n.Total >= o.MaxPerChat:
		return refuse(fmt.Sprintf("the fan-out cap max_children_per_chat (%d) is reached for this chat.", o.MaxPerChat))
	}
	n.ThisTurn++
	n.Total++
	return nil, &store.Spawn{MessageID: step.row.ID, ToolCallID: call.ToolCallID, Model: model, Title: title,
		Content: []jsonb.Part{jsonb.Text(*args.Prompt)}, Request: spec}, false
}
