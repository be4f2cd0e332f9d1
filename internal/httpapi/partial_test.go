package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/notify"
)

// recordedStream is a tool call's arguments as a provider streamed them
// (testdata/partial_streams.json says where each was recorded).
type recordedStream struct {
	Name      string   `json:"name"`
	Source    string   `json:"source"`
	Wrap      bool     `json:"wrap"`
	Fragments []string `json:"fragments"`
}

func recordedStreams(t *testing.T) []recordedStream {
	t.Helper()
	raw, err := os.ReadFile("testdata/partial_streams.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Streams []recordedStream }
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Streams) < 3 {
		t.Fatalf("%d recorded streams", len(doc.Streams))
	}
	return doc.Streams
}

// args are the finalizer's argument fragments: a recorded object stream
// becomes the output, as a model writes it in {"output": …}.
func (r recordedStream) args() []string {
	if !r.Wrap {
		return r.Fragments
	}
	return append(append([]string{`{"output": `}, r.Fragments...), "}")
}

// output is the value the whole arguments carry (what the receipt holds).
func (r recordedStream) output(t *testing.T) any {
	t.Helper()
	var a struct{ Output json.RawMessage }
	if err := json.Unmarshal([]byte(strings.Join(r.args(), "")), &a); err != nil || a.Output == nil {
		t.Fatalf("%s: arguments without output: %v", r.Name, err)
	}
	return decode(t, a.Output)
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %s: %v", b, err)
	}
	return v
}

