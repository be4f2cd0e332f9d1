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
// values (internal/validate: MaxNumberLen, MaxZeroExponent), so a tool
// call's arguments and a finalizer's are screened alike
// (TestStorableNumbersAsValidator).
const (
	MaxRawDepth     = 64   // arrays and objects nested inside one another
	MaxNumberLen    = 400  // characters of one number literal, as written and in plain decimal notation
	MaxZeroExp      = 1000 // the exponent written in a zero, ±
	storableMaxKeys = 1 << 16
)

// Storable checks, before anything is written, that raw JSON (a model's
// tool arguments, a client's tool result) is one value jsonb stores exactly
// and cheaply: jsonb keeps only the last of duplicate keys and refuses or
// bloats some numbers, so the stored call would not be the one made or its
// step could never commit. The bounds are the constants above; strings are
// MarshalParts' business.
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
	mant, expPart, _ := strings.Cut(strings.Replace(strings.TrimPrefix(lit, "-"), "E", "e", 1), "e")
	exp := 0
	if expPart != "" {
		e, err := strconv.Atoi(strings.TrimPrefix(expPart, "+"))
		if err != nil { // beyond an int: out of range, or (for zero) too long
			e = 1 << 30
			if strings.HasPrefix(expPart, "-") {
				e = -e
			}
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	all := intPart + frac
	zero := strings.Trim(all, "0") == ""
	if zero && (exp > MaxZeroExp || exp < -MaxZeroExp) {
		return fmt.Errorf("number %s has an exponent beyond ±%d", short, MaxZeroExp)
	}
	if !zero {
		f, _ := strconv.ParseFloat(lit, 64)
		switch {
		case math.IsInf(f, 0):
			return fmt.Errorf("number %s is beyond the range of a 64-bit float", short)
		case f == 0:
			return fmt.Errorf("number %s is too close to zero for a 64-bit float", short)
		}
	}
	// jsonb's plain notation: the integer digits (at least "0"), a sign,
	// and as many fraction digits as written less the exponent
	plain := 1
	if !zero {
		leading := len(all) - len(strings.TrimLeft(all, "0"))
		plain = max(1, len(intPart)+exp-leading)
		if lit[0] == '-' {
			plain++
		}
	}
	if scale := len(frac) - exp; scale > 0 {
		plain += 1 + scale
	}
	if plain > MaxNumberLen {
		return fmt.Errorf("number %s is %d characters in plain decimal notation, more than %d", short, plain, MaxNumberLen)
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
