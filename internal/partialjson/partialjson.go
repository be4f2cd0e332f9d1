// Package partialjson turns a growing prefix of a JSON text into the value
// it shows so far: open strings, objects and arrays are closed, while a
// number, literal or object key still being written is left out until it
// ends (a half number could still grow, "tru" is nothing yet).
//
// What it returns only ever grows: a later value extends an earlier one
// (strings by appending, arrays and objects by members, the last member
// by growing), scalars never change once shown. That makes it a preview,
// never a result: the finished text is the only result.
package partialjson

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// ErrSyntax reports input that is not the prefix of a JSON text in UTF-8,
// or repeats a key in an object (chatd refuses such texts, and a repeated
// key would replace what was shown).
var ErrSyntax = errors.New("partialjson: not a prefix of a JSON text without repeated keys")

type state uint8

const (
	stValue    state = iota // a value is expected
	stFirstKey              // after '{': a key or '}'
	stKey                   // after ',' in an object: a key
	stKeyStr                // inside a key
	stColon                 // after a key
	stString                // inside a string value
	stNumber                // inside a number
	stLiteral               // inside true, false or null
	stAfter                 // after a value: ',' or a closer
	stEnd                   // the top-level value ended
)

type frame struct {
	object bool
	n      int                 // members shown
	keys   map[string]struct{} // keys seen (objects)
}

// Parser consumes a JSON text in pieces. The zero value is ready to use.
type Parser struct {
	out    []byte // shown so far; valid JSON once Value closes it
	stack  []frame
	st     state
	opened bool   // stValue right after '[' (so ']' may follow)
	tok    []byte // number or literal being read
	lit    string // the literal being matched
	key    []byte // key (quoted, raw) waiting for its value to show
	esc    []byte // an escape being read in a string
	hi     []byte // a high-surrogate escape waiting for its pair
	rune   []byte // an incomplete UTF-8 sequence
	inKey  bool   // the string being read is a key
	err    error
}

// Write consumes the next piece of the text. After a syntax error it
// consumes nothing more and returns ErrSyntax; Value keeps what was shown.
func (p *Parser) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	for i, c := range b {
		if !p.step(c) {
			p.err = ErrSyntax
			return i, p.err
		}
	}
	return len(b), nil
}

// Err reports the syntax error that stopped the parser, if any.
func (p *Parser) Err() error { return p.err }

// Done reports whether the top-level value has ended.
func (p *Parser) Done() bool { return p.st == stEnd || p.st == stAfter && len(p.stack) == 0 }

// Value returns the value shown so far as compact JSON (nil before
// anything can be shown). The result is freshly allocated.
func (p *Parser) Value() []byte {
	if len(p.out) == 0 {
		return nil
	}
	v := make([]byte, 0, len(p.out)+len(p.stack)+1)
	v = append(v, p.out...)
	if p.st == stString {
		v = append(v, '"')
	}
	for i := len(p.stack) - 1; i >= 0; i-- {
		if p.stack[i].object {
			v = append(v, '}')
		} else {
			v = append(v, ']')
		}
	}
	return v
}

var literals = [256]string{'t': "true", 'f': "false", 'n': "null"}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// step consumes one byte; false is a syntax error.
func (p *Parser) step(c byte) bool {
	switch p.st {
	case stValue:
		if isSpace(c) {
			return true
		}
		if c == ']' && p.opened {
			p.opened = false
			return p.close(false)
		}
		p.opened = false
		return p.begin(c)
	case stFirstKey, stKey:
		switch {
		case isSpace(c):
			return true
		case c == '}' && p.st == stFirstKey:
			return p.close(true)
		case c == '"':
			p.st, p.inKey, p.key = stKeyStr, true, append(p.key[:0], '"')
			return true
		}
		return false
	case stKeyStr, stString:
		return p.str(c)
	case stColon:
		if isSpace(c) {
			return true
		}
		if c == ':' {
			p.st = stValue
			return true
		}
		return false
	case stNumber:
		if c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			p.tok = append(p.tok, c)
			return true
		}
		if !json.Valid(p.tok) {
			return false
		}
		p.show(p.tok)
		p.st = stAfter
		return p.step(c)
	case stLiteral:
		if len(p.tok) >= len(p.lit) || p.lit[len(p.tok)] != c {
			return false
		}
		p.tok = append(p.tok, c)
		if len(p.tok) == len(p.lit) {
			p.show(p.tok)
			p.st = stAfter
		}
		return true
	case stAfter:
		switch {
		case len(p.stack) == 0: // a top-level scalar ended
			return isSpace(c)
		case isSpace(c):
			return true
		case c == ',' && len(p.stack) > 0:
			if p.stack[len(p.stack)-1].object {
				p.st = stKey
			} else {
				p.st = stValue
			}
			return true
		case c == '}' || c == ']':
			return p.close(c == '}')
		}
		return false
	case stEnd:
		return isSpace(c)
	}
	return false
}

