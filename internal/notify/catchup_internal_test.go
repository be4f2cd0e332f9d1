package notify

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// step is a step's fragments as a runner emits them: text, then a tool
// call (its start, then arguments), numbered from 1.
func step(history int64, attempt int32, frags ...Delta) []Delta {
	for i := range frags {
		frags[i].HistoryVersion, frags[i].Attempt, frags[i].Seq = history, attempt, int64(i+1)
	}
	return frags
}

func text(s string) Delta { return Delta{Kind: KindText, Text: s} }
func call(id, args string) Delta {
	return Delta{Kind: KindToolInput, ToolCallID: id, ToolName: "coder_structured_output", Text: args}
}

// whole concatenates the text of each part of a catch-up with its kind.
func whole(cu *CatchUp) []string {
	var out []string
	for _, p := range cu.Parts {
		out = append(out, p.Kind+":"+p.ToolCallID+":"+p.Text)
	}
	return out
}

// TestStepPreviewCoalescesParts: a step's fragments are kept one run per
// part (a tool call's start apart), numbered as sent; a new generation
// starts the buffer again.
func TestStepPreviewCoalescesParts(t *testing.T) {
	t.Parallel()
	p := &stepPreview{}
	for _, d := range step(4, 1, text("Hel"), text("lo"), call("c1", ""), call("c1", `{"output":`), call("c1", `[1]}`), text("bye")) {
		p.add(&d, time.Now())
	}
	cu := p.catchUp(uuid.Nil)
	if want := []string{"text::Hello", "tool-input:c1:", `tool-input:c1:{"output":[1]}`, "text::bye"}; !reflect.DeepEqual(whole(cu), want) {
		t.Fatalf("parts %q, want %q", whole(cu), want)
	}
	if cu.Base != 0 || cu.Last != 6 || cu.Parts[0].First() != 1 || cu.Parts[0].Seq != 2 || cu.Parts[1].Seq != 3 ||
		cu.Parts[2].First() != 4 || cu.Parts[3].First() != 6 || cu.Parts[3].From != 0 {
		t.Fatalf("numbering %+v", cu)
	}
	if !reflect.DeepEqual(cu.Parts[2].Lens, []int32{10, 4}) {
		t.Fatalf("lens %v", cu.Parts[2].Lens)
	}
	next := Delta{HistoryVersion: 5, Attempt: 1, Seq: 1, Kind: KindText, Text: "new"}
	p.add(&next, time.Now())
	if cu := p.catchUp(uuid.Nil); cu.HistoryVersion != 5 || cu.Last != 1 || !reflect.DeepEqual(whole(cu), []string{"text::new"}) {
		t.Fatalf("after a new generation: %+v", cu)
	}
}

// TestStepPreviewCap: past maxStepPreview the buffer drops what it holds
// and the rest of the part being written (Base says up to where), and
// records the next part whole; its memory stays under the cap.
func TestStepPreviewCap(t *testing.T) {
	t.Parallel()
	p := &stepPreview{}
	frag := strings.Repeat("x", 1000)
	var ds []Delta
	for range 100 { // 100 KB of text
		ds = append(ds, text(frag))
	}
	ds = append(ds, call("c1", ""), call("c1", `{"output":1}`))
	for i, d := range step(1, 1, ds...) {
		p.add(&d, time.Now())
		if p.size > maxStepPreview {
			t.Fatalf("fragment %d: %d bytes, cap %d", i+1, p.size, maxStepPreview)
		}
	}
	cu := p.catchUp(uuid.Nil)
	if cu.Base != 100 || cu.Last != 102 || !reflect.DeepEqual(whole(cu), []string{"tool-input:c1:", `tool-input:c1:{"output":1}`}) {
		t.Fatalf("base %d last %d parts %q", cu.Base, cu.Last, whole(cu))
	}
	// A fragment longer than the cap is dropped with its part.
	q := &stepPreview{}
	for _, d := range step(1, 1, text("a"), text(strings.Repeat("y", maxStepPreview+1)), text("b"), call("c", "")) {
		q.add(&d, time.Now())
	}
	if cu := q.catchUp(uuid.Nil); cu.Base != 3 || !reflect.DeepEqual(whole(cu), []string{"tool-input:c:"}) {
		t.Fatalf("base %d parts %q", cu.Base, whole(cu))
	}
}

