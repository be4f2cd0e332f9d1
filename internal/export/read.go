package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/store"
)

// ErrFormat: the input is not an export this version reads; the message
// names the line.
var ErrFormat = errors.New("not a chatd export")

// batchChats is how many chats an import writes per transaction at least
// (whole trees: a chat's children go with it).
const batchChats = 100

// Import reads an export from r and writes its chats for user (the
// export's own user when empty), whole trees of chats per transaction. It
// stops at the first error: what earlier transactions wrote stays (a chat
// id in use fails a second import of the same export). A missing or
// disagreeing end line is an error (the export was cut or altered), after
// the chats before it were written. The counts are those of the chats
// written (their queued messages were read, not written).
func Import(ctx context.Context, st *store.Store, r io.Reader, user string) (Counts, error) {
	dec := json.NewDecoder(r)
	var h Header
	if err := decodeLine(dec, 1, &h); err != nil {
		return Counts{}, err
	}
	if h.Type != TypeHeader || h.Version != Version {
		return Counts{}, fmt.Errorf("%w: line 1 is %q version %d, want %q version %d", ErrFormat, h.Type, h.Version, TypeHeader, Version)
	}
	if user == "" {
		user = h.User
	}
	rd := reader{dec: dec, line: 1}
	var wrote Counts
	var batch []store.ChatExport
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := st.Import(ctx, user, batch); err != nil {
			return err
		}
		for _, c := range batch {
			wrote.add(c)
		}
		batch = batch[:0]
		return nil
	}
	for {
		tree, end, err := rd.tree()
		if err != nil {
			return wrote, err
		}
		if len(batch) >= batchChats && len(tree) > 0 {
			if err := flush(); err != nil {
				return wrote, err
			}
		}
		batch = append(batch, tree...)
		if end == nil {
			continue
		}
		if err := flush(); err != nil {
			return wrote, err
		}
		if *end != wrote {
			return wrote, fmt.Errorf("%w: the end line counts %+v, the export held %+v", ErrFormat, *end, wrote)
		}
		return wrote, nil
	}
}

// reader reads an export's lines after the header.
type reader struct {
	dec  *json.Decoder
	line int
	// next is a top-level chat read ahead: it starts the next tree.
	next *store.ChatExport
}

// tree reads the next tree of chats (a top-level chat and its
// descendants, parents first), or the end line (with the tree before it).
func (r *reader) tree() ([]store.ChatExport, *Counts, error) {
	var tree []store.ChatExport
	in := map[uuid.UUID]bool{}
	if r.next != nil {
		tree, in[r.next.Chat.ID] = append(tree, *r.next), true
		r.next = nil
	}
	for {
		var raw json.RawMessage
		r.line++
		if err := decodeLine(r.dec, r.line, &raw); err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: it ends at line %d without its end line (cut short?)", ErrFormat, r.line-1)
			}
			return tree, nil, err
		}
		var t struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return tree, nil, fmt.Errorf("%w: line %d: %v", ErrFormat, r.line, err)
		}
		if t.Type == TypeEnd {
			var e End
			if err := json.Unmarshal(raw, &e); err != nil {
				return tree, nil, fmt.Errorf("%w: line %d: %v", ErrFormat, r.line, err)
			}
			return tree, &e.Counts, nil
		}
		if t.Type == TypeChat {
			c, err := r.chat(raw)
			if err != nil {
				return tree, nil, err
			}
			if !c.Chat.ParentChatID.Valid && len(tree) > 0 {
				r.next = &c
				return tree, nil, nil
			}
			if c.Chat.ParentChatID.Valid && !in[c.Chat.ParentChatID.UUID] {
				return tree, nil, fmt.Errorf("%w: line %d: chat %s comes before its parent %s", ErrFormat, r.line, c.Chat.ID, c.Chat.ParentChatID.UUID)
			}
			tree, in[c.Chat.ID] = append(tree, c), true
			continue
		}
		if len(tree) == 0 {
			return tree, nil, fmt.Errorf("%w: line %d: a %q line before any chat", ErrFormat, r.line, t.Type)
		}
		if err := r.row(raw, t.Type, &tree[len(tree)-1]); err != nil {
			return tree, nil, err
		}
	}
}

// chat reads a chat line.
func (r *reader) chat(raw json.RawMessage) (store.ChatExport, error) {
	var c Chat
	if err := strict(raw, &c); err != nil {
		return store.ChatExport{}, fmt.Errorf("%w: line %d: %v", ErrFormat, r.line, err)
	}
	return store.ChatExport{Chat: store.Chat{ID: c.ID, ParentChatID: fromNull(c.ParentChatID), Title: c.Title, Model: c.Model,
		SystemPrompt: c.SystemPrompt, Mode: c.Mode, DynamicTools: c.DynamicTools, MCPServers: c.MCPServers,
		SpawnAgents: c.SpawnAgents, SpawnDepth: c.SpawnDepth, SpawnMessageID: c.SpawnMessageID, SpawnToolCallID: c.SpawnToolCallID,
		SpawnState: c.SpawnState, Status: c.Status, LastError: c.LastError, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}}, nil
}

// row reads a line of the chat e, which it must name.
func (r *reader) row(raw json.RawMessage, typ string, e *store.ChatExport) error {
	var chat uuid.UUID
	var err error
	switch typ {
	case TypeRequest:
		var q Request
		if err = strict(raw, &q); err == nil {
			chat = q.ChatID
			e.Requests = append(e.Requests, store.Request{RequestID: q.RequestID, ChatID: q.ChatID, Name: q.Name,
				Description: q.Description, Schema: q.Schema, Status: q.Status, Rejections: q.Rejections,
				ValidationRejections: q.ValidationRejections, Steps: q.Steps, Attempts: q.Attempts, ErrorCode: q.ErrorCode,
				ErrorMessage: q.ErrorMessage, TraceParent: q.TraceParent, CreatedAt: q.CreatedAt, FinishedAt: q.FinishedAt})
		}
	case TypeMessage:
		var m Message
		if err = strict(raw, &m); err == nil {
			chat = m.ChatID
			e.Messages = append(e.Messages, store.Message{ID: m.ID, ChatID: m.ChatID, Role: m.Role, Kind: m.Kind,
				Visibility: m.Visibility, Content: m.Content, StructuredRequestID: fromNull(m.StructuredRequestID),
				FinishReason: m.FinishReason, Usage: m.Usage, Compressed: m.Compressed, Deleted: m.Deleted, CreatedAt: m.CreatedAt})
		}
	case TypeQueued:
		var q Queued
		if err = strict(raw, &q); err == nil {
			chat = q.ChatID
			e.Queued = append(e.Queued, store.QueuedMessage{ID: q.ID, ChatID: q.ChatID, Content: q.Content,
				StructuredRequestID: fromNull(q.StructuredRequestID), CreatedAt: q.CreatedAt})
		}
	default:
		return fmt.Errorf("%w: line %d: unknown type %q", ErrFormat, r.line, typ)
	}
	if err != nil {
		return fmt.Errorf("%w: line %d: %v", ErrFormat, r.line, err)
	}
	if chat != e.Chat.ID {
		return fmt.Errorf("%w: line %d: a %s of chat %s after chat %s", ErrFormat, r.line, typ, chat, e.Chat.ID)
	}
	return nil
}

// strict decodes one line, refusing fields the format does not have.
func strict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// decodeLine decodes the next JSON value of the input.
func decodeLine(dec *json.Decoder, line int, v any) error {
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return err
		}
		return fmt.Errorf("%w: line %d: %v", ErrFormat, line, err)
	}
	return nil
}
