package notify

import (
	"encoding/json"
	"strings"

	"github.com/google/uuid"
)

// Catch-ups. A stream that joins (or reconnects, or loses fragments) while
// a step runs asks for the step's preview so far: Hub.CatchUp answers at
// once when the chat's worker is in this process (its relay's buffer,
// preview.go); otherwise it asks every process on chatd_follow
// ("catch-up <chat>…", which also says that the chat is followed) and the
// relay that has the step publishes its buffer on chatd_catchup, before
// any fragment that followed the snapshot: the processes that hear it hand
// it to their streams of the chat, which take what they lack from it.
// Nothing is written to a table and nothing is sent while nobody joins.

// catchUpPrefix starts a catch-up request on chatd_follow.
const catchUpPrefix = "catch-up "

// maxLens bounds the fragments one delta of a catch-up payload covers.
const maxLens = 128

// CatchUp is the preview so far of a chat's step: fragments Base+1..Last
// of generation HistoryVersion/Attempt, one Delta per part, coalesced
// (Delta.From, Delta.Lens). Fragments up to Base were dropped past the
// buffer's cap: a stream that lacks them resets its preview. Receivers
// share it: read only.
type CatchUp struct {
	ChatID         uuid.UUID
	HistoryVersion int64
	Attempt        int32
	Base           int64
	Last           int64
	Parts          []Delta
}

// catchUpHeader heads each payload of a catch-up on chatd_catchup: Part
// numbers them from 0, More says more follow.
type catchUpHeader struct {
	HistoryVersion int64 `json:"history_version"`
	Attempt        int32 `json:"generation_attempt"`
	Base           int64 `json:"base,omitempty"`
	Last           int64 `json:"last"`
	Part           int   `json:"part,omitempty"`
	More           bool  `json:"more,omitempty"`
}

// CatchUp returns the preview so far of the step chat's worker streams
// when that worker is in this process. Otherwise it asks the other
// processes, whose answer reaches this process's delta subscribers of the
// chat (Deltas.CatchUp), and returns nil. No answer comes when no step of
// the chat is streaming. Asks queued together go in one notification, and
// a relay answers a chat once per publication, however many asked.
func (h *Hub) CatchUp(chat uuid.UUID) *CatchUp {
	if r := h.relayOf(); r != nil {
		if cu := r.catchUp(chat); cu != nil {
			return cu
		}
	}
	h.announce(catchUpPrefix + chat.String())
	return nil
}

func (h *Hub) setRelay(r *Relay) {
	h.mu.Lock()
	h.relay = r
	h.mu.Unlock()
}

func (h *Hub) relayOf() *Relay {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.relay
}

// payloads packs the catch-up into chatd_catchup payloads, in order.
func (cu *CatchUp) payloads() []string {
	const head = 256 // the batch's fields around its deltas
	var batches [][]Delta
	var cur []Delta
	size := head
	for _, e := range cu.entries() {
		b, _ := json.Marshal(e)
		if size+len(b) > maxPayload && len(cur) > 0 {
			batches, cur, size = append(batches, cur), nil, head
		}
		cur = append(cur, e)
		size += len(b) + 1
	}
	batches = append(batches, cur) // one, empty, when every fragment was past the cap
	out := make([]string, len(batches))
	for i, ds := range batches {
		b, _ := json.Marshal(DeltaBatch{ChatID: cu.ChatID, Deltas: ds, CatchUp: &catchUpHeader{HistoryVersion: cu.HistoryVersion,
			Attempt: cu.Attempt, Base: cu.Base, Last: cu.Last, Part: i, More: i < len(batches)-1}})
		out[i] = string(b)
	}
	return out
}

// entries cuts the parts into deltas that fit a payload: at most maxText
// bytes of text and maxLens fragments each; a longer fragment goes in
// pieces (split).
func (cu *CatchUp) entries() []Delta {
	var out []Delta
	for _, p := range cu.Parts {
		lens, text, seq := p.lens(), p.Text, p.First()
		for len(lens) > 0 {
			n, size := 0, 0
			for n < len(lens) && n < maxLens && size+int(lens[n]) <= maxText {
				size += int(lens[n])
				n++
			}
			e := p
			e.From, e.Lens = 0, nil
			if n == 0 { // one fragment too long for a payload
				n, size = 1, int(lens[0])
				e.Seq, e.Text = seq, text[:size]
				out = append(out, split(e)...)
			} else {
				e.Seq, e.Text = seq+int64(n)-1, text[:size]
				if n > 1 {
					e.From, e.Lens = seq, lens[:n]
				}
				out = append(out, e)
			}
			text, lens, seq = text[size:], lens[n:], seq+int64(n)
		}
	}
	return out
}