// begin starts a value with its first byte.
func (p *Parser) begin(c byte) bool {
	switch {
	case c == '"':
		p.show([]byte{'"'})
		p.st, p.inKey = stString, false
	case c == '{':
		p.show([]byte{'{'})
		p.stack = append(p.stack, frame{object: true})
		p.st = stFirstKey
	case c == '[':
		p.show([]byte{'['})
		p.stack = append(p.stack, frame{})
		p.st, p.opened = stValue, true
	case c == '-' || c >= '0' && c <= '9':
		p.st, p.tok = stNumber, append(p.tok[:0], c)
	case c == 't' || c == 'f' || c == 'n':
		p.lit = literals[c]
		p.st, p.tok = stLiteral, append(p.tok[:0], c)
	default:
		return false
	}
	return true
}

// show writes the start of a value (or a whole scalar), preceded by its
// separator and key.
func (p *Parser) show(b []byte) {
	if n := len(p.stack); n > 0 {
		f := &p.stack[n-1]
		if f.n > 0 {
			p.out = append(p.out, ',')
		}
		if f.object {
			p.out = append(p.out, p.key...)
			p.out = append(p.out, ':')
		}
		f.n++
	}
	p.out = append(p.out, b...)
}

// close ends the innermost container if it is of the kind given.
func (p *Parser) close(object bool) bool {
	n := len(p.stack)
	if n == 0 || p.stack[n-1].object != object {
		return false
	}
	if object {
		p.out = append(p.out, '}')
	} else {
		p.out = append(p.out, ']')
	}
	p.stack = p.stack[:n-1]
	p.st = stAfter
	if n == 1 {
		p.st = stEnd
	}
	return true
}

// str consumes one byte inside a string. A value's content is shown as it
// completes: whole escapes, whole UTF-8 sequences, and a surrogate pair
// only once both halves are there, so the decoded text only grows.
func (p *Parser) str(c byte) bool {
	emit := func(b []byte) {
		if p.inKey {
			p.key = append(p.key, b...)
		} else {
			p.out = append(p.out, b...)
		}
	}
	if len(p.esc) > 0 {
		return p.escape(c, emit)
	}
	if len(p.rune) > 0 || c >= utf8.RuneSelf {
		p.rune = append(p.rune, c)
		if len(p.rune) > 1 && utf8.RuneStart(c) {
			return false // chatd refuses invalid UTF-8 anyway
		}
		if utf8.FullRune(p.rune) {
			if !utf8.Valid(p.rune) {
				return false
			}
			p.flushHigh(emit)
			emit(p.rune)
			p.rune = p.rune[:0]
		}
		return true
	}
	switch {
	case c < 0x20:
		return false
	case c == '\\':
		p.esc = append(p.esc[:0], c)
	case c == '"':
		p.flushHigh(emit)
		emit([]byte{'"'})
		if p.inKey {
			p.st = stColon
			return p.newKey()
		} else {
			p.st = stAfter
		}
	default:
		p.flushHigh(emit)
		emit([]byte{c})
	}
	return true
}

func (p *Parser) escape(c byte, emit func([]byte)) bool {
	p.esc = append(p.esc, c)
	if len(p.esc) == 2 {
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			p.flushHigh(emit)
			emit(p.esc)
			p.esc = p.esc[:0]
			return true
		case 'u':
			return true
		}
		return false
	}
	if !isHex(c) {
		return false
	}
	if len(p.esc) < 6 {
		return true
	}
	r := hexValue(p.esc[2:])
	switch {
	case r >= 0xD800 && r < 0xDC00:
		p.flushHigh(emit) // two highs in a row: the first stands alone
		p.hi = append(p.hi[:0], p.esc...)
	case r >= 0xDC00 && r < 0xE000 && len(p.hi) > 0:
		emit(p.hi)
		emit(p.esc)
		p.hi = p.hi[:0]
	default:
		p.flushHigh(emit)
		emit(p.esc)
	}
	p.esc = p.esc[:0]
	return true
}

// newKey records the key just read; a repeated one is refused.
func (p *Parser) newKey() bool {
	var k string
	if json.Unmarshal(p.key, &k) != nil {
		return false
	}
	f := &p.stack[len(p.stack)-1]
	if f.keys == nil {
		f.keys = map[string]struct{}{}
	}
	if _, dup := f.keys[k]; dup {
		return false
	}
	f.keys[k] = struct{}{}
	return true
}

// flushHigh shows a high surrogate that turned out to have no pair.
func (p *Parser) flushHigh(emit func([]byte)) {
	if len(p.hi) > 0 {
		emit(p.hi)
		p.hi = p.hi[:0]
	}
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func hexValue(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// Parse returns the value a prefix shows (nil if nothing yet).
func Parse(prefix []byte) ([]byte, error) {
	var p Parser
	_, err := p.Write(prefix)
	return p.Value(), err
}

// Member returns the value of one member of the top-level object a prefix
// shows, if it shows it yet.
func (p *Parser) Member(name string) (json.RawMessage, bool) {
	v := p.Value()
	if v == nil || v[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil {
		return nil, false
	}
	raw, ok := m[name]
	return raw, ok
}
