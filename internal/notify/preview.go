package notify

import (
	"time"

	"github.com/google/uuid"
)

// The relay keeps, per chat, the preview of the step its worker streams,
// so that a stream that joins or reconnects in the middle of the step gets
// what it missed (a catch-up, catchup.go). A step's fragments are kept
// coalesced into runs, one per part (a text, a reasoning, a tool call's
// arguments), with each fragment's length, so a catch-up can start after
// any fragment.
//
// The buffer is bounded (maxStepPreview): past it, the runs so far are
// dropped and so is the rest of the part being written; recording starts
// again with the next part, so a late stream still gets the next tool
// call whole (and its partial values). It is dropped when the worker
// commits the chat (Hub.TellChanged: the step's commit, or the turn's
// end), when the next step starts, or previewIdle after its last fragment.

// maxStepPreview bounds the memory one step's buffer holds: the capacity
// of its runs' text and fragment lengths plus runOverhead per run.
const maxStepPreview = 64 << 10

// runOverhead is what a run costs beside its text and lengths.
const runOverhead = 128

// previewIdle drops a buffer its step left behind without a commit of
// this process (the chat was taken over, the worker stopped). A step that
// sends nothing for the provider silence timeout (5 minutes by default)
// is cut off before.
const previewIdle = 10 * time.Minute

// Kinds of preview fragments (Delta.Kind).
const (
	KindText      = "text"
	KindReasoning = "reasoning"
	KindToolInput = "tool-input"
)

// run is consecutive fragments of one part.
type run struct {
	kind, callID, toolName string
	request                uuid.UUID
	start                  bool  // a tool call's start: its name, no arguments
	from                   int64 // the first fragment's seq
	text                   []byte
	lens                   []int32 // each fragment's length in text
}

func (r *run) last() int64 { return r.from + int64(len(r.lens)) - 1 }

// isStart says whether d starts a tool call (a fragment with no text).
func isStart(d *Delta) bool { return d.Kind == KindToolInput && d.Text == "" }

// continues says whether d is the next fragment of r's part.
func (r *run) continues(d *Delta) bool {
	return !r.start && !isStart(d) && r.kind == d.Kind && r.callID == d.ToolCallID
}

// stepPreview is what a relay keeps of one chat's step.
type stepPreview struct {
	history int64
	attempt int32
	base    int64 // fragments up to base are not kept (past the cap)
	last    int64 // the last fragment recorded or dropped
	skip    *run  // past the cap in the middle of this part: its rest is dropped
	runs    []run
	size    int
	touched time.Time
}

// add records the step's next fragment.
func (p *stepPreview) add(d *Delta, now time.Time) {
	p.touched = now
	if d.HistoryVersion != p.history || d.Attempt != p.attempt || d.Seq <= p.last {
		*p = stepPreview{history: d.HistoryVersion, attempt: d.Attempt, base: d.Seq - 1, last: d.Seq - 1, touched: now}
	} else if d.Seq != p.last+1 { // never in-process; a buffer must not hold a gap
		p.drop(d.Seq - 1)
	}
	p.last = d.Seq
	if p.skip != nil {
		if p.skip.continues(d) {
			p.base = d.Seq
			return
		}
		p.skip = nil
	}
	var cur *run
	if n := len(p.runs); n > 0 && p.runs[n-1].continues(d) {
		cur = &p.runs[n-1]
	}
	if cur == nil {
		head := runOverhead + len(d.ToolCallID) + len(d.ToolName)
		if p.size+head+len(d.Text)+4 > maxStepPreview { // a new part past the cap: it starts the buffer again
			p.drop(d.Seq - 1)
		}
		p.runs = append(p.runs, run{kind: d.Kind, callID: d.ToolCallID, toolName: d.ToolName, request: d.RequestID,
			start: isStart(d), from: d.Seq})
		cur = &p.runs[len(p.runs)-1]
		p.size += head
	}
	if !p.write(cur, d.Text) { // the part goes on past the cap: its rest is dropped
		p.drop(d.Seq)
		p.skip = &run{kind: d.Kind, callID: d.ToolCallID}
	}
}

// drop forgets the runs: fragments up to base are no longer kept.
func (p *stepPreview) drop(base int64) {
	p.runs, p.size, p.skip, p.base = nil, 0, nil, base
}

// write appends a fragment to r, if it fits under the cap.
func (p *stepPreview) write(r *run, s string) bool {
	room := maxStepPreview - p.size
	// The text leaves a quarter of the room for the fragments' lengths.
	text, grew, ok := grow(r.text, len(s), 1, room-room/4)
	if !ok {
		return false
	}
	lens, grewLens, ok := grow(r.lens, 1, 4, room-grew)
	if !ok {
		return false
	}
	r.text, r.lens = append(text, s...), append(lens, int32(len(s)))
	p.size += grew + grewLens
	return true
}

// grow makes room for n more elements of size bytes in s, doubling its
// capacity but by at most room bytes; it returns the bytes it added and
// whether the room sufficed.
func grow[T any](s []T, n, size, room int) ([]T, int, bool) {
	need := len(s) + n
	if need <= cap(s) {
		return s, 0, true
	}
	c := max(need, 2*cap(s), 16)
	if (c-cap(s))*size > room {
		c = cap(s) + room/size
	}
	if c < need {
		return s, 0, false
	}
	out := make([]T, len(s), c)
	copy(out, s)
	return out, (c - cap(s)) * size, true
}

// catchUp returns the step's preview so far, each run as one Delta.
func (p *stepPreview) catchUp(chat uuid.UUID) *CatchUp {
	cu := &CatchUp{ChatID: chat, HistoryVersion: p.history, Attempt: p.attempt, Base: p.base, Last: p.last,
		Parts: make([]Delta, 0, len(p.runs))}
	for i := range p.runs {
		r := &p.runs[i]
		d := Delta{HistoryVersion: p.history, Attempt: p.attempt, Seq: r.last(), Kind: r.kind, ToolCallID: r.callID,
			ToolName: r.toolName, RequestID: r.request, Text: string(r.text)}
		if len(r.lens) > 1 {
			d.From, d.Lens = r.from, append([]int32(nil), r.lens...)
		}
		cu.Parts = append(cu.Parts, d)
	}
	return cu
}
