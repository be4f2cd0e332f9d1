package jsonb

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestFieldTableWellFormed(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, f := range fields {
		if seen[f.name] {
			t.Errorf("field %s appears twice in the field table", f.name)
		}
		seen[f.name] = true
		accessors := 0
		if f.str != nil {
			accessors++
		}
		if f.raw != nil {
			accessors++
		}
		switch {
		case f.policy == safe && accessors != 0:
			t.Errorf("safe field %s has an accessor", f.name)
		case f.policy != safe && accessors != 1:
			t.Errorf("%s field %s has %d accessors, want 1", f.policy, f.name, accessors)
		}
	}
}

func TestStringCodec(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, enc string }{
		{"", ""},
		{"plain", "plain"},
		{"\x00", "\ue000\ue001"},
		{"\ue000", "\ue000\ue000"},
		{"\ue001", "\ue001"},
		{"\ue000\ue001", "\ue000\ue000\ue001"}, // natural text that looks like an encoded NUL
		{"a\x00b\x00", "a\ue000\ue001b\ue000\ue001"},
		{"\x00\ue000\x00", "\ue000\ue001\ue000\ue000\ue000\ue001"},
		{"\xff\x00\xfe", "\xff\ue000\ue001\xfe"}, // invalid UTF-8 is left to encoding/json
	}
	for _, c := range cases {
		got := encodeString(c.in)
		if got != c.enc {
			t.Errorf("encodeString(%+q) = %+q, want %+q", c.in, got, c.enc)
		}
		if strings.IndexByte(got, 0) >= 0 {
			t.Errorf("encodeString(%+q) still has NUL", c.in)
		}
		if back := decodeString(got); back != c.in {
			t.Errorf("decodeString(encodeString(%+q)) = %+q", c.in, back)
		}
	}
	// Decoding keeps an unpaired sentinel.
	for in, want := range map[string]string{
		"\ue000":             "\ue000",
		"x\ue000y":           "x\ue000y",
		"\ue000\ue000\ue000": "\ue000\ue000",
		"\ue001\ue000":       "\ue001\ue000",
	} {
		if got := decodeString(in); got != want {
			t.Errorf("decodeString(%+q) = %+q, want %+q", in, got, want)
		}
	}
}

func TestScanRaw(t *testing.T) {
	t.Parallel()
	cases := []struct {
		raw  string
		want rawFlags
	}{
		{`{"a":"b","n":[1,2.5,null,true]}`, 0},
		{`"caf\u00e9 \n \" \\ \/"`, 0},
		{`"\u0000"`, rawNUL},
		{`{"k\u0000":1}`, rawNUL},
		{`"\\u0000"`, 0},            // escaped backslash, then text
		{`"\\\u0000"`, rawNUL},      // escaped backslash, then an escape
		{`"\\\\u0000"`, 0},          // two escaped backslashes, then text
		{`["\\","u0000"]`, 0},       // a string ending in a backslash
		{`"a\"\u0000"`, rawNUL},     // an escaped quote does not end the string
		{`"\ue000"`, rawSentinel},   // escaped sentinel
		{`"\uE000"`, rawSentinel},   // upper-case hex
		{"\"\ue000\"", rawSentinel}, // literal sentinel
		{`"\ue001"`, 0},
		{"\"\ue001\"", 0},
		{`"\ud800"`, rawLoneSurrogate},
		{`"\udc00"`, rawLoneSurrogate},
		{`"\ud800x"`, rawLoneSurrogate},
		{`"\ud800\u0041"`, rawLoneSurrogate},
		{`"\ud83d\ude00"`, 0},                      // a valid pair
		{`"\uD83D\uDE00"`, 0},                      // upper case
		{`"\ud83d\ud83d\ude00"`, rawLoneSurrogate}, // high, then a valid pair
		{`"\ude00\ud83d"`, rawLoneSurrogate},       // reversed pair
		{`"\\ud800"`, 0},                           // literal text
		{`"\ud800`, rawLoneSurrogate},              // truncated (invalid JSON anyway)
		{`"\u00`, 0},                               // malformed: left to the parser
		{"\"\xff\"", rawBadUTF8},
		{"\"\xed\xa0\x80\"", rawBadUTF8}, // a UTF-8-encoded surrogate
		{`{"\u0000":"\ue000","x":"\udfff"}`, rawNUL | rawSentinel | rawLoneSurrogate},
	}
	for _, c := range cases {
		in := []byte(c.raw)
		before := bytes.Clone(in)
		if got := scanRaw(in); got != c.want {
			t.Errorf("scanRaw(%s) = %04b, want %04b", c.raw, got, c.want)
		}
		if !bytes.Equal(in, before) {
			t.Errorf("scanRaw(%s) modified its input", c.raw)
		}
	}
}

