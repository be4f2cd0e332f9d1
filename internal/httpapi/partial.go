package httpapi

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/partialjson"
)

// partialEvery is the least time between two structured_output_partial
// events of one stream; the value a call's arguments end with is sent at
// once.
const partialEvery = 50 * time.Millisecond

// partialCall follows the arguments of one finalizer call in flight.
type partialCall struct {
	id      string
	request uuid.UUID
	p       partialjson.Parser
	seq     int64  // the last fragment written
	sent    []byte // the value last sent
	dirty   bool   // written to since the value was last looked at
}

// partials is what one stream previews of the finalizer calls of the
// generation it follows. Each stream parses for itself, as it numbers its
// own message_part fragments: what it can show depends on the fragments it
// saw, and a value is only computed when an event may be sent (at most
// every partialEvery), so the parse costs one pass over the arguments plus
// one rendering of the value per event.
type partials struct {
	calls []*partialCall
	last  time.Time // when the last event was sent
	timer *time.Timer
	c     <-chan time.Time // non-nil while a send is scheduled
}

// reset voids every call (a preview_reset was sent).
func (ps *partials) reset() {
	ps.calls = nil
	ps.stop()
}

func (ps *partials) stop() {
	if ps.c != nil {
		ps.timer.Stop()
		ps.c = nil
	}
}

// feed takes a tool-input fragment (or a catch-up's coalesced run) of the
// generation the stream follows and returns the call when its arguments
// just ended. Only calls whose start the stream saw are followed: a
// catch-up gives a late stream each call from its start, but a stream
// that lost fragments for good (after a preview_reset) previews from the
// next call on.
func (ps *partials) feed(d notify.Delta) *partialCall {
	if d.RequestID == uuid.Nil || d.Kind != "tool-input" {
		return nil
	}
	var c *partialCall
	for _, x := range ps.calls {
		if x.id == d.ToolCallID {
			c = x
		}
	}
	if c == nil {
		if d.Text == "" { // the call's start
			ps.calls = append(ps.calls, &partialCall{id: d.ToolCallID, request: d.RequestID})
		}
		return nil
	}
	if d.Text == "" || c.p.Done() || c.p.Err() != nil {
		return nil // a model's malformed arguments end its preview
	}
	_, _ = c.p.Write([]byte(d.Text))
	c.seq, c.dirty = d.Seq, true
	if c.p.Done() {
		return c
	}
	return nil
}

// prime feeds fragments the client got on an earlier connection, so
// that the stream follows the call they belong to. Its value so far goes
// out with the next send: the client may lack it (its last partial may
// have been coalesced away, or lost with the connection), or get the
// value it had once more.
func (ps *partials) prime(d notify.Delta) { ps.feed(d) }

// pending reports calls written to since their value was last looked at.
func (ps *partials) pending() bool {
	for _, c := range ps.calls {
		if c.dirty {
			return true
		}
	}
	return false
}

// send emits the changed values of the calls written to (only's alone
// when not nil).
func (ps *partials) send(out *sse, st *streamState, only *partialCall) error {
	for _, c := range ps.calls {
		if !c.dirty || only != nil && c != only {
			continue
		}
		c.dirty = false
		v, ok := c.p.Member("output")
		if !ok || bytes.Equal(v, c.sent) {
			continue
		}
		c.sent = v
		data, err := json.Marshal(client.StructuredOutputPartial{RequestID: c.request, HistoryVersion: st.history,
			GenerationAttempt: st.attempt, Seq: c.seq, Value: v})
		if err != nil {
			return err
		}
		if err := out.send(client.EventStructuredOutputPartial, 0, data); err != nil {
			return err
		}
		ps.last = time.Now()
	}
	if !ps.pending() {
		ps.stop()
	}
	return nil
}

// due sends what is pending if the last event is partialEvery old, and
// schedules the send otherwise (the stream calls fire when c delivers).
func (ps *partials) due(out *sse, st *streamState) error {
	if !ps.pending() {
		return nil
	}
	wait := partialEvery - time.Since(ps.last)
	if wait <= 0 {
		return ps.send(out, st, nil)
	}
	if ps.c == nil {
		if ps.timer == nil {
			ps.timer = time.NewTimer(wait)
		} else {
			ps.timer.Reset(wait)
		}
		ps.c = ps.timer.C
	}
	return nil
}

// fire sends what is pending when the scheduled time came.
func (ps *partials) fire(out *sse, st *streamState) error {
	ps.c = nil
	return ps.send(out, st, nil)
}
