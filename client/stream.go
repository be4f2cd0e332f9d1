package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// StreamEvent is one Server-Sent Event, decoded by type.
type StreamEvent struct {
	Type string
	// ID is the highest message id delivered so far (message events).
	ID int64
	// EventID is the SSE id the event carried, if any: a message id, or
	// message:history:attempt:seq on preview events (docs/streams.md).
	EventID      string
	Message      *ChatMessage
	Part         *MessagePartEvent
	Chat         *Chat // status and chat events
	Queue        *QueueEvent
	Action       *ActionRequired
	PreviewReset *PreviewReset
	Partial      *StructuredOutputPartial
	Retry        *ProviderRetry // provider_retry events
	Error        *StreamError
	Data         json.RawMessage
}

// Stream reads a chat's live events (or the watch stream). After a
// dropped connection it reconnects with Last-Event-ID, so messages resume
// after the last one delivered (a client upserts messages by id) and the
// preview of a step still running after its last fragment delivered.
type Stream struct {
	c      *Client
	path   string
	ctx    context.Context
	cancel context.CancelFunc
	lastID int64
	// lastEventID is the last SSE id received, sent back on reconnect.
	lastEventID string

	body io.ReadCloser
	rd   *bufio.Reader
	// Reconnects counts reconnections after the first connection.
	Reconnects int
}

// Stream follows chat from after message afterID.
func (c *Client) Stream(ctx context.Context, chat uuid.UUID, afterID int64) *Stream {
	ctx, cancel := context.WithCancel(ctx)
	return &Stream{c: c, path: "/api/v1/chats/" + chat.String() + "/stream", ctx: ctx, cancel: cancel, lastID: afterID}
}

// Watch follows the status of all the caller's chats.
func (c *Client) Watch(ctx context.Context) *Stream {
	ctx, cancel := context.WithCancel(ctx)
	return &Stream{c: c, path: "/api/v1/chats/watch", ctx: ctx, cancel: cancel}
}

// Close ends the stream; a Next in progress returns. It may be called from
// another goroutine than Next.
func (s *Stream) Close() { s.cancel() }

// LastID is the highest message id delivered.
func (s *Stream) LastID() int64 { return s.lastID }

// LastEventID is the last SSE id received: where a reconnection resumes.
func (s *Stream) LastEventID() string { return s.lastEventID }

func (s *Stream) connect() error {
	path := s.path
	if s.lastID > 0 {
		path += "?after_id=" + strconv.FormatInt(s.lastID, 10)
	}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, s.c.baseURL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if err := s.c.authorize(s.ctx, req); err != nil {
		return err
	}
	switch {
	case s.lastEventID != "":
		req.Header.Set("Last-Event-ID", s.lastEventID)
	case s.lastID > 0:
		req.Header.Set("Last-Event-ID", strconv.FormatInt(s.lastID, 10))
	}
	resp, err := s.c.http.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		e := &APIError{StatusCode: resp.StatusCode}
		_ = json.NewDecoder(resp.Body).Decode(&e.Body)
		return e
	}
	s.body, s.rd = resp.Body, bufio.NewReader(resp.Body)
	return nil
}

// permanent reports errors a reconnect cannot fix.
func permanent(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500 && ae.StatusCode != http.StatusTooManyRequests
}

// Next returns the next event, reconnecting as needed until ctx ends or the
// server refuses the stream (e.g. 404).
func (s *Stream) Next() (StreamEvent, error) {
	backoff := 100 * time.Millisecond
	for {
		if s.rd == nil {
			if err := s.connect(); err != nil {
				if permanent(err) || s.ctx.Err() != nil {
					return StreamEvent{}, errors.Join(err, s.ctx.Err())
				}
				select {
				case <-s.ctx.Done():
					return StreamEvent{}, s.ctx.Err()
				case <-time.After(backoff):
				}
				backoff = min(backoff*2, 5*time.Second)
				continue
			}
		}
		ev, err := s.read()
		if err == nil {
			return ev, nil
		}
		s.body.Close()
		s.body, s.rd = nil, nil
		if s.ctx.Err() != nil {
			return StreamEvent{}, s.ctx.Err()
		}
		s.Reconnects++
	}
}

// read parses one event from the open connection.
func (s *Stream) read() (StreamEvent, error) {
	var name, id string
	var data strings.Builder
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			return StreamEvent{}, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if name == "" && data.Len() == 0 {
				continue // a comment-only block (keep-alive)
			}
			return s.decode(name, id, data.String())
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
}

func (s *Stream) decode(name, id, data string) (StreamEvent, error) {
	ev := StreamEvent{Type: name, Data: json.RawMessage(data), ID: s.lastID, EventID: id}
	if id != "" {
		s.lastEventID = id
		msg, _, _ := strings.Cut(id, ":")
		if n, err := strconv.ParseInt(msg, 10, 64); err == nil && n > s.lastID {
			s.lastID, ev.ID = n, n
		}
	}
	var target any
	switch name {
	case EventMessage:
		ev.Message = &ChatMessage{}
		target = ev.Message
	case EventMessagePart:
		ev.Part = &MessagePartEvent{}
		target = ev.Part
	case EventStatus, EventChat:
		ev.Chat = &Chat{}
		target = ev.Chat
	case EventQueue:
		ev.Queue = &QueueEvent{}
		target = ev.Queue
	case EventActionRequired:
		ev.Action = &ActionRequired{}
		target = ev.Action
	case EventPreviewReset:
		ev.PreviewReset = &PreviewReset{}
		target = ev.PreviewReset
	case EventStructuredOutputPartial:
		ev.Partial = &StructuredOutputPartial{}
		target = ev.Partial
	case EventProviderRetry:
		ev.Retry = &ProviderRetry{}
		target = ev.Retry
	case EventError:
		ev.Error = &StreamError{}
		target = ev.Error
	}
	if target != nil {
		if err := json.Unmarshal([]byte(data), target); err != nil {
			return ev, fmt.Errorf("chatd: bad %s event: %w", name, err)
		}
	}
	return ev, nil
}
