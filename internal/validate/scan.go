package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits bound a raw JSON document before anything else looks at it.
type Limits struct {
	MaxBytes     int
	MaxDepth     int
	MaxNodes     int
	MaxKeyBytes  int
	MaxNumberLen int
}

// SchemaLimits apply to caller schemas.
var SchemaLimits = Limits{MaxBytes: 64 << 10, MaxDepth: 64, MaxNodes: 8192, MaxKeyBytes: 256, MaxNumberLen: 64}

// ValueLimits apply to values submitted by models.
var ValueLimits = Limits{MaxBytes: 256 << 10, MaxDepth: 32, MaxNodes: 16384, MaxKeyBytes: 256, MaxNumberLen: 64}

// ScanError locates a problem in a raw document. Pointer is a JSON Pointer.
type ScanError struct {
	Pointer string
	Detail  string
}

func (e *ScanError) Error() string {
	if e.Pointer == "" {
		return e.Detail
	}
	return e.Pointer + ": " + e.Detail
}

// Decode strictly parses raw into map[string]any / []any / json.Number /
// string / bool / nil: no duplicate keys, no trailing data, valid UTF-8, no
// lone surrogate escapes, no U+0000, finite short numbers, within lim.
func Decode(raw []byte, lim Limits) (any, error) {
	if len(raw) > lim.MaxBytes {
		return nil, &ScanError{Detail: fmt.Sprintf("document is %d bytes, more than the limit of %d", len(raw), lim.MaxBytes)}
	}
	if !utf8.Valid(raw) {
		return nil, &ScanError{Detail: "document is not valid UTF-8"}
	}
	if err := checkSurrogates(raw); err != nil {
		return nil, err
	}
	d := &decoder{dec: json.NewDecoder(bytes.NewReader(raw)), lim: lim}
	d.dec.UseNumber()
	v, err := d.value("", 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &ScanError{Detail: "unexpected data after the JSON value"}
	}
	return v, nil
}

type decoder struct {
	dec   *json.Decoder
	lim   Limits
	nodes int
}

func (d *decoder) value(ptr string, depth int) (any, error) {
	if depth > d.lim.MaxDepth {
		return nil, &ScanError{Pointer: ptr, Detail: fmt.Sprintf("nested deeper than %d levels", d.lim.MaxDepth)}
	}
	d.nodes++
	if d.nodes > d.lim.MaxNodes {
		return nil, &ScanError{Pointer: ptr, Detail: fmt.Sprintf("more than %d JSON values", d.lim.MaxNodes)}
	}
	tok, err := d.dec.Token()
	if err != nil {
		return nil, &ScanError{Pointer: ptr, Detail: "invalid JSON: " + err.Error()}
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := map[string]any{}
			for d.dec.More() {
				kt, err := d.dec.Token()
				if err != nil {
					return nil, &ScanError{Pointer: ptr, Detail: "invalid JSON: " + err.Error()}
				}
				key := kt.(string)
				kp := ptr + "/" + escapePointer(key)
				if len(key) > d.lim.MaxKeyBytes {
					return nil, &ScanError{Pointer: ptr, Detail: fmt.Sprintf("object key longer than %d bytes", d.lim.MaxKeyBytes)}
				}
				if strings.IndexByte(key, 0) >= 0 {
					return nil, &ScanError{Pointer: ptr, Detail: "object key contains U+0000"}
				}
				if _, dup := obj[key]; dup {
					return nil, &ScanError{Pointer: kp, Detail: fmt.Sprintf("duplicate object key %q", key)}
				}
				v, err := d.value(kp, depth+1)
				if err != nil {
					return nil, err
				}
				obj[key] = v
			}
			if _, err := d.dec.Token(); err != nil {
				return nil, &ScanError{Pointer: ptr, Detail: "invalid JSON: " + err.Error()}
			}
			return obj, nil
		case '[':
			arr := []any{}
			for i := 0; d.dec.More(); i++ {
				v, err := d.value(ptr+"/"+strconv.Itoa(i), depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := d.dec.Token(); err != nil {
				return nil, &ScanError{Pointer: ptr, Detail: "invalid JSON: " + err.Error()}
			}
			return arr, nil
		}
		return nil, &ScanError{Pointer: ptr, Detail: "invalid JSON"}
	case string:
		if strings.IndexByte(t, 0) >= 0 {
			return nil, &ScanError{Pointer: ptr, Detail: "string contains U+0000, which PostgreSQL jsonb cannot store"}
		}
		return t, nil
	case json.Number:
		if len(t) > d.lim.MaxNumberLen {
			return nil, &ScanError{Pointer: ptr, Detail: fmt.Sprintf("number literal longer than %d characters", d.lim.MaxNumberLen)}
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, &ScanError{Pointer: ptr, Detail: "number is not finite as a 64-bit float"}
		}
		return t, nil
	default: // bool, nil
		return t, nil
	}
}

// checkSurrogates rejects \uD800-\uDFFF escapes that are not a valid pair;
// encoding/json would silently turn them into U+FFFD.
func checkSurrogates(raw []byte) error {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 < len(raw) && raw[i+1] == 'u' && i+5 < len(raw) {
				r, ok := hex4(raw[i+2 : i+6])
				if ok && r >= 0xD800 && r <= 0xDFFF {
					if r >= 0xDC00 {
						return &ScanError{Detail: "string contains an unpaired surrogate escape"}
					}
					if i+11 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
						lo, ok := hex4(raw[i+8 : i+12])
						if ok && lo >= 0xDC00 && lo <= 0xDFFF {
							i += 11
							continue
						}
					}
					return &ScanError{Detail: "string contains an unpaired surrogate escape"}
				}
				i += 5
				continue
			}
			i++ // skip the escaped character
		}
	}
	return nil
}

func hex4(b []byte) (rune, bool) {
	n, err := strconv.ParseUint(string(b), 16, 16)
	return rune(n), err == nil
}

func escapePointer(s string) string {
	s = strings.ReplaceAll(s, "~", "~0")
	return strings.ReplaceAll(s, "/", "~1")
}
