package httpapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/notify"
)

// A stream's preview of the step being generated: the fragments of one
// generation (history_version, generation_attempt), numbered from 1, sent
// in order, each once. A stream that joins, reconnects or loses fragments
// while a step runs asks for a catch-up (notify.Hub.CatchUp: the step's
// preview so far), sends what it lacks from it, coalesced one
// message_part per part, then the live fragments after it. Live fragments
// past a gap wait for the catch-up, at most catchUpWait: then the stream
// resets its preview (preview_reset) and goes on from them.

// catchUpWait bounds how long fragments wait for a catch-up.
const catchUpWait = time.Second

// maxHeld bounds the fragments that wait.
const maxHeld = 4096

// cursor is where a stream resumes: after message msg and, when seq > 0,
// after fragment seq of generation history/attempt. It is the SSE event
// id ("msg" or "msg:history:attempt:seq", sse.appendID).
type cursor struct {
	msg     int64
	history int64
	attempt int32
	seq     int64
}

// String is the event id that resumes at c.
func (c cursor) String() string {
	if c.seq == 0 {
		return strconv.FormatInt(c.msg, 10)
	}
	return fmt.Sprintf("%d:%d:%d:%d", c.msg, c.history, c.attempt, c.seq)
}

func parseCursor(v string) (cursor, bool) {
	f := strings.Split(v, ":")
	var c cursor
	n := make([]int64, len(f))
	for i, s := range f {
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil || x < 0 || x > 1<<62 {
			return cursor{}, false
		}
		n[i] = x
	}
	switch len(f) {
	case 1:
		c.msg = n[0]
	case 4:
		if n[2] > 1<<31-1 {
			return cursor{}, false
		}
		c = cursor{msg: n[0], history: n[1], attempt: int32(n[2]), seq: n[3]}
		if c.seq == 0 { // no fragment: no position in a preview
			c.history, c.attempt = 0, 0
		}
	default:
		return cursor{}, false
	}
	return c, true
}

// streamCursor reads where a stream starts: Last-Event-ID (ignored when
// it is not an event id of ours), else ?after= (an event id), else
// ?after_id= (a message id).
func streamCursor(r *http.Request) (cursor, error) {
	after, err := queryInt(r, "after_id", 0, 0, 1<<62)
	if err != nil {
		return cursor{}, err
	}
	c := cursor{msg: int64(after)}
	if v := r.URL.Query().Get("after"); v != "" {
		var ok bool
		if c, ok = parseCursor(v); !ok {
			return cursor{}, badField("after", "must be an event id the stream sent: a message id, or message:history:attempt:seq")
		}
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		if h, ok := parseCursor(v); ok {
			c = h
		}
	}
	return c, nil
}

// join starts the preview of a stream that just read the chat: resumed
// inside the generation it reads, it goes on after the cursor's fragment
// (whose predecessors the catch-up feeds to its partials); resumed in an
// older one, it resets the client's preview. While a turn runs it asks for
// a catch-up.
func (s *Server) join(out *sse, st *streamState, chat uuid.UUID, cur cursor, status client.ChatStatus) error {
	if cur.seq > 0 {
		if cur.history != st.history || cur.attempt != st.attempt {
			if err := s.resetPreview(out, st, 0); err != nil {
				return err
			}
		} else {
			st.lastSeq = cur.seq
			out.pos, out.h, out.a, out.seq = true, cur.history, cur.attempt, cur.seq
			if status == client.StatusRunning {
				st.primeTo = cur.seq
			}
		}
	}
	if status == client.StatusRunning {
		return s.askCatchUp(out, st, chat)
	}
	return nil
}

// deltas takes what the stream's delta subscription delivered; lost says
// batches were dropped before it.
func (s *Server) deltas(out *sse, st *streamState, chat uuid.UUID, fd *feed, ds notify.Deltas, lost bool) error {
	if lost {
		st.askedAt = time.Time{}
		if err := s.askCatchUp(out, st, chat); err != nil {
			return err
		}
	}
	if cu := ds.CatchUp; cu != nil {
		switch {
		case newer(cu.HistoryVersion, cu.Attempt, st):
			st.aheadCU = cu
			fd.kick()
		case st.waiting():
			if err := s.catchUp(out, st, cu, false); err != nil {
				return err
			}
		}
	}
	for _, d := range ds.Live {
		switch {
		case d.HistoryVersion == st.history && d.Attempt == st.attempt:
			if err := s.fragment(out, st, chat, d); err != nil {
				return err
			}
		case newer(d.HistoryVersion, d.Attempt, st):
			if len(st.ahead) < maxHeld {
				st.ahead = append(st.ahead, d)
			}
			fd.kick()
		} // older generations are stale
	}
	return nil
}

