package jsonb

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/chatd/chatd/internal/validate"
)

// Hard cases for both fuzz targets.
var fuzzRawSeeds = []string{
	`{"a\u0000b":"c\u0000d"}`,
	`{"q":"\ud800x"}`,
	`"\udc00"`,
	`"\ud83d\ude00"`,
	`"\ud83d\ud83d\ude00"`,
	`"\\u0000"`,
	`"\\\u0000"`,
	`["\\","u0000"]`,
	`"a\"\u0000"`,
	`"\ue000\ue001"`,
	"\"\ue000\ue001\"",
	`{"\uE000":"\ue000\ue000"}`,
	"\"\xff\"",
	"\"\xed\xa0\x80\"",
	`{"n":12345678901234567890.5,"e":1e400,"z":-0}`,
	`{"a":"\u0000","a":"x"}`,
	`[]`,
	`null`,
}

func FuzzScanRaw(f *testing.F) {
	for _, s := range fuzzRawSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		before := bytes.Clone(raw)
		got := scanRaw(raw)
		if !bytes.Equal(raw, before) {
			t.Fatal("scanRaw modified its input")
		}
		if !json.Valid(raw) {
			return // no contract beyond not panicking
		}
		if want := referenceScan(t, raw); got != want {
			t.Fatalf("scanRaw(%q) = %04b, reference %04b", raw, got, want)
		}
	})
}

// referenceScan computes scanRaw's answer for valid JSON another way: NUL
// and U+E000 from encoding/json's decoded string tokens (keys included,
// duplicates kept), lone surrogates from UTF-16 code units of every string
// literal found by a regular expression, invalid UTF-8 from utf8.Valid.
func referenceScan(t *testing.T, raw []byte) rawFlags {
	var f rawFlags
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("token stream of valid JSON %q: %v", raw, err)
		}
		if s, ok := tok.(string); ok {
			if strings.IndexByte(s, 0) >= 0 {
				f |= rawNUL
			}
			if strings.Contains(s, "\ue000") {
				f |= rawSentinel
			}
		}
	}
	for _, lit := range stringLiteral.FindAll(raw, -1) {
		if hasLoneSurrogate(codeUnits(lit[1 : len(lit)-1])) {
			f |= rawLoneSurrogate
		}
	}
	if !utf8.Valid(raw) {
		f |= rawBadUTF8
	}
	return f
}

// stringLiteral matches the string literals of valid JSON (outside them
// there are no quotes).
var stringLiteral = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// codeUnits decodes the inside of a JSON string literal to UTF-16 code
// units without pairing surrogate escapes.
func codeUnits(b []byte) []uint16 {
	var out []uint16
	for len(b) > 0 {
		if b[0] == '\\' {
			if b[1] == 'u' {
				n, _ := strconv.ParseUint(string(b[2:6]), 16, 16)
				out = append(out, uint16(n))
				b = b[6:]
				continue
			}
			out = append(out, uint16(b[1])) // \" \\ \/ \b ... (value irrelevant here)
			b = b[2:]
			continue
		}
		r, size := utf8.DecodeRune(b)
		out = append(out, utf16.Encode([]rune{r})...)
		b = b[size:]
	}
	return out
}

func hasLoneSurrogate(u []uint16) bool {
	for i := 0; i < len(u); i++ {
		if !utf16.IsSurrogate(rune(u[i])) {
			continue
		}
		if i+1 < len(u) && utf16.DecodeRune(rune(u[i]), rune(u[i+1])) != utf8.RuneError {
			i++
			continue
		}
		return true
	}
	return false
}

