package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/notify"
)

// sim is one step of a chat as its worker streams it, and the streams
// that follow it: fragments 1..N of generation 7/1 (text, then the
// finalizer call whose arguments write value), a stream that joins after
// fragment j1, loses its connection (the client got its events up to
// some event, not necessarily all that were written), and reconnects with
// the last event id it got after fragment j2. A catch-up answered over the
// notification channel is a snapshot after fragment c, handed to the
// stream after the live fragments up to p (j <= p <= c): live fragments
// after c come after it. A catch-up may also be lost.
type sim struct {
	t     *testing.T
	rng   *rand.Rand
	chat  uuid.UUID
	req   uuid.UUID
	frags []notify.Delta
	args  string // the finalizer's arguments
	text  string
	value any
}

const simHistory, simAttempt = 7, 1

func newSim(t *testing.T, seed uint64) *sim {
	rng := rand.New(rand.NewPCG(seed, 11))
	s := &sim{t: t, rng: rng, chat: uuid.New(), req: uuid.New()}
	words := []string{"alpha", "日本", "😀", `"q"`, `\`, "line\n", "b", "naïve"}
	var text strings.Builder
	for range rng.IntN(6) {
		text.WriteString(words[rng.IntN(len(words))] + " ")
	}
	s.text = text.String()
	var items []string
	for i := range 1 + rng.IntN(12) {
		items = append(items, fmt.Sprintf(`{"name":%q,"tags":[%q]}`, words[rng.IntN(len(words))]+fmt.Sprint(i), words[rng.IntN(len(words))]))
	}
	value := `{"title":"` + strings.Repeat("t", rng.IntN(40)) + `","items":[` + strings.Join(items, ",") + `],"count":12,"ok":true}`
	s.args = `{"output":` + value + `}`
	if err := json.Unmarshal([]byte(value), &s.value); err != nil {
		t.Fatal(err)
	}
	add := func(d notify.Delta) {
		d.HistoryVersion, d.Attempt, d.Seq = simHistory, simAttempt, int64(len(s.frags)+1)
		s.frags = append(s.frags, d)
	}
	for _, f := range cut(rng, s.text) {
		add(notify.Delta{Kind: notify.KindText, Text: f})
	}
	call := notify.Delta{Kind: notify.KindToolInput, ToolCallID: "call_1", ToolName: "coder_structured_output", RequestID: s.req}
	add(call)
	for _, f := range cut(rng, s.args) {
		call.Text = f
		add(call)
	}
	return s
}

// cut splits s into random fragments on character boundaries.
func cut(rng *rand.Rand, s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(len(s), 1+rng.IntN(12))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out, s = append(out, s[:n]), s[n:]
	}
	return out
}

// snapshot is the catch-up a worker's relay answers after fragment c.
func (s *sim) snapshot(c int) *notify.CatchUp {
	hub := notify.New(nil, nil)
	relay := notify.NewRelay(nil, hub, nil)
	for _, d := range s.frags[:c] {
		relay.Delta(s.chat, d)
	}
	return hub.CatchUp(s.chat)
}

// conn runs one connection of a stream that joins after fragment join,
// resuming after cur: local says the worker is in the stream's process
// (the catch-up comes at once); otherwise the catch-up (after fragment
// c) comes after the live fragments up to p, unless lost. The connection
// ends after live fragment end (or at the last one), and the client gets
// its events up to a random one (cut). It returns the body the client got
// and the fragments the worker had produced by then.
func (s *sim) conn(cur cursor, join, end int, local, lost, cut bool) (string, int) {
	n := len(s.frags)
	hub := notify.New(nil, nil)
	if local {
		relay := notify.NewRelay(nil, hub, nil)
		for _, d := range s.frags[:join] {
			relay.Delta(s.chat, d)
		}
	}
	srv := &Server{hub: hub}
	rec := httptest.NewRecorder()
	out := &sse{w: rec, lastID: cur.msg}
	st := &streamState{history: simHistory, attempt: simAttempt}
	defer st.stopWait()
	defer st.partials.stop()
	step := func(err error) {
		if err == nil {
			err = st.partials.send(out, st, nil) // as the throttle's timer would, at once
		}
		if err != nil {
			s.t.Fatal(err)
		}
	}
	step(srv.join(out, st, s.chat, cur, client.StatusRunning))
	c := join + s.rng.IntN(n-join+1)
	p := join + s.rng.IntN(c-join+1)
	caughtUp := local || lost
	for next := join; next < end; {
		if !caughtUp && next >= p {
			step(srv.deltas(out, st, s.chat, nil, notify.Deltas{CatchUp: s.snapshot(c)}, false))
			caughtUp = true
			continue
		}
		batch := 1 + s.rng.IntN(4)
		if !caughtUp {
			batch = min(batch, p-next)
		}
		batch = min(batch, end-next)
		step(srv.deltas(out, st, s.chat, nil, notify.Deltas{Live: s.frags[next : next+batch]}, false))
		next += batch
	}
	if !caughtUp && end == n {
		step(srv.deltas(out, st, s.chat, nil, notify.Deltas{CatchUp: s.snapshot(c)}, false))
	}
	if lost && end == n {
		step(srv.waited(out, st, s.chat)) // asks again: lost too
		if st.waitC != nil {
			step(srv.waited(out, st, s.chat))
		}
	}
	body := rec.Body.String()
	if cut {
		events := strings.SplitAfter(body, "\n\n")
		body = strings.Join(events[:s.rng.IntN(len(events)+1)], "")
	}
	if caughtUp && !local && !lost {
		end = max(end, c)
	}
	return body, end
}

type simEvent struct {
	name, id string
	data     []byte
}

func events(body string) []simEvent {
	var out []simEvent
	for block := range strings.SplitSeq(body, "\n\n") {
		var e simEvent
		for line := range strings.SplitSeq(block, "\n") {
			k, v, _ := strings.Cut(line, ": ")
			switch k {
			case "event":
				e.name = v
			case "id":
				e.id = v
			case "data":
				e.data = []byte(v)
			}
		}
		if e.name != "" {
			out = append(out, e)
		}
	}
	return out
}

// lastID is the id a client that got body sends on reconnecting.
func lastID(body string) cursor {
	var c cursor
	for _, e := range events(body) {
		if e.id != "" {
			var ok bool
			if c, ok = parseCursor(e.id); !ok {
				panic("bad id " + e.id)
			}
		}
	}
	return c
}

// check reads what the client got over its connections: between preview
// resets, fragments in order, each once; partial values each growing from
// the last. Unless a catch-up was lost: every fragment once, the text and
// the arguments whole, the last partial the value.
func (s *sim) check(body string, lost bool) {
	s.t.Helper()
	next, resets := int64(1), 0
	var args, text strings.Builder
	var prev any
	for _, e := range events(body) {
		switch e.name {
		case client.EventPreviewReset:
			resets++
			if !lost {
				s.t.Fatalf("preview_reset (id %s) without a lost catch-up:\n%s", e.id, body)
			}
			c, _ := parseCursor(e.id)
			next, prev = c.seq+1, nil
			args.Reset()
			text.Reset()
		case client.EventMessagePart:
			var m client.MessagePartEvent
			if err := json.Unmarshal(e.data, &m); err != nil {
				s.t.Fatal(err)
			}
			from := m.Seq
			if m.FromSeq > 0 {
				from = m.FromSeq
			}
			if from != next || m.Seq < from || e.id != fmt.Sprintf("0:%d:%d:%d", simHistory, simAttempt, m.Seq) {
				s.t.Fatalf("fragments %d..%d (id %s) after %d:\n%s", from, m.Seq, e.id, next-1, body)
			}
			next = m.Seq + 1
			args.WriteString(m.Part.ArgsDelta)
			text.WriteString(m.Part.Text)
		case client.EventStructuredOutputPartial:
			var p client.StructuredOutputPartial
			if err := json.Unmarshal(e.data, &p); err != nil {
				s.t.Fatal(err)
			}
			v := decode(s.t, p.Value)
			if prev != nil && !extends(prev, v) {
				s.t.Fatalf("partial %s does not grow from %v", p.Value, prev)
			}
			prev = v
		}
	}
	if resets > 0 || lost {
		return // fragments past a lost catch-up may never come: the step's commit brings them
	}
	if next != int64(len(s.frags)+1) || args.String() != s.args || text.String() != s.text {
		s.t.Fatalf("up to fragment %d of %d; text %q, want %q; arguments %q, want %q", next-1, len(s.frags), text.String(), s.text, args.String(), s.args)
	}
	if !reflect.DeepEqual(prev, s.value) {
		s.t.Fatalf("last partial %v, value %v", prev, s.value)
	}
}

// joinAndDrop runs one scenario chosen by seed.
func joinAndDrop(t *testing.T, seed uint64) {
	s := newSim(t, seed)
	n := len(s.frags)
	j1 := s.rng.IntN(n + 1)
	local, lost := s.rng.IntN(3) == 0, s.rng.IntN(5) == 0
	if s.rng.IntN(3) == 0 { // no drop
		body, _ := s.conn(cursor{}, j1, n, local, lost && !local, false)
		s.check(body, lost && !local)
		return
	}
	d1 := j1 + s.rng.IntN(n-j1+1)
	first, produced := s.conn(cursor{}, j1, d1, local, false, true)
	j2 := produced + s.rng.IntN(n-produced+1)
	local2 := s.rng.IntN(3) == 0
	second, _ := s.conn(lastID(first), j2, n, local2, lost && !local2, false)
	s.check(first+second, lost && !local2)
}

// TestJoinAndDropPoints: for many steps, join, drop and resume points and
// delivery orders, a client gets every fragment once and the partials of
// the finalizer call from its first, growing to the value.
func TestJoinAndDropPoints(t *testing.T) {
	t.Parallel()
	for seed := range uint64(2000) {
		joinAndDrop(t, seed)
	}
}

func FuzzJoinAndDropPoints(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed)
	}
	f.Fuzz(joinAndDrop)
}

// TestStreamCursor: where a stream starts, from Last-Event-ID (ignored
// when it is not an event id), ?after= (refused when it is not one) or
// ?after_id=.
func TestStreamCursor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		query, header string
		want          cursor
		bad           string // the field refused
	}{
		{"", "", cursor{}, ""},
		{"after_id=5", "", cursor{msg: 5}, ""},
		{"after_id=5&after=9", "", cursor{msg: 9}, ""},
		{"after=9:4:2:17", "", cursor{msg: 9, history: 4, attempt: 2, seq: 17}, ""},
		{"after=9:4:2:17", "12", cursor{msg: 12}, ""},
		{"after_id=5", "12:3:1:8", cursor{msg: 12, history: 3, attempt: 1, seq: 8}, ""},
		{"after_id=5", "garbage", cursor{msg: 5}, ""},
		{"after=9:4:2", "", cursor{}, "after"},
		{"after=-1", "", cursor{}, "after"},
		{"after=1:2:99999999999:3", "", cursor{}, "after"},
		{"after_id=x", "", cursor{}, "after_id"},
	} {
		r := httptest.NewRequest("GET", "/api/v1/chats/x/stream?"+c.query, nil)
		if c.header != "" {
			r.Header.Set("Last-Event-ID", c.header)
		}
		got, err := streamCursor(r)
		var ae *apiError
		switch {
		case c.bad != "" && (!errors.As(err, &ae) || ae.validations[0].Field != c.bad):
			t.Errorf("%q %q: error %v, want one naming %s", c.query, c.header, err, c.bad)
		case c.bad == "" && (err != nil || got != c.want):
			t.Errorf("%q %q: %+v, %v; want %+v", c.query, c.header, got, err, c.want)
		}
	}
}

// FuzzParseCursor: an event id parses to the cursor that prints it back;
// anything else is refused, never a panic.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"0", "12", "12:3:1:8", "1:2:3", "a:b:c:d", "-1", "9223372036854775807", "1::1:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := parseCursor(s)
		if !ok {
			return
		}
		back, ok := parseCursor(c.String())
		if !ok || back != c {
			t.Fatalf("%q parsed to %+v, printed %q, parsed back to %+v", s, c, c.String(), back)
		}
	})
}