// assembly is a catch-up being received, payload after payload.
type assembly struct {
	header catchUpHeader
	next   int
	parts  []Delta
	texts  [][]byte
	lens   [][]int32
	bad    bool
}

// add takes the next delta of the catch-up: a piece of the last
// fragment, fragments that continue the last part, or a new part.
func (a *assembly) add(e Delta) {
	n := len(a.parts)
	if e.Off > 0 {
		if n == 0 || a.parts[n-1].Seq != e.Seq || int(a.lens[n-1][len(a.lens[n-1])-1]) != e.Off {
			a.bad = true
			return
		}
		a.texts[n-1] = append(a.texts[n-1], e.Text...)
		a.lens[n-1][len(a.lens[n-1])-1] += int32(len(e.Text))
		return
	}
	if n > 0 {
		prev := &a.parts[n-1]
		prevStart := prev.Kind == KindToolInput && len(a.texts[n-1]) == 0 && len(a.lens[n-1]) == 1
		if !prevStart && !isStart(&e) && prev.Kind == e.Kind && prev.ToolCallID == e.ToolCallID && e.First() == prev.Seq+1 {
			prev.Seq = e.Seq
			a.texts[n-1] = append(a.texts[n-1], e.Text...)
			a.lens[n-1] = append(a.lens[n-1], e.lens()...)
			return
		}
	}
	a.parts = append(a.parts, e)
	a.texts = append(a.texts, []byte(e.Text))
	a.lens = append(a.lens, append([]int32(nil), e.lens()...))
}

// finish returns the catch-up, if its parts cover Base+1..Last in order.
func (a *assembly) finish(chat uuid.UUID) (*CatchUp, bool) {
	cu := &CatchUp{ChatID: chat, HistoryVersion: a.header.HistoryVersion, Attempt: a.header.Attempt,
		Base: a.header.Base, Last: a.header.Last, Parts: a.parts}
	next := cu.Base + 1
	for i := range cu.Parts {
		p := &cu.Parts[i]
		p.Text, p.Off, p.More, p.From, p.Lens = string(a.texts[i]), 0, false, 0, nil
		if len(a.lens[i]) > 1 {
			p.From, p.Lens = p.Seq-int64(len(a.lens[i]))+1, a.lens[i]
		}
		if p.First() != next {
			return nil, false
		}
		next = p.Seq + 1
	}
	return cu, !a.bad && next == cu.Last+1
}

// publishCatchUp takes a chatd_catchup payload and hands a complete
// catch-up to the chat's delta subscribers (listener goroutine).
func (h *Hub) publishCatchUp(payload string) {
	var b DeltaBatch
	if err := json.Unmarshal([]byte(payload), &b); err != nil || b.CatchUp == nil {
		return
	}
	hd, chat := *b.CatchUp, b.ChatID
	a := h.assembling[chat]
	switch {
	case hd.Part == 0:
		delete(h.assembling, chat)
		if len(h.deltaSubs(chat)) == 0 {
			return
		}
		a = &assembly{header: hd}
		h.assembling[chat] = a
	case a == nil || a.next != hd.Part || a.header.HistoryVersion != hd.HistoryVersion || a.header.Attempt != hd.Attempt ||
		a.header.Base != hd.Base || a.header.Last != hd.Last:
		delete(h.assembling, chat)
		return
	}
	a.next++
	for _, e := range b.Deltas {
		a.add(e)
	}
	if hd.More {
		return
	}
	delete(h.assembling, chat)
	cu, ok := a.finish(chat)
	if !ok {
		return
	}
	deliverDeltas(h.deltaSubs(chat), Deltas{CatchUp: cu})
}

// askedFor returns the chats of a catch-up request on chatd_follow.
func askedFor(payload string) []uuid.UUID {
	rest, ok := strings.CutPrefix(payload, catchUpPrefix)
	if !ok {
		return nil
	}
	var ids []uuid.UUID
	for _, f := range strings.Fields(rest) {
		if id, err := uuid.Parse(f); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}