// semantic decodes raw JSON with numbers kept as text.
func semantic(t *testing.T, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
}

func TestRawJSONRoundTrip(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		want     any // the value ParseContent returns, decoded
		stored   any // the value MarshalParts stores, decoded
	}{
		{
			name:   "NUL in key and value",
			in:     `{"a\u0000b":"c\u0000d"}`,
			want:   map[string]any{"a\x00b": "c\x00d"},
			stored: map[string]any{"a\ue000\ue001b": "c\ue000\ue001d"},
		},
		{
			name:   "natural sentinels",
			in:     "{\"\ue000\ue001\":[\"\\ue000\",\"x\ue001\"]}",
			want:   map[string]any{"\ue000\ue001": []any{"\ue000", "x\ue001"}},
			stored: map[string]any{"\ue000\ue000\ue001": []any{"\ue000\ue000", "x\ue001"}},
		},
		{
			name:   "lone surrogates become U+FFFD",
			in:     `{"q":"\ud800x","r":"\udc00","s":"\ud800\ud83d\ude00"}`,
			want:   map[string]any{"q": "\ufffdx", "r": "\ufffd", "s": "\ufffd😀"},
			stored: map[string]any{"q": "\ufffdx", "r": "\ufffd", "s": "\ufffd😀"},
		},
		{
			name:   "escaped backslashes stay literal text beside a real NUL",
			in:     `["\\u0000","\\ud800","\u0000"]`,
			want:   []any{`\u0000`, `\ud800`, "\x00"},
			stored: []any{`\u0000`, `\ud800`, "\ue000\ue001"},
		},
		{
			name:   "numbers keep their text",
			in:     `{"n":12345678901234567890.000000000001,"e":1E+400,"z":-0,"s":"\u0000"}`,
			want:   map[string]any{"n": json.Number("12345678901234567890.000000000001"), "e": json.Number("1E+400"), "z": json.Number("-0"), "s": "\x00"},
			stored: map[string]any{"n": json.Number("12345678901234567890.000000000001"), "e": json.Number("1E+400"), "z": json.Number("-0"), "s": "\ue000\ue001"},
		},
		{
			name:   "invalid UTF-8 becomes U+FFFD",
			in:     "{\"k\":\"a\xffb\"}",
			want:   map[string]any{"k": "a\ufffdb"},
			stored: map[string]any{"k": "a\ufffdb"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, set := range []func(*Part, json.RawMessage){
				func(p *Part, r json.RawMessage) { p.Args = r },
				func(p *Part, r json.RawMessage) { p.Result = r },
				func(p *Part, r json.RawMessage) { p.ProviderMetadata = r },
			} {
				var p Part
				in := json.RawMessage(c.in)
				set(&p, in)
				out, err := MarshalParts([]Part{p})
				if err != nil {
					t.Fatal(err)
				}
				if scanRaw(out)&rawUnstorable != 0 {
					t.Fatalf("stored form %s is not storable", out)
				}
				if string(in) != c.in {
					t.Fatalf("input modified: %s", in)
				}
				var stored []map[string]json.RawMessage
				if err := json.Unmarshal(out, &stored); err != nil {
					t.Fatal(err)
				}
				for _, v := range stored[0] {
					if v[0] == '"' {
						continue // the type
					}
					if got := semantic(t, v); !reflect.DeepEqual(got, c.stored) {
						t.Errorf("stored %#v, want %#v", got, c.stored)
					}
				}
				parts, err := ParseContent(out)
				if err != nil {
					t.Fatal(err)
				}
				raw := parts[0].Args
				if raw == nil {
					raw = parts[0].Result
				}
				if raw == nil {
					raw = parts[0].ProviderMetadata
				}
				if got := semantic(t, raw); !reflect.DeepEqual(got, c.want) {
					t.Errorf("parsed %#v, want %#v", got, c.want)
				}
			}
		})
	}
}

