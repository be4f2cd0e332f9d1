package partialjson_test

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/chatd/chatd/internal/partialjson"
)

// recorded is testdata/streams.json: fragments of real provider streams
// (see testdata/extract.py).
type recorded struct {
	Source    string   `json:"source"`
	Fragments []string `json:"fragments"`
}

func loadRecorded(t testing.TB) []recorded {
	b, err := os.ReadFile("testdata/streams.json")
	if err != nil {
		t.Fatal(err)
	}
	var rs []recorded
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	if len(rs) < 50 {
		t.Fatalf("only %d recorded streams", len(rs))
	}
	return rs
}

// tricky are hand-written texts for what the recordings lack: escapes
// (surrogate pairs split anywhere), multi-byte UTF-8, numbers in every
// position, literals, empty and nested containers, whitespace.
var tricky = []string{
	`{"output":{"s":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00\ud83d\u0041 é😀","n":[0,-1,2.5,-3e10,4E+2,1e-7],"l":[true,false,null],"e":{},"a":[],"x":[[[]],[{}]]}}`,
	" { \"output\" : [ 1 , \"two\" , { \"three\" : 3 } , [ 4 ] , null ] } ",
	`{"output":"\ud800\ud800\udc00 lone and paired"}`,
	`{"output":123456789}`,
	`{"a":1,"output":{"k":"v"},"z":[1]}`,
	`[1,2,[3,{"a":"b"}]]`,
	`"top-level string"`,
}

// checkPrefixes feeds every byte prefix of text and checks that each value
// is valid JSON, extends the previous one, and that the last equals text.
func checkPrefixes(t *testing.T, name, text string) {
	t.Helper()
	var prev any
	var have bool
	for i := 0; i <= len(text); i++ {
		v, err := partialjson.Parse([]byte(text[:i]))
		if err != nil {
			t.Fatalf("%s: prefix %d: %v", name, i, err)
		}
		if v == nil {
			if have {
				t.Fatalf("%s: prefix %d: value disappeared", name, i)
			}
			continue
		}
		cur := decode(t, v)
		if have && !extends(prev, cur) {
			t.Fatalf("%s: prefix %d: %s does not extend the previous value %v", name, i, v, prev)
		}
		prev, have = cur, true
	}
	if !have || !reflect.DeepEqual(prev, decode(t, []byte(text))) {
		t.Fatalf("%s: final value %v, want %s", name, prev, text)
	}
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("not JSON: %s: %v", b, err)
	}
	return v
}

