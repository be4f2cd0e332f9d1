package httpapi

import (
	"encoding/json"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/store"
)

// rendered is one read with its events' data marshalled once. A feed
// renders each read before handing it to every stream of the chat, so at
// 1,000 streams a change costs one marshal per event, not one per stream;
// each stream only decides which of the events it still has to send.
type rendered struct {
	store.StreamRead
	messages [][]byte // message event data per Changed row; nil for a deleted row
	ids      []int64  // the message id per Changed row
	queue    []byte   // queue event data
	status   []byte   // status event data
	action   []byte   // action_required event data, when the chat requires action
	failure  []byte   // error event data, when the chat is in error
	err      error    // a row could not be rendered: the streams end
}

func render(rd store.StreamRead) *rendered {
	r := &rendered{StreamRead: rd, messages: make([][]byte, len(rd.Changed)), ids: make([]int64, len(rd.Changed))}
	r.err = r.fill()
	return r
}

func (r *rendered) fill() error {
	var err error
	for i, row := range r.Changed {
		if row.Deleted {
			continue
		}
		m, err := toMessage(row)
		if err != nil {
			return err
		}
		if r.messages[i], err = json.Marshal(m); err != nil {
			return err
		}
		r.ids[i] = m.ID
	}
	queue := make([]client.QueuedMessage, 0, len(r.Queue))
	for _, q := range r.Queue {
		qm, err := toQueued(q)
		if err != nil {
			return err
		}
		queue = append(queue, qm)
	}
	if r.queue, err = json.Marshal(client.QueueEvent{QueuedMessages: queue}); err != nil {
		return err
	}
	c := r.Chat
	if r.status, err = json.Marshal(toChat(c)); err != nil {
		return err
	}
	if c.Status == client.StatusRequiresAction {
		calls := make([]client.ToolCall, 0, len(r.Pending))
		for _, p := range r.Pending {
			calls = append(calls, client.ToolCall{ToolCallID: p.ToolCallID, ToolName: p.ToolName, Args: p.Args})
		}
		if r.action, err = json.Marshal(client.ActionRequired{ToolCalls: calls}); err != nil {
			return err
		}
	}
	if c.Status == client.StatusError {
		if r.failure, err = json.Marshal(chatError(c)); err != nil {
			return err
		}
	}
	return nil
}