// newer says whether generation history/attempt is newer than the one the
// stream follows.
func newer(history int64, attempt int32, st *streamState) bool {
	return history > st.history || history == st.history && attempt > st.attempt
}

// flushAhead sends what came of the generation a read just moved to.
func (s *Server) flushAhead(out *sse, st *streamState, chat uuid.UUID) error {
	if cu := st.aheadCU; cu != nil && !newer(cu.HistoryVersion, cu.Attempt, st) {
		st.aheadCU = nil
		if cu.HistoryVersion == st.history && cu.Attempt == st.attempt {
			st.askedAt = time.Now() // waited for: it is complete for what follows
			if err := s.catchUp(out, st, cu, false); err != nil {
				return err
			}
		}
	}
	keep := st.ahead[:0]
	for _, d := range st.ahead {
		switch {
		case d.HistoryVersion == st.history && d.Attempt == st.attempt:
			if err := s.fragment(out, st, chat, d); err != nil {
				return err
			}
		case newer(d.HistoryVersion, d.Attempt, st):
			keep = append(keep, d)
		}
	}
	st.ahead = keep
	return nil
}

// newGeneration starts the preview of the generation a read moved to.
func (st *streamState) newGeneration(out *sse) {
	st.lastSeq, st.primeTo, st.held, st.askedAt, st.reasked = 0, 0, nil, time.Time{}, false
	st.stopWait()
	st.partials.reset()
	out.pos, out.seq = false, 0
}

// waiting says whether the stream waits for a catch-up: a stream in step
// with the live fragments ignores catch-ups asked by others.
func (st *streamState) waiting() bool {
	return !st.askedAt.IsZero() || len(st.held) > 0 || st.primeTo > 0
}

// fragment takes a live fragment of the generation the stream follows.
func (s *Server) fragment(out *sse, st *streamState, chat uuid.UUID, d notify.Delta) error {
	switch {
	case d.Seq <= st.lastSeq:
		return nil // sent already, from a catch-up
	case d.Seq == st.lastSeq+1 && len(st.held) == 0 && st.primeTo == 0:
		st.askedAt = time.Time{} // in step: the step began after the stream joined
		return s.emit(out, st, d)
	}
	i, found := slices.BinarySearchFunc(st.held, d.Seq, func(h notify.Delta, seq int64) int { return cmp.Compare(h.Seq, seq) })
	if !found && len(st.held) < maxHeld {
		st.held = slices.Insert(st.held, i, d)
	}
	return s.askCatchUp(out, st, chat)
}

// askCatchUp asks for the step's preview so far, unless the stream asked
// within catchUpWait; a catch-up at hand (the chat's worker is in this
// process) is sent at once. Held fragments wait for it until catchUpWait
// after the ask.
func (s *Server) askCatchUp(out *sse, st *streamState, chat uuid.UUID) error {
	if st.askedAt.IsZero() || time.Since(st.askedAt) >= catchUpWait {
		st.askedAt = time.Now()
		if cu := s.hub.CatchUp(chat); cu != nil {
			return s.catchUp(out, st, cu, true)
		}
	}
	if len(st.held) > 0 && st.waitC == nil {
		wait := max(time.Until(st.askedAt.Add(catchUpWait)), time.Millisecond)
		if st.wait == nil {
			st.wait = time.NewTimer(wait)
		} else {
			st.wait.Reset(wait)
		}
		st.waitC = st.wait.C
	}
	return nil
}

func (st *streamState) stopWait() {
	if st.waitC != nil {
		st.wait.Stop()
		st.waitC = nil
	}
}

// waited ends a wait for a catch-up: the first time the stream asks
// again (the ask or its answer may have been lost), the second it gives
// up: the held fragments go out, after a preview_reset if some before them
// are missing, and a resumed stream no longer previews the call it
// resumed in.
func (s *Server) waited(out *sse, st *streamState, chat uuid.UUID) error {
	st.waitC = nil
	if !st.reasked {
		st.reasked, st.askedAt = true, time.Time{}
		return s.askCatchUp(out, st, chat)
	}
	st.primeTo, st.askedAt, st.reasked = 0, time.Time{}, false
	return s.drainHeld(out, st, true)
}