// TestStepPreviewMemory measures what 1,000 steps in flight keep: a
// typical structured step (a 30-item value in 16-byte fragments) and one
// filled to the cap in 4-byte fragments. Logged for docs/streams.md; the
// cap bounds both. Not parallel: it reads the heap.
func TestStepPreviewMemory(t *testing.T) {
	var items []string
	for i := range 30 {
		items = append(items, `{"name":"item number `+strings.Repeat("x", i%7)+`","tags":["a","b"]}`)
	}
	value := `{"output":{"title":"thirty items","items":[` + strings.Join(items, ",") + `]}}`
	typical := []Delta{call("c1", "")}
	for len(value) > 0 {
		n := min(16, len(value))
		typical, value = append(typical, call("c1", value[:n])), value[n:]
	}
	full := func(p *stepPreview) bool { return len(typical) > 0 && p.size < maxStepPreview-64 }
	for _, c := range []struct {
		name string
		more func(p *stepPreview, seq int64) bool // whether to add fragment seq
	}{
		{"typical", func(_ *stepPreview, seq int64) bool { return seq <= int64(len(typical)) }},
		{"at the cap", func(p *stepPreview, _ int64) bool { return full(p) }},
	} {
		frags := 0
		perStep := heapPer(1000, func() any {
			p := &stepPreview{}
			for seq := int64(1); c.more(p, seq); seq++ {
				d := Delta{HistoryVersion: 1, Attempt: 1, Seq: seq, Kind: KindText, Text: "abcd"}
				if seq <= int64(len(typical)) && c.name == "typical" {
					d = typical[seq-1]
					d.HistoryVersion, d.Attempt, d.Seq = 1, 1, seq
				}
				p.add(&d, time.Now())
				frags = int(seq)
			}
			return p
		})
		t.Logf("%s step (%d fragments): %.1f KiB per step buffer", c.name, frags, perStep/1024)
		if perStep > maxStepPreview+4096 {
			t.Fatalf("%s: %.0f bytes per step", c.name, perStep)
		}
	}
}