func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"", "plain", "\x00", "\ue000", "\ue001", "\ue000\ue001", "\ue000\ue000", "a\x00\ue000\x00", "\xff\x00", "\\u0000"} {
		for _, raw := range fuzzRawSeeds {
			f.Add(s, []byte(raw), "k\x00")
		}
	}
	f.Fuzz(func(t *testing.T, s string, raw []byte, key string) {
		build := func() []Part {
			var args json.RawMessage
			if json.Valid(raw) {
				args = bytes.Clone(raw)
			}
			result, _ := json.Marshal(map[string]any{key: s, "list": []string{s, key}})
			meta, _ := json.Marshal(map[string]map[string]string{"google": {"signature": s}})
			return []Part{
				{Type: PartType(s), Text: s, ToolName: key, URL: s + key,
					Outcome: &Outcome{RequestID: s, Error: &OutcomeError{Message: s}}},
				{Type: PartToolCall, Args: args, Result: result, ProviderMetadata: meta},
			}
		}
		in := build()
		out, err := MarshalParts(in)
		if err != nil {
			t.Fatalf("MarshalParts: %v", err)
		}
		if !reflect.DeepEqual(in, build()) {
			t.Fatal("MarshalParts modified its input")
		}
		if !json.Valid(out) {
			t.Fatalf("MarshalParts wrote invalid JSON: %q", out)
		}
		if fl := scanRaw(out); fl&rawUnstorable != 0 {
			t.Fatalf("MarshalParts wrote what jsonb refuses (%04b): %q", fl, out)
		}
		back, err := ParseContent(out)
		if err != nil {
			t.Fatalf("ParseContent: %v", err)
		}
		want := build()
		// Strings come back as encoding/json itself round-trips them
		// (invalid UTF-8 becomes U+FFFD); raw JSON with the meaning
		// encoding/json gives it (lone surrogates become U+FFFD).
		std := func(s string) string {
			b, _ := json.Marshal(s)
			var out string
			_ = json.Unmarshal(b, &out)
			return out
		}
		p := back[0]
		if p.Type != PartType(std(s)) || p.Text != std(s) || p.ToolName != std(key) || p.URL != std(s+key) ||
			p.Outcome.RequestID != std(s) || p.Outcome.Error.Message != std(s) {
			t.Fatalf("strings did not round-trip: %#v, outcome %#v, error %#v", p, *p.Outcome, *p.Outcome.Error)
		}
		for i, pair := range [][2]json.RawMessage{{back[1].Args, want[1].Args}, {back[1].Result, want[1].Result}, {back[1].ProviderMetadata, want[1].ProviderMetadata}} {
			if len(pair[1]) == 0 {
				if len(pair[0]) != 0 {
					t.Fatalf("raw field %d appeared: %q", i, pair[0])
				}
				continue
			}
			if g, w := fuzzMeaning(t, pair[0]), fuzzMeaning(t, pair[1]); !reflect.DeepEqual(g, w) {
				t.Fatalf("raw field %d did not round-trip:\n got %q\nwant %q", i, pair[0], pair[1])
			}
		}
	})
}

func fuzzMeaning(t *testing.T, raw []byte) any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", raw, err)
	}
	return v
}

// FuzzStorable: Storable never panics, accepts only valid JSON, and what it
// accepts the codec can marshal.
func FuzzStorable(f *testing.F) {
	for _, s := range append(fuzzRawSeeds, `{"a":1,"a":2}`, `[1e309]`, `{"a":[{"b":1e-999999}]}`, `[[[[]]]]`, `{} x`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if Storable(raw) != nil {
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("accepted invalid JSON %q", raw)
		}
		if _, err := MarshalParts([]Part{{Type: PartToolCall, ToolCallID: "c", ToolName: "t", Args: raw}}); err != nil {
			t.Fatalf("accepted %q, the codec refused it: %v", raw, err)
		}
	})
}

// FuzzNumberRules: for a single number literal, Storable (tool arguments)
// and the validator's scan (structured values) give the same verdict, so a
// number is admitted or refused alike wherever a model writes it.
func FuzzNumberRules(f *testing.F) {
	for _, s := range []string{"0", "-0.0e-5", "123e65", "1.5e300", "1e400", "1e-400", "4.9406564584124654e-324",
		"2.4703282292062327e-324", "0e-398", "0e-399", "0e1001", "1.7976931348623157e308", "1.7976931348623159e308"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		if lit == "" || !(lit[0] == '-' || lit[0] >= '0' && lit[0] <= '9') || !json.Valid([]byte(lit)) {
			return
		}
		serr := Storable([]byte(lit))
		_, verr := validate.Decode([]byte(lit), validate.ValueLimits)
		if (serr == nil) != (verr == nil) {
			t.Fatalf("%q: Storable %v, validator %v", lit, serr, verr)
		}
	})
}