// catchUp sends what a catch-up of the stream's generation has that the
// stream has not sent, then the held fragments that follow. When it lacks
// fragments the stream has not sent (dropped past the buffer's cap), the
// preview is reset first. Resumed, the fragments the client had are fed
// to the partials only. local says the catch-up is the worker's buffer as
// it is now; one that came over the notification channel may have been
// sent before the fragments the stream holds (a newer one then comes).
func (s *Server) catchUp(out *sse, st *streamState, cu *notify.CatchUp, local bool) error {
	if cu.HistoryVersion != st.history || cu.Attempt != st.attempt {
		return nil
	}
	if cu.Last < st.lastSeq {
		if !local {
			return nil // older than what the client has
		}
		// The client's cursor is past the step: it starts again.
		if err := s.resetPreview(out, st, 0); err != nil {
			return err
		}
		st.primeTo = 0
	}
	if cu.Base > st.lastSeq {
		if err := s.resetPreview(out, st, cu.Base); err != nil {
			return err
		}
		st.primeTo = 0
	}
	for _, p := range cu.Parts {
		if p.First() <= st.lastSeq {
			if st.primeTo > 0 {
				had := p
				if p.Seq > st.lastSeq {
					had = p.Upto(st.lastSeq)
				}
				st.partials.prime(had)
			}
			if p.Seq <= st.lastSeq {
				continue
			}
			p = p.After(st.lastSeq)
		}
		if err := s.emit(out, st, p); err != nil {
			return err
		}
	}
	st.primeTo = 0
	if err := s.drainHeld(out, st, local); err != nil {
		return err
	}
	if len(st.held) == 0 {
		st.askedAt, st.reasked = time.Time{}, false
	}
	return nil
}

// drainHeld sends the held fragments that now follow in order; with
// force, over a gap (after a preview_reset) too.
func (s *Server) drainHeld(out *sse, st *streamState, force bool) error {
	for len(st.held) > 0 {
		d := st.held[0]
		switch {
		case d.Seq <= st.lastSeq:
		case d.Seq == st.lastSeq+1 && st.primeTo == 0:
			if err := s.emit(out, st, d); err != nil {
				return err
			}
		case force:
			if err := s.resetPreview(out, st, d.Seq-1); err != nil {
				return err
			}
			continue
		default:
			return nil
		}
		st.held = st.held[1:]
	}
	st.held = nil
	st.stopWait()
	return nil
}

// resetPreview voids the client's preview of the stream's generation: the
// fragments up to base will not come.
func (s *Server) resetPreview(out *sse, st *streamState, base int64) error {
	st.lastSeq = base
	st.partials.reset()
	data, err := json.Marshal(client.PreviewReset{HistoryVersion: st.history, GenerationAttempt: st.attempt})
	if err != nil {
		return err
	}
	return out.sendCursor(client.EventPreviewReset, data, st.history, st.attempt, base)
}

// emit sends fragments d (one, or a catch-up's coalesced run) as one
// message_part, and feeds the finalizer's to the stream's partials (the
// value a call's arguments end with goes out at once).
func (s *Server) emit(out *sse, st *streamState, d notify.Delta) error {
	st.lastSeq = d.Seq
	p := client.MessagePart{Type: d.Kind, Text: d.Text}
	if d.Kind == notify.KindToolInput {
		p = client.MessagePart{Type: "tool-call", ToolCallID: d.ToolCallID, ToolName: d.ToolName, ArgsDelta: d.Text}
	}
	ev := client.MessagePartEvent{HistoryVersion: d.HistoryVersion, GenerationAttempt: d.Attempt, Seq: d.Seq,
		Role: client.RoleAssistant, Part: p}
	if d.From > 0 && d.From < d.Seq {
		ev.FromSeq = d.From
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if err := out.sendCursor(client.EventMessagePart, data, d.HistoryVersion, d.Attempt, d.Seq); err != nil {
		return err
	}
	if ended := st.partials.feed(d); ended != nil {
		return st.partials.send(out, st, ended)
	}
	return nil
}
