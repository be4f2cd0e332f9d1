package jsonb

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"
)

// rawFlags says what scanRaw found in the strings (keys included) of a raw
// JSON document.
type rawFlags uint8

const (
	// rawNUL: a \u0000 escape, which jsonb refuses.
	rawNUL rawFlags = 1 << iota
	// rawSentinel: U+E000, escaped or literal, which the sentinel scheme
	// must double on write (and which marks encoded text on read).
	rawSentinel
	// rawLoneSurrogate: a \uD800-\uDFFF escape that is not half of a
	// high-low pair, which jsonb refuses.
	rawLoneSurrogate
	// rawBadUTF8: bytes that are not UTF-8, which PostgreSQL refuses.
	rawBadUTF8

	// rawNeedsEncoding: the document must take the slow path on write.
	rawNeedsEncoding = rawNUL | rawSentinel | rawLoneSurrogate | rawBadUTF8
	// rawUnstorable: the document cannot be stored as it is.
	rawUnstorable = rawNUL | rawLoneSurrogate | rawBadUTF8
)

// scanRaw is the read-only detector for raw JSON. It reports escaped NUL,
// escaped or literal U+E000, lone surrogate escapes and invalid UTF-8. It
// never modifies b and allocates nothing; a result of 0 means b may be
// stored as it is. It does not validate JSON syntax: encoding/json does that
// when the parts are marshalled.
//
// Escapes are read pairwise from left to right: a backslash occurs only
// inside a JSON string, and every escape, \ included, is consumed whole,
// so each backslash the scan stops at starts an escape and `\\u0000` (an
// escaped backslash, then the text u0000) is not a NUL. That is exactly
// the string-boundary-aware reading for every valid document (FuzzScanRaw
// checks it against a reference that finds the string literals), without
// visiting the bytes between escapes one by one.
func scanRaw(b []byte) rawFlags {
	var f rawFlags
	if !utf8.Valid(b) {
		f |= rawBadUTF8
	}
	if bytes.IndexByte(b, 0xEE) >= 0 && bytes.Contains(b, sentinelBytes) {
		f |= rawSentinel // literal; a literal U+E000 can only be inside a string
	}
	i := bytes.IndexByte(b, '\\')
	for i >= 0 {
		n := 2 // \" \\ \/ \b \f \n \r \t (or a malformed escape)
		if r, ok := escapedRune(b, i); ok {
			n = 6
			switch {
			case r == 0:
				f |= rawNUL
			case r == 0xE000:
				f |= rawSentinel
			case r >= 0xD800 && r < 0xDC00:
				// Half of a valid pair only when a low surrogate escape follows at once.
				if lo, ok := escapedRune(b, i+6); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					n = 12
				} else {
					f |= rawLoneSurrogate
				}
			case r >= 0xDC00 && r <= 0xDFFF:
				f |= rawLoneSurrogate
			}
		}
		if i += n; i >= len(b) {
			break
		}
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 {
			break
		}
		i += j
	}
	return f
}

var sentinelBytes = []byte(sentinel)

// escapedRune reads a \uXXXX escape at b[i:].
func escapedRune(b []byte, i int) (rune, bool) {
	if i+1 >= len(b) || b[i] != '\\' || b[i+1] != 'u' {
		return 0, false
	}
	return hex4(b, i+2)
}

// hex4 reads the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func describeUnstorable(f rawFlags) string {
	var why []string
	if f&rawNUL != 0 {
		why = append(why, "contains U+0000")
	}
	if f&rawLoneSurrogate != 0 {
		why = append(why, "contains a lone surrogate escape")
	}
	if f&rawBadUTF8 != 0 {
		why = append(why, "is not valid UTF-8")
	}
	return strings.Join(why, ", ") + " (a value that must be stored exactly cannot be)"
}

// errTrailingData reports raw JSON with more than one value.
var errTrailingData = errors.New("invalid JSON: data after the value")

// transformRaw is the slow path for raw JSON: decode (numbers kept as their
// literal text, lone surrogates and invalid UTF-8 becoming U+FFFD, valid
// surrogate pairs becoming their character), apply fn to every key and
// string value, and marshal again (compact, without HTML escaping). The
// input is not modified.
func transformRaw(raw []byte, fn func(string) string) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errTrailingData
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(walkStrings(v, fn)); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// walkStrings applies fn to every key and string of a decoded document.
// Objects are rebuilt, so that a renamed key is never visited twice.
func walkStrings(v any, fn func(string) string) any {
	switch t := v.(type) {
	case string:
		return fn(t)
	case []any:
		for i := range t {
			t[i] = walkStrings(t[i], fn)
		}
		return t
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[fn(k)] = walkStrings(e, fn)
		}
		return out
	}
	return v
}
