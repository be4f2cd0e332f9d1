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
	var sc storableScan
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return sc.end()
		}
		if err != nil {
			return fmt.Errorf("not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
		if sc.done {
			return errors.New("data after the JSON value")
		}
		if err := sc.token(tok); err != nil {
			return err
		}
	}
}

// storableScan follows Storable's token stream: the open containers, the
// JSON Pointer of the current position (for messages) and whether the one
// top-level value has ended.
type storableScan struct {
	stack []storableFrame
	path  []string
	done  bool
}

type storableFrame struct {
	object  bool
	wantKey bool
	keys    map[string]struct{}
}

func (sc *storableScan) end() error {
	switch {
	case len(sc.stack) > 0:
		return errors.New("not valid JSON: unexpected end of input")
	case !sc.done:
		return errors.New("no JSON value")
	}
	return nil
}

func (sc *storableScan) where() string {
	if len(sc.path) == 0 {
		return "at the top level"
	}
	return "at /" + strings.Join(sc.path, "/")
}

// token takes one token; a key or an opening delimiter is not yet a value
// of the enclosing container, everything else completes one.
func (sc *storableScan) token(tok json.Token) error {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' || v == '[' {
			return sc.open(v)
		}
		if !sc.stack[len(sc.stack)-1].object {
			sc.path = sc.path[:len(sc.path)-1]
		}
		sc.stack = sc.stack[:len(sc.stack)-1]
	case string:
		if n := len(sc.stack); n > 0 && sc.stack[n-1].wantKey {
			return sc.key(&sc.stack[n-1], v)
		}
	case json.Number:
		if err := storableNumber(string(v)); err != nil {
			return fmt.Errorf("%v %s", err, sc.where())
		}
	}
	sc.value()
	return nil
}

func (sc *storableScan) open(v json.Delim) error {
	if len(sc.stack) >= MaxRawDepth {
		return fmt.Errorf("nested deeper than %d levels %s", MaxRawDepth, sc.where())
	}
	sc.stack = append(sc.stack, storableFrame{object: v == '{', wantKey: v == '{'})
	if v == '[' {
		sc.path = append(sc.path, "0")
	}
	return nil
}

func (sc *storableScan) key(f *storableFrame, k string) error {
	if f.keys == nil {
		f.keys = map[string]struct{}{}
	}
	if _, dup := f.keys[k]; dup {
		return fmt.Errorf("duplicate key %s %s", quote(k), sc.where())
	}
	if len(f.keys) >= storableMaxKeys {
		return fmt.Errorf("more than %d keys in one object %s", storableMaxKeys, sc.where())
	}
	f.keys[k] = struct{}{}
	f.wantKey = false
	sc.path = append(sc.path, escapePointer(k))
	return nil
}

// value notes that a value (not a key) ended: the top level is done, an
// object wants its next key, an array moves to its next index.
func (sc *storableScan) value() {
	n := len(sc.stack)
	switch {
	case n == 0:
		sc.done = true
	case sc.stack[n-1].object:
		sc.stack[n-1].wantKey = true
		sc.path = sc.path[:len(sc.path)-1]
	default:
		i, _ := strconv.Atoi(sc.path[len(sc.path)-1])
		sc.path[len(sc.path)-1] = strconv.Itoa(i + 1)
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
