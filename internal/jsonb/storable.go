package jsonb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Bounds of Storable. The number rules are the validator's for structured
// values (internal/validate: MaxNumberLen, MaxExponent), so a tool call's
// arguments and a finalizer's are screened alike.
const (
	MaxRawDepth     = 64  // arrays and objects nested inside one another
	MaxNumberLen    = 64  // characters of one number literal
	MaxNumberExp    = 308 // the decimal exponent written in a literal, ±
	storableMaxKeys = 1 << 16
)

// Storable checks that raw JSON (tool arguments from a model, a tool result
// from a client) can be stored as jsonb exactly and cheaply, before anything
// is written: one value, no trailing data, no duplicate object keys (jsonb
// keeps the last, so the stored call would not be the one the model made),
// no number literal longer than MaxNumberLen, with an exponent beyond
// ±MaxNumberExp or not finite as a 64-bit float (jsonb refuses numbers out
// of numeric's range with SQLSTATE 22003, the step could never commit, and
// 1e100000 would be stored as 100001 digits), and no nesting deeper than
// MaxRawDepth (PostgreSQL's parser recurses). Strings are the codec's
// business: U+0000, lone surrogates and invalid UTF-8 are encoded by
// MarshalParts, not refused here. The error says what is wrong and where,
// without quoting more than the offending literal's first characters.
func Storable(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type frame struct {
		object  bool
		wantKey bool
		keys    map[string]struct{}
	}
	var stack []frame
	var path []string
	where := func() string {
		if len(path) == 0 {
			return "at the top level"
		}
		return "at /" + strings.Join(path, "/")
	}
	// value notes that a value (not a key) was read in the current container.
	value := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
			path = path[:len(path)-1]
		} else if n > 0 {
			i, _ := strconv.Atoi(path[len(path)-1])
			path[len(path)-1] = strconv.Itoa(i + 1)
		}
	}
	done := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			switch {
			case len(stack) > 0:
				return errors.New("not valid JSON: unexpected end of input")
			case !done:
				return errors.New("no JSON value")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
		if done {
			return errors.New("data after the JSON value")
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if len(stack) >= MaxRawDepth {
					return fmt.Errorf("nested deeper than %d levels %s", MaxRawDepth, where())
				}
				stack = append(stack, frame{object: v == '{', wantKey: v == '{'})
				if v == '[' {
					path = append(path, "0")
				}
				continue
			default:
				if !stack[len(stack)-1].object {
					path = path[:len(path)-1]
				}
				stack = stack[:len(stack)-1]
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].wantKey {
				f := &stack[n-1]
				if f.keys == nil {
					f.keys = map[string]struct{}{}
				}
				if _, dup := f.keys[v]; dup {
					return fmt.Errorf("duplicate key %s %s", quote(v), where())
				}
				if len(f.keys) >= storableMaxKeys {
					return fmt.Errorf("more than %d keys in one object %s", storableMaxKeys, where())
				}
				f.keys[v] = struct{}{}
				f.wantKey = false
				path = append(path, escapePointer(v))
				continue
			}
		case json.Number:
			if err := storableNumber(string(v)); err != nil {
				return fmt.Errorf("%v %s", err, where())
			}
		}
		if len(stack) == 0 {
			done = true
			continue
		}
		value()
	}
}

// storableNumber applies the number rules to one literal (already valid
// JSON number syntax).
func storableNumber(lit string) error {
	short := lit
	if len(short) > 24 {
		short = short[:24] + "…"
	}
	if len(lit) > MaxNumberLen {
		return fmt.Errorf("number %s is longer than %d characters", short, MaxNumberLen)
	}
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(lit[i+1:], "+"))
		if err != nil || e > MaxNumberExp || e < -MaxNumberExp {
			return fmt.Errorf("number %s has an exponent beyond ±%d", short, MaxNumberExp)
		}
	}
	if f, err := strconv.ParseFloat(lit, 64); err != nil || math.IsInf(f, 0) {
		return fmt.Errorf("number %s is out of range", short)
	}
	return nil
}

func quote(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strconv.Quote(s)
}

func escapePointer(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