// heapPer returns the heap that each of n values made by mk keeps.
func heapPer(n int, mk func() any) float64 {
	keep := make([]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		keep[i] = mk()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// TestCatchUpPayloadsRoundTrip: a catch-up cut into payloads (long
// fragments in pieces, many fragments per delta) and received payload
// after payload is the catch-up sent, for random steps.
func TestCatchUpPayloadsRoundTrip(t *testing.T) {
	t.Parallel()
	for seed := range uint64(200) {
		roundTrip(t, seed)
	}
}

func FuzzCatchUpPayloads(f *testing.F) {
	f.Add(uint64(1))
	f.Add(uint64(77))
	f.Fuzz(roundTrip)
}

func roundTrip(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	chat := uuid.New()
	var ds []Delta
	runes := []string{"a", "é", "日", "😀", `"`, `\`, "\n", "<"}
	for range rng.IntN(300) {
		var b strings.Builder
		n := rng.IntN(20)
		if rng.IntN(30) == 0 {
			n = rng.IntN(3000) // longer than a payload's text
		}
		for range n {
			b.WriteString(runes[rng.IntN(len(runes))])
		}
		switch k := rng.IntN(10); {
		case k < 4:
			ds = append(ds, text(b.String()))
		case k < 5:
			ds = append(ds, Delta{Kind: KindReasoning, Text: b.String()})
		case k < 6:
			ds = append(ds, call("c"+string(rune('0'+rng.IntN(3))), ""))
		default:
			ds = append(ds, call("c"+string(rune('0'+rng.IntN(3))), b.String()))
		}
	}
	p := &stepPreview{}
	for _, d := range step(3, 2, ds...) {
		p.add(&d, time.Now())
	}
	sent := p.catchUp(chat)
	h := New(nil, nil)
	h.assembling = map[uuid.UUID]*assembly{}
	sub := h.SubscribeDeltas(chat)
	defer sub.Close()
	for _, payload := range sent.payloads() {
		if len(payload) > maxPayload {
			t.Fatalf("seed %d: payload of %d bytes", seed, len(payload))
		}
		var b DeltaBatch
		if err := json.Unmarshal([]byte(payload), &b); err != nil {
			t.Fatal(err)
		}
		h.publishCatchUp(payload)
	}
	var got Deltas
	select {
	case got = <-sub.C():
	default:
		t.Fatalf("seed %d: no catch-up assembled from %d parts", seed, len(sent.Parts))
	}
	if !reflect.DeepEqual(got.CatchUp, sent) && (len(sent.Parts) > 0 || len(got.CatchUp.Parts) > 0) {
		t.Fatalf("seed %d: received\n%+v\nsent\n%+v", seed, got.CatchUp, sent)
	}
}

// TestSplitPiecesJoin: the pieces of a fragment too long for one payload
// reach subscribers as the fragment; a piece whose predecessor was not
// seen is dropped.
func TestSplitPiecesJoin(t *testing.T) {
	t.Parallel()
	chat := uuid.New()
	h := New(nil, nil)
	h.pieces = map[uuid.UUID]Delta{}
	long := strings.Repeat("日本語", 1000)
	ds := step(1, 1, text("a"), text(long), text("b"))
	pieces := split(ds[1])
	if len(pieces) < 3 {
		t.Fatalf("%d pieces", len(pieces))
	}
	in := append(append([]Delta{ds[0]}, pieces...), ds[2])
	if got := h.join(chat, in); len(got) != 3 || got[1].Text != long || got[1].More || got[1].Off != 0 {
		t.Fatalf("joined %d fragments", len(got))
	}
	if got := h.join(chat, append([]Delta(nil), pieces[1:]...)); len(got) != 0 {
		t.Fatalf("pieces without their start gave %d fragments", len(got))
	}
}

// TestDeltaAfterUpto: a coalesced delta cut after any fragment gives the
// fragments on each side.
func TestDeltaAfterUpto(t *testing.T) {
	t.Parallel()
	d := Delta{Seq: 7, From: 4, Lens: []int32{1, 2, 3, 4}, Text: "abbcccdddd"}
	for cut, want := range map[int64][2]string{4: {"a", "bbcccdddd"}, 5: {"abb", "cccdddd"}, 6: {"abbccc", "dddd"}} {
		head, tail := d.Upto(cut), d.After(cut)
		if head.Text != want[0] || tail.Text != want[1] || head.Seq != cut || tail.First() != cut+1 || tail.Seq != 7 ||
			head.First() != 4 || len(head.Lens)+len(tail.Lens) < 2 {
			t.Fatalf("cut at %d: %+v | %+v", cut, head, tail)
		}
	}
	if tail := d.After(6); tail.From != 0 || tail.Lens != nil {
		t.Fatalf("a single fragment left: %+v", tail)
	}
}

// BenchmarkRelayStep measures what the relay adds to a step nobody
// streams: one op is a step of 16 argument fragments (16 bytes each, as
// mockllm sends the benchmark's value) kept in the buffer, then the
// commit that drops it; followed_check is the part an unfollowed chat
// paid before the buffer (Hub.Followed per fragment).
func BenchmarkRelayStep(b *testing.B) {
	hub := New(nil, nil)
	relay := NewRelay(nil, hub, nil)
	chat := uuid.New()
	frags := step(1, 1, append([]Delta{call("c1", "")}, slicesRepeat(call("c1", strings.Repeat("x", 16)), 16)...)...)
	b.Run("buffer", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			for _, d := range frags {
				d.HistoryVersion = int64(i)
				relay.Delta(chat, d)
			}
			hub.TellChanged(chat, chat, int64(i))
		}
	})
	b.Run("followed_check", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			for range frags {
				_ = hub.Followed(chat)
			}
		}
	})
}

func slicesRepeat(d Delta, n int) []Delta {
	out := make([]Delta, n)
	for i := range out {
		out[i] = d
	}
	return out
}