func TestCleanRawJSONUnchanged(t *testing.T) {
	t.Parallel()
	// Compact, clean documents (including escapes that need nothing, valid
	// pairs and literal \\u0000 text) are stored byte for byte.
	for _, raw := range []string{
		`{"z":1,"a":[true,null,1.0e10],"s":"tab\there \"q\" \\u0000 \\ud800"}`,
		`{"emoji":"\ud83d\ude00","e":"é","d":"\u00e9"}`,
		`[]`,
		`"x"`,
	} {
		out, err := MarshalParts([]Part{{Type: PartToolCall, Args: json.RawMessage(raw)}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(out, []byte(`"args":`+raw)) {
			t.Errorf("clean args %s were rewritten: %s", raw, out)
		}
		parts, err := ParseContent(out)
		if err != nil {
			t.Fatal(err)
		}
		if string(parts[0].Args) != raw {
			t.Errorf("clean args %s parsed as %s", raw, parts[0].Args)
		}
	}
}

// allFieldsPart has every encode field set to text needing the codec and
// every raw field to JSON needing it.
func allFieldsPart() []Part {
	const s = "x\x00y\ue000z"
	raw := func() json.RawMessage { return json.RawMessage(`{"k\u0000":["v\u0000","\ud800"]}`) }
	return []Part{
		{Type: PartToolCall + "\x00", Text: s, ToolCallID: s, ToolName: s, Args: raw(), Result: raw(),
			IsError: true, MediaType: s, Name: s, Data: []byte{0, 1, 2}, SourceID: s, URL: s, Title: s,
			ProviderMetadata: raw(), ArgsRejected: s, ArgsRejectedCode: s,
			Outcome: &Outcome{RequestID: s, Status: s, Value: json.RawMessage(`{"v":"\ue000\ue001"}`),
				Error: &OutcomeError{Code: s, Message: s}}},
		{Type: PartText, Text: "clean"},
		{Type: PartOutcome, Outcome: &Outcome{Status: "failed", Error: &OutcomeError{Message: "m\x00"}}},
	}
}

func TestMarshalPartsDoesNotMutate(t *testing.T) {
	t.Parallel()
	in := allFieldsPart()
	outcome, outErr := in[0].Outcome, in[0].Outcome.Error
	args := in[0].Args
	out, err := MarshalParts(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, allFieldsPart()) {
		t.Fatalf("MarshalParts changed its input:\n%#v", in)
	}
	if in[0].Outcome != outcome || in[0].Outcome.Error != outErr || &in[0].Args[0] != &args[0] {
		t.Fatal("MarshalParts replaced the caller's pointers or slices")
	}
	if scanRaw(out)&rawUnstorable != 0 {
		t.Fatalf("stored form is not storable: %s", out)
	}
	got, err := ParseContent(out)
	if err != nil {
		t.Fatal(err)
	}
	want := allFieldsPart()
	for i := range want {
		for _, pair := range [][2]*json.RawMessage{
			{&got[i].Args, &want[i].Args}, {&got[i].Result, &want[i].Result}, {&got[i].ProviderMetadata, &want[i].ProviderMetadata},
		} {
			g, w := pair[0], pair[1]
			if len(*w) > 0 && !reflect.DeepEqual(semantic(t, *g), semantic(t, normalised(*w))) {
				t.Errorf("part %d: raw field %s, want the meaning of %s", i, *g, *w)
			}
			*g, *w = nil, nil
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %#v\nwant %#v", got, want)
	}
}

// normalised is what a raw document means once lone surrogates are gone.
func normalised(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return r
	}
	var v any
	if err := json.Unmarshal(r, &v); err != nil {
		panic(err)
	}
	b, _ := json.Marshal(v)
	return b
}

func TestRejectFieldStoredExactly(t *testing.T) {
	t.Parallel()
	receipt := func(v string) []Part {
		return []Part{{Type: PartOutcome, Outcome: &Outcome{RequestID: "r", Status: "succeeded", Value: json.RawMessage(v)}}}
	}
	for _, bad := range []string{`{"a":"\u0000"}`, `{"\u0000":1}`, `["\ud800"]`, `"\udc00"`, "\"\xff\""} {
		if _, err := MarshalParts(receipt(bad)); err == nil || !strings.Contains(err.Error(), "Outcome.Value") {
			t.Errorf("value %q: error %v, want a rejection naming Outcome.Value", bad, err)
		}
	}
	// U+E000 and U+E001 are ordinary characters in a value: never encoded.
	for _, good := range []string{"{\"k\ue000\":\"\ue000\ue001\"}", `["\ue000\ue001","\\u0000"]`} {
		out, err := MarshalParts(receipt(good))
		if err != nil {
			t.Fatalf("value %q: %v", good, err)
		}
		if !bytes.Contains(out, []byte(`"value":`+good)) {
			t.Errorf("value %q was transformed: %s", good, out)
		}
		parts, err := ParseContent(out)
		if err != nil {
			t.Fatal(err)
		}
		if string(parts[0].Outcome.Value) != good {
			t.Errorf("value %q parsed as %q", good, parts[0].Outcome.Value)
		}
	}
}

func TestMarshalPartsErrors(t *testing.T) {
	t.Parallel()
	_, err := MarshalParts([]Part{{Type: PartToolCall, Args: json.RawMessage(`{"a":"\u0000"} x`)}})
	if err == nil || !strings.Contains(err.Error(), "part 0 Args") {
		t.Errorf("trailing data: %v", err)
	}
	_, err = MarshalParts([]Part{{Type: PartToolCall, Args: json.RawMessage(`{"a":`)}})
	if err == nil {
		t.Error("invalid JSON was accepted")
	}
	out, err := MarshalParts(nil)
	if err != nil || string(out) != "[]" {
		t.Errorf("MarshalParts(nil) = %s, %v", out, err)
	}
}

// cleanParts is a typical history row set with nothing to encode.
func cleanParts() []Part {
	return []Part{
		{Type: PartReasoning, Text: strings.Repeat("Let me think about the request. ", 8),
			ProviderMetadata: json.RawMessage(`{"openai":{"itemId":"rs_0123456789abcdef","reasoningEncryptedContent":"gAAAAABoZ0123456789abcdefghijklmnopqrstuvwxyz"}}`)},
		{Type: PartText, Text: strings.Repeat("Here is the answer, with \"quotes\", tabs\tand newlines\n. ", 6)},
		{Type: PartToolCall, ToolCallID: "call_abc123", ToolName: "run_command",
			Args: json.RawMessage(`{"command":"go test ./...","cwd":"/work/repo","env":{"GOFLAGS":"-count=1"},"timeout_ms":120000,"note":"line\nbreak \"quoted\""}`)},
		{Type: PartToolResult, ToolCallID: "call_abc123", ToolName: "run_command",
			Result: json.RawMessage(`{"exit_code":0,"stdout":"ok  \tgithub.com/chatd/chatd/internal/jsonb\t0.123s\nPASS\n","stderr":""}`)},
		{Type: PartSource, SourceID: "src-1", URL: "https://example.com/docs", Title: "Docs"},
	}
}

func TestFastPathAllocatesNothingExtra(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not stable under the race detector")
	}
	parts := cleanParts()
	base := testing.AllocsPerRun(100, func() { _, _ = json.Marshal(parts) })
	ours := testing.AllocsPerRun(100, func() { _, _ = MarshalParts(parts) })
	if ours > base {
		t.Errorf("MarshalParts of clean parts: %.0f allocs, json.Marshal: %.0f", ours, base)
	}
	out, err := MarshalParts(parts)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.Marshal(parts)
	if !bytes.Equal(out, plain) {
		t.Errorf("clean parts are not stored as json.Marshal stores them")
	}
}

// docs/codec.md's field table lists every row of the field table with its
// policy, and nothing else: the page is how people learn which fields are
// encoded, so it must not drift from the code.
func TestCodecDocFieldTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/codec.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Za-z.]+)` \\| [^|]+ \\| \\**(safe|encode|reject)\\b")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = m[2]
	}
	for _, f := range fields {
		if got, ok := documented[f.name]; !ok {
			t.Errorf("docs/codec.md's field table has no row for %s (%s)", f.name, f.policy)
		} else if got != f.policy.String() {
			t.Errorf("docs/codec.md says %s is %s; codec.go says %s", f.name, got, f.policy)
		}
		delete(documented, f.name)
	}
	for name := range documented {
		t.Errorf("docs/codec.md's field table lists %s, which codec.go does not have", name)
	}
}