// extends reports whether b grows a: equal scalars, a string prefix,
// arrays and objects that keep every member (growing the members).
func extends(a, b any) bool {
	switch a := a.(type) {
	case string:
		s, ok := b.(string)
		return ok && strings.HasPrefix(s, a)
	case []any:
		l, ok := b.([]any)
		if !ok || len(l) < len(a) {
			return false
		}
		for i := range a {
			if !extends(a[i], l[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		m, ok := b.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range a {
			w, ok := m[k]
			if !ok || !extends(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}

func TestRecordedStreamsEveryPrefix(t *testing.T) {
	t.Parallel()
	for _, r := range loadRecorded(t) {
		checkPrefixes(t, r.Source, strings.Join(r.Fragments, ""))
	}
}

func TestTrickyEveryPrefix(t *testing.T) {
	t.Parallel()
	for _, text := range tricky {
		checkPrefixes(t, text, text)
	}
}

// TestWriteFragments feeds the recorded fragments one Write at a time, as
// a stream does, and checks each value against parsing the whole prefix.
func TestWriteFragments(t *testing.T) {
	t.Parallel()
	for _, r := range loadRecorded(t) {
		var p partialjson.Parser
		var sofar string
		for _, f := range r.Fragments {
			if _, err := p.Write([]byte(f)); err != nil {
				t.Fatalf("%s: %v", r.Source, err)
			}
			sofar += f
			want, _ := partialjson.Parse([]byte(sofar))
			if got := p.Value(); !bytes.Equal(got, want) {
				t.Fatalf("%s: incremental %s, whole %s", r.Source, got, want)
			}
		}
		if !p.Done() {
			t.Fatalf("%s: not done after the last fragment", r.Source)
		}
	}
}

func TestShownWhenComplete(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ prefix, want string }{
		{``, ``},
		{`{`, `{}`},
		{`{"out`, `{}`},
		{`{"output"`, `{}`},
		{`{"output":`, `{}`},
		{`{"output":1`, `{}`},
		{`{"output":12 `, `{"output":12}`},
		{`{"output":-`, `{}`},
		{`{"output":tr`, `{}`},
		{`{"output":true`, `{"output":true}`},
		{`{"output":"ab`, `{"output":"ab"}`},
		{`{"output":"a\`, `{"output":"a"}`},
		{`{"output":"a\u00`, `{"output":"a"}`},
		{`{"output":"a\ud83d`, `{"output":"a"}`},
		{`{"output":"a\ud83d\ude00`, `{"output":"a\ud83d\ude00"}`},
		{"{\"output\":\"a\xf0\x9f", `{"output":"a"}`},
		{`{"output":[1,`, `{"output":[1]}`},
		{`{"output":[1,{"k":[`, `{"output":[1,{"k":[]}]}`},
		{`{"a":{"b":"c"},`, `{"a":{"b":"c"}}`},
	} {
		got, err := partialjson.Parse([]byte(c.prefix))
		if err != nil || string(got) != c.want {
			t.Errorf("Parse(%q) = %s, %v; want %s", c.prefix, got, err, c.want)
		}
	}
}

func TestSyntaxErrors(t *testing.T) {
	t.Parallel()
	for _, text := range []string{`}`, `{"a" 1}`, `{"a":1,}`, `[1,]`, `{"a":01}`, `{"a":trux}`, "\"a\x01\"", `{"a":"\x"}`, `[1]]`, `{"a":1} x`, `{,}`, `[1 2]`} {
		var p partialjson.Parser
		if _, err := p.Write([]byte(text)); err == nil {
			t.Errorf("%q: no error", text)
		}
		if _, err := p.Write([]byte(`1`)); err == nil {
			t.Errorf("%q: a write after the error was accepted", text)
		}
	}
}

func TestMember(t *testing.T) {
	t.Parallel()
	var p partialjson.Parser
	_, _ = p.Write([]byte(`{"output":{"a":[1,"x`))
	v, ok := p.Member("output")
	if !ok || string(v) != `{"a":[1,"x"]}` {
		t.Fatalf("Member = %s, %v", v, ok)
	}
	if _, ok := p.Member("other"); ok {
		t.Fatal("a member that is not there")
	}
}

// FuzzParse checks, for any text, that every value shown is valid JSON and
// extends the one before; for a valid JSON text, that the last equals it.
func FuzzParse(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
	}
	for _, r := range loadRecorded(f) {
		f.Add(strings.Join(r.Fragments, ""))
	}
	f.Fuzz(func(t *testing.T, text string) {
		var p partialjson.Parser
		var prev any
		for i := 0; i < len(text); i++ {
			if _, err := p.Write([]byte{text[i]}); err != nil {
				break
			}
			v := p.Value()
			if v == nil {
				continue
			}
			if !json.Valid(v) {
				t.Fatalf("prefix %d of %q: invalid %s", i+1, text, v)
			}
			cur := decode(t, v)
			if prev != nil && !extends(prev, cur) {
				t.Fatalf("prefix %d of %q: %s does not extend %v", i+1, text, v, prev)
			}
			prev = cur
		}
		if json.Valid([]byte(text)) && utf8.ValidString(text) && p.Err() == nil {
			// A top-level number ends only at what follows it.
			if _, err := p.Write([]byte(" ")); err != nil {
				t.Fatalf("%q: %v", text, err)
			}
			if got := p.Value(); !reflect.DeepEqual(decode(t, got), decode(t, []byte(text))) {
				t.Fatalf("%q: final %s", text, got)
			}
		}
	})
}

func BenchmarkWrite(b *testing.B) {
	rs := loadRecorded(b)
	var text []byte
	for _, r := range rs {
		text = append(text, strings.Join(r.Fragments, "")...)
	}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		var p partialjson.Parser
		for _, r := range rs {
			p = partialjson.Parser{}
			for _, f := range r.Fragments {
				_, _ = p.Write([]byte(f))
			}
			_ = p.Value()
		}
	}
}