// extends reports whether next is prev or grew from it: strings by
// appending, arrays and objects by members (each kept member extending),
// scalars unchanged.
func extends(prev, next any) bool {
	switch p := prev.(type) {
	case string:
		n, ok := next.(string)
		return ok && strings.HasPrefix(n, p)
	case []any:
		n, ok := next.([]any)
		if !ok || len(n) < len(p) {
			return false
		}
		for i := range p {
			if !extends(p[i], n[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		n, ok := next.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range p {
			w, ok := n[k]
			if !ok || !extends(v, w) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(prev, next)
	}
}

// sent are the structured_output_partial events a recorder got.
func sent(t *testing.T, rec *httptest.ResponseRecorder) []client.StructuredOutputPartial {
	t.Helper()
	var out []client.StructuredOutputPartial
	for block := range strings.SplitSeq(rec.Body.String(), "\n\n") {
		name, data, _ := strings.Cut(block, "\ndata: ")
		if name != "event: "+client.EventStructuredOutputPartial {
			continue
		}
		var p client.StructuredOutputPartial
		if err := json.Unmarshal([]byte(data), &p); err != nil {
			t.Fatalf("bad event %q: %v", data, err)
		}
		out = append(out, p)
	}
	return out
}

func newRecorder() (*httptest.ResponseRecorder, *sse) {
	rec := httptest.NewRecorder()
	return rec, &sse{w: rec, rc: http.NewResponseController(rec)}
}

// delta is fragment seq of the finalizer call of request req.
func delta(req uuid.UUID, seq int64, text string) notify.Delta {
	return notify.Delta{HistoryVersion: 3, Attempt: 2, Seq: seq, Kind: "tool-input", ToolCallID: "call_1",
		ToolName: "coder_structured_output", Text: text, RequestID: req}
}

// TestPartialsOfEveryPrefix feeds every prefix of recorded argument
// streams, cut at every byte (within escapes and multi-byte characters
// too), through a stream's partials: each value extends the one of the
// shorter prefix, and the whole arguments show the receipt's value.
func TestPartialsOfEveryPrefix(t *testing.T) {
	t.Parallel()
	req := uuid.New()
	for _, r := range recordedStreams(t) {
		t.Run(r.Name, func(t *testing.T) {
			t.Parallel()
			frags := r.args()
			full := strings.Join(frags, "")
			var prev any
			shown := 0
			for n := 0; n <= len(full); n++ {
				rec, out := newRecorder()
				st := &streamState{history: 3, attempt: 2}
				st.partials.feed(delta(req, 1, ""))
				left, seq := n, int64(1)
				for _, f := range frags {
					if left == 0 {
						break
					}
					f = f[:min(len(f), left)]
					left -= len(f)
					seq++
					st.partials.feed(delta(req, seq, f))
				}
				if err := st.partials.send(out, st, nil); err != nil {
					t.Fatal(err)
				}
				evs := sent(t, rec)
				if len(evs) > 1 {
					t.Fatalf("prefix %q: %d events", full[:n], len(evs))
				}
				if len(evs) == 0 {
					if prev != nil {
						t.Fatalf("prefix %q shows nothing after %v", full[:n], prev)
					}
					continue
				}
				e := evs[0]
				if e.RequestID != req || e.HistoryVersion != 3 || e.GenerationAttempt != 2 || e.Seq != seq {
					t.Fatalf("event %+v", e)
				}
				v := decode(t, e.Value)
				if prev != nil && !extends(prev, v) {
					t.Fatalf("prefix %q: %s does not extend %v", full[:n], e.Value, prev)
				}
				prev = v
				shown++
			}
			if want := r.output(t); !reflect.DeepEqual(prev, want) {
				t.Fatalf("last partial %v, output %v", prev, want)
			}
			if shown < 3 {
				t.Fatalf("only %d prefixes showed a value", shown)
			}
		})
	}
}

// TestPartialsAsTheFragmentsCome feeds recorded fragments one by one, as
// a stream does: a value goes out only when it changed, each extends the
// last, and the fragment that ends the arguments sends the final value at
// once, whatever the coalescing.
func TestPartialsAsTheFragmentsCome(t *testing.T) {
	t.Parallel()
	req := uuid.New()
	for _, r := range recordedStreams(t) {
		t.Run(r.Name, func(t *testing.T) {
			t.Parallel()
			rec, out := newRecorder()
			st := &streamState{history: 3, attempt: 2}
			st.partials.feed(delta(req, 1, ""))
			frags := r.args()
			for i, f := range frags {
				ended := st.partials.feed(delta(req, int64(i+2), f))
				if (ended != nil) != (i == len(frags)-1) {
					t.Fatalf("fragment %d of %d: ended %v", i, len(frags), ended != nil)
				}
				if ended != nil {
					if err := st.partials.send(out, st, ended); err != nil {
						t.Fatal(err)
					}
				} else if i%3 == 0 { // coalesced: looked at every third fragment
					if err := st.partials.send(out, st, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			evs := sent(t, rec)
			if len(evs) < 2 {
				t.Fatalf("%d events", len(evs))
			}
			for i := 1; i < len(evs); i++ {
				if string(evs[i].Value) == string(evs[i-1].Value) || evs[i].Seq <= evs[i-1].Seq ||
					!extends(decode(t, evs[i-1].Value), decode(t, evs[i].Value)) {
					t.Fatalf("event %d %s (seq %d) after %s (seq %d)", i, evs[i].Value, evs[i].Seq, evs[i-1].Value, evs[i-1].Seq)
				}
			}
			last := evs[len(evs)-1]
			if want := r.output(t); !reflect.DeepEqual(decode(t, last.Value), want) {
				t.Fatalf("last partial %s (seq %d), output %v", last.Value, last.Seq, want)
			}
		})
	}
}

// TestPartialsFollowOnlyWhatTheStreamSaw: a stream that joins in the
// middle of a call shows nothing of it, other tools' fragments and text are
// not parsed, a reset voids the call, and sends are spaced by partialEvery.
func TestPartialsFollowOnlyWhatTheStreamSaw(t *testing.T) {
	t.Parallel()
	req := uuid.New()
	rec, out := newRecorder()
	st := &streamState{history: 3, attempt: 2}

	st.partials.feed(delta(req, 5, `{"output": "mid`)) // no start seen
	other := notify.Delta{Kind: "tool-input", ToolCallID: "call_2", ToolName: "read_file", Seq: 6}
	st.partials.feed(other)
	other.Text, other.Seq = `{"output": "x"}`, 7
	st.partials.feed(other)
	if st.partials.pending() || len(st.partials.calls) != 0 {
		t.Fatalf("followed %d calls", len(st.partials.calls))
	}

	st.partials.feed(delta(req, 8, ""))
	st.partials.feed(delta(req, 9, `{"output": ["a"`))
	if err := st.partials.due(out, st); err != nil { // nothing sent yet: goes out at once
		t.Fatal(err)
	}
	st.partials.feed(delta(req, 10, `, "b"`))
	if err := st.partials.due(out, st); err != nil { // within partialEvery: scheduled
		t.Fatal(err)
	}
	if n := len(sent(t, rec)); n != 1 || st.partials.c == nil {
		t.Fatalf("%d events, scheduled %v", n, st.partials.c != nil)
	}
	select {
	case <-st.partials.c:
	case <-time.After(10 * partialEvery):
		t.Fatal("the scheduled send did not come")
	}
	if err := st.partials.fire(out, st); err != nil {
		t.Fatal(err)
	}
	evs := sent(t, rec)
	if len(evs) != 2 || string(evs[0].Value) != `["a"]` || string(evs[1].Value) != `["a","b"]` {
		t.Fatalf("events %+v", evs)
	}
	if d := evs[1].Seq; d != 10 {
		t.Fatalf("seq %d", d)
	}

	st.partials.reset()
	st.partials.feed(delta(req, 11, `, "c"]}`))
	if st.partials.pending() {
		t.Fatal("a reset call is still followed")
	}
}
