package validate

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Limits bound a raw JSON document before anything else looks at it.
type Limits struct {
	MaxBytes     int // the whole document
	MaxDepth     int // arrays and objects nested inside one another
	MaxNodes     int // JSON values, containers included (object keys are not values)
	MaxKeyBytes  int // one object key, in UTF-8 bytes after unescaping
	MaxNumberLen int // one number literal, in characters
	// AllowNUL admits U+0000 in strings and keys: schemas are stored
	// through the JSONB-safe codec (internal/jsonb), values are not.
	AllowNUL bool
}

// MaxNumberLen is the longest number literal, as written and in the plain
// decimal notation PostgreSQL's jsonb stores and returns: every float64,
// written with up to 17 significant digits (all it takes to name one), is
// at most 343 characters in that notation ("-4.9406564584124654e-324"),
// so every one of them is admitted and published as an equal number, and
// what jsonb returns passes the scan again.
const MaxNumberLen = 400

// The limits this package applies. They are fixed: SchemaLimits and
// ValueLimits below are copies for callers (the runner derives the
// finalizer's limits from them), and changing those changes nothing here.
var (
	schemaLimits = Limits{MaxBytes: 512 << 10, MaxDepth: 64, MaxNodes: 16384, MaxKeyBytes: MaxPatternBytes, MaxNumberLen: MaxNumberLen, AllowNUL: true}
	valueLimits  = Limits{MaxBytes: 256 << 10, MaxDepth: 32, MaxNodes: 16384, MaxKeyBytes: 256, MaxNumberLen: MaxNumberLen}
)

// SchemaLimits apply to caller schemas stored as plain jsonb (a tool's
// input_schema): those of response_format admit U+0000 too, as they are
// stored through the codec.
var SchemaLimits = func() Limits {
	l := schemaLimits
	l.AllowNUL = false
	return l
}()

// ValueLimits apply to values submitted by models.
var ValueLimits = valueLimits

// ScanError locates a problem in a raw document. Pointer is a JSON Pointer
// (RFC 6901); the empty string is the whole document.
type ScanError struct {
	Pointer string
	Detail  string
}

func (e *ScanError) Error() string { return displayPointer(e.Pointer) + ": " + e.Detail }

// MaxProblems bounds the refusals reported for one schema document: the
// first ones the screening meets.
const MaxProblems = 20

// Problems are the refusals of one schema document when there are more
// than one (Compile), ordered by pointer, at most MaxProblems. Its Error
// is the first one's, with a count of the rest.
type Problems []*ScanError

func (p Problems) Error() string {
	if len(p) == 1 {
		return p[0].Error()
	}
	return fmt.Sprintf("%s (and %d more)", p[0].Error(), len(p)-1)
}

// Unwrap gives each refusal to errors.Is and errors.As.
func (p Problems) Unwrap() []error {
	out := make([]error, len(p))
	for i, e := range p {
		out[i] = e
	}
	return out
}

// ProblemsOf lists the refusals an admission error holds: every one of a
// Problems, or the error itself. An error that is neither a *ScanError nor
// Problems gives nil.
func ProblemsOf(err error) []*ScanError {
	switch e := err.(type) {
	case Problems:
		return e
	case *ScanError:
		return []*ScanError{e}
	}
	return nil
}

// displayPointer renders a JSON Pointer for people: the root, whose pointer
// is the empty string, is shown as "(root)".
func displayPointer(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}

// Decode strictly parses raw into map[string]any / []any / json.Number /
// string / bool / nil. It rejects what PostgreSQL jsonb or our validator
// cannot hold exactly or cheaply: duplicate object keys (jsonb keeps the
// last), trailing data, invalid UTF-8, unpaired surrogate escapes and
// U+0000 (jsonb text cannot hold them), numbers beyond the range of a
// 64-bit float (1e400, and 1e-400, which is not zero but rounds to it),
// number literals longer than lim.MaxNumberLen as written or in plain
// decimal notation, and documents beyond lim. Callers keep raw for storage.
func Decode(raw []byte, lim Limits) (any, error) {
	p := newParser(raw, lim, false)
	defer p.release()
	if err := p.precheck(); err != nil {
		return nil, err
	}
	v, err := p.document()
	if err != nil {
		return nil, err
	}
	return v.val, nil
}

// vnode is a decoded value with what the cost estimator needs to know about
// it. val is the value handed to gojsonschema.
type vnode struct {
	val   any
	num   *numInfo // numbers only
	kids  []vnode  // array elements, or object values in keys order
	keys  []vkey   // objects only
	runes int32    // strings: length in code points
	size  int32    // an upper bound of its compact JSON encoding by encoding/json
	nums  int32    // numbers in the subtree
	nodes int32    // values in the subtree, this one included
	kind  vkind
}

type vkey struct {
	name  string
	runes int32
	size  int32 // encoded size, quotes included
}

type vkind uint8

const (
	kNull vkind = iota
	kBool
	kNumber
	kString
	kArray
	kObject
)

// decodeTree is Decode keeping the annotated tree (values only).
func decodeTree(raw []byte, lim Limits) (*vnode, error) {
	p := newParser(raw, lim, true)
	defer p.release()
	if err := p.precheck(); err != nil {
		return nil, err
	}
	v, err := p.document()
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// seg is one step of the JSON Pointer of the value being parsed.
type seg struct {
	key string
	idx int // -1 for object members
}

type parser struct {
	buf   []byte
	pos   int
	lim   Limits
	nodes int
	tree  bool
	segs  []seg // where the parser is, for error messages
	// scratch stacks shared by the open containers
	names []string
	vals  []any
	kids  []vnode
	keys  []vkey
}

// ptr renders the JSON Pointer of the value being parsed.
func (p *parser) ptr() string {
	var b strings.Builder
	for _, s := range p.segs {
		b.WriteByte('/')
		if s.idx >= 0 {
			b.WriteString(strconv.Itoa(s.idx))
		} else {
			b.WriteString(escapePointer(s.key))
		}
	}
	return b.String()
}

// scratch keeps parsers' stacks between documents; it is emptied by every
// garbage collection like any sync.Pool.
var scratch = sync.Pool{New: func() any { return new(parser) }}

func newParser(raw []byte, lim Limits, tree bool) *parser {
	p := scratch.Get().(*parser)
	*p = parser{buf: raw, lim: lim, tree: tree, segs: p.segs[:0], names: p.names[:0], vals: p.vals[:0], kids: p.kids[:0], keys: p.keys[:0]}
	return p
}

// release returns the parser to the pool; containers clear the stack
// entries they used as they close, so the pool pins no caller data.
func (p *parser) release() {
	clear(p.segs[:cap(p.segs)])
	p.buf = nil
	scratch.Put(p)
}

// push appends to a scratch stack, doubling its capacity when full (append
// grows large slices by only 1.25×, which costs several copies).
func push[T any](s []T, v T) []T {
	if len(s) == cap(s) {
		n := make([]T, len(s), max(16, 2*cap(s)))
		copy(n, s)
		s = n
	}
	return append(s, v)
}

func (p *parser) precheck() error {
	if len(p.buf) > p.lim.MaxBytes {
		return &ScanError{Detail: fmt.Sprintf("document is %d bytes, more than the limit of %d", len(p.buf), p.lim.MaxBytes)}
	}
	return nil
}

func (p *parser) document() (vnode, error) {
	p.skipSpace()
	if p.pos == len(p.buf) {
		return vnode{}, &ScanError{Detail: "invalid JSON: empty document"}
	}
	v, err := p.value(0)
	if err != nil {
		return vnode{}, err
	}
	p.skipSpace()
	if p.pos != len(p.buf) {
		return vnode{}, &ScanError{Detail: fmt.Sprintf("unexpected data after the JSON value at byte %d", p.pos)}
	}
	return v, nil
}

func (p *parser) skipSpace() {
	for p.pos < len(p.buf) {
		switch p.buf[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) syntax(what string) error {
	if p.pos >= len(p.buf) {
		return &ScanError{Pointer: p.ptr(), Detail: "invalid JSON: unexpected end of document, " + what}
	}
	c := p.buf[p.pos]
	shown := strconv.QuoteRuneToASCII(rune(c))
	if c >= utf8.RuneSelf {
		shown = fmt.Sprintf("byte 0x%02x", c)
	}
	return &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("invalid JSON at byte %d: unexpected %s, %s", p.pos, shown, what)}
}

func (p *parser) value(depth int) (v vnode, err error) {
	defer func() { v.nodes++ }()
	p.nodes++
	if p.nodes > p.lim.MaxNodes {
		return vnode{}, &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("more than %d JSON values", p.lim.MaxNodes)}
	}
	if p.pos >= len(p.buf) {
		return vnode{}, p.syntax("expecting a value")
	}
	switch c := p.buf[p.pos]; {
	case c == '{':
		if depth >= p.lim.MaxDepth {
			return vnode{}, &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("nested deeper than %d levels", p.lim.MaxDepth)}
		}
		return p.object(depth)
	case c == '[':
		if depth >= p.lim.MaxDepth {
			return vnode{}, &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("nested deeper than %d levels", p.lim.MaxDepth)}
		}
		return p.array(depth)
	case c == '"':
		s, runes, size, err := p.str("string")
		if err != nil {
			return vnode{}, err
		}
		return vnode{val: s, kind: kString, runes: int32(runes), size: int32(size)}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true", true)
	case c == 'f':
		return p.literal("false", false)
	case c == 'n':
		return p.literal("null", nil)
	}
	return vnode{}, p.syntax("expecting a value")
}

func (p *parser) literal(word string, v any) (vnode, error) {
	if string(p.buf[p.pos:min(len(p.buf), p.pos+len(word))]) != word {
		return vnode{}, p.syntax("expecting a value")
	}
	p.pos += len(word)
	k := kBool
	if v == nil {
		k = kNull
	}
	return vnode{val: v, kind: k, size: int32(len(word))}, nil
}

// Containers collect their members on the parser's scratch stacks and
// allocate exactly sized slices and maps when they close: a 16k-member
// object costs one map and one slice, not a series of grown copies.

func (p *parser) object(depth int) (vnode, error) {
	p.pos++ // {
	n := vnode{kind: kObject, size: 2}
	nbase, vbase, kbase, keybase := len(p.names), len(p.vals), len(p.kids), len(p.keys)
	defer func() {
		clear(p.names[nbase:])
		clear(p.vals[vbase:])
		clear(p.kids[kbase:])
		clear(p.keys[keybase:])
		p.names, p.vals, p.kids, p.keys = p.names[:nbase], p.vals[:vbase], p.kids[:kbase], p.keys[:keybase]
	}()
	p.skipSpace()
	if p.pos < len(p.buf) && p.buf[p.pos] == '}' {
		p.pos++
		n.val = map[string]any{}
		return n, nil
	}
	for {
		if err := p.member(&n, depth); err != nil {
			return vnode{}, err
		}
		p.skipSpace()
		if p.pos < len(p.buf) && p.buf[p.pos] == ',' {
			p.pos++
			n.size++
			continue
		}
		if p.pos < len(p.buf) && p.buf[p.pos] == '}' {
			p.pos++
			break
		}
		return vnode{}, p.syntax("expecting ',' or '}' in an object")
	}
	if err := p.closeObject(&n, nbase, vbase, kbase, keybase); err != nil {
		return vnode{}, err
	}
	return n, nil
}

// member reads one "key": value of an object onto the scratch stacks and
// adds its sizes to the object's.
func (p *parser) member(n *vnode, depth int) error {
	p.skipSpace()
	if p.pos >= len(p.buf) || p.buf[p.pos] != '"' {
		return p.syntax("expecting an object key")
	}
	key, runes, ksize, err := p.str("object key")
	if err != nil {
		return err
	}
	p.segs = append(p.segs, seg{key: key, idx: -1})
	if len(key) > p.lim.MaxKeyBytes {
		return &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("object key is %d bytes, more than the limit of %d", len(key), p.lim.MaxKeyBytes)}
	}
	p.skipSpace()
	if p.pos >= len(p.buf) || p.buf[p.pos] != ':' {
		return p.syntax("expecting ':' after an object key")
	}
	p.pos++
	p.skipSpace()
	v, err := p.value(depth + 1)
	if err != nil {
		return err
	}
	p.segs = p.segs[:len(p.segs)-1]
	n.size += int32(ksize) + 1 + v.size
	n.nums += v.nums
	n.nodes += v.nodes
	if p.tree {
		p.keys = push(p.keys, vkey{name: key, runes: int32(runes), size: int32(ksize)})
		p.kids = push(p.kids, v)
	} else {
		p.names = push(p.names, key)
		p.vals = push(p.vals, v.val)
	}
	return nil
}

// closeObject makes the object's map (refusing a key written twice) and,
// for a tree, its exactly sized members, from the scratch stacks above
// the given bases.
func (p *parser) closeObject(n *vnode, nbase, vbase, kbase, keybase int) error {
	count := len(p.names) - nbase
	if p.tree {
		count = len(p.keys) - keybase
	}
	obj := make(map[string]any, count)
	for i := range count {
		var key string
		var val any
		if p.tree {
			key, val = p.keys[keybase+i].name, p.kids[kbase+i].val
		} else {
			key, val = p.names[nbase+i], p.vals[vbase+i]
		}
		if _, dup := obj[key]; dup {
			p.segs = append(p.segs, seg{key: key, idx: -1})
			return &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("duplicate object key %q", key)}
		}
		obj[key] = val
	}
	n.val = obj
	if p.tree {
		n.kids = append([]vnode(nil), p.kids[kbase:]...)
		n.keys = append([]vkey(nil), p.keys[keybase:]...)
	}
	return nil
}

func (p *parser) array(depth int) (vnode, error) {
	p.pos++ // [
	n := vnode{kind: kArray, size: 2}
	vbase, kbase := len(p.vals), len(p.kids)
	defer func() {
		clear(p.vals[vbase:])
		clear(p.kids[kbase:])
		p.vals, p.kids = p.vals[:vbase], p.kids[:kbase]
	}()
	p.skipSpace()
	if p.pos < len(p.buf) && p.buf[p.pos] == ']' {
		p.pos++
		n.val = []any{}
		return n, nil
	}
	for i := 0; ; i++ {
		p.skipSpace()
		p.segs = append(p.segs, seg{idx: i})
		v, err := p.value(depth + 1)
		if err != nil {
			return vnode{}, err
		}
		p.segs = p.segs[:len(p.segs)-1]
		n.size += v.size
		n.nums += v.nums
		n.nodes += v.nodes
		if p.tree {
			p.kids = push(p.kids, v)
		} else {
			p.vals = push(p.vals, v.val)
		}
		p.skipSpace()
		if p.pos < len(p.buf) && p.buf[p.pos] == ',' {
			p.pos++
			n.size++
			continue
		}
		if p.pos < len(p.buf) && p.buf[p.pos] == ']' {
			p.pos++
			break
		}
		return vnode{}, p.syntax("expecting ',' or ']' in an array")
	}
	if p.tree {
		kids := p.kids[kbase:]
		arr := make([]any, len(kids))
		for i := range kids {
			arr[i] = kids[i].val
		}
		n.val = arr
		n.kids = append([]vnode(nil), kids...)
	} else {
		n.val = append([]any(nil), p.vals[vbase:]...)
	}
	return n, nil
}

// str parses a string at p.pos. It returns the decoded string, its length
// in code points and an upper bound of its encoding by encoding/json
// (which escapes <, > and & as \u00XX).
func (p *parser) str(what string) (string, int, int, error) {
	start := p.pos
	p.pos++      // opening quote
	var b []byte // nil until the first escape
	runes, size := 0, 2
	lit := p.pos
	for {
		if p.pos >= len(p.buf) {
			p.pos = start
			return "", 0, 0, &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("invalid JSON at byte %d: unterminated %s", start, what)}
		}
		c := p.buf[p.pos]
		switch {
		case c == '"':
			var s string
			if b == nil {
				s = string(p.buf[lit:p.pos])
			} else {
				s = string(append(b, p.buf[lit:p.pos]...))
			}
			p.pos++
			return s, runes, size, nil
		case c == '\\':
			if b == nil {
				b = make([]byte, 0, p.stringEnd()-lit)
			}
			b = append(b, p.buf[lit:p.pos]...)
			r, err := p.escape(what)
			if err != nil {
				return "", 0, 0, err
			}
			b = utf8.AppendRune(b, r)
			runes++
			size += encodedRuneSize(r)
			lit = p.pos
		case c < 0x20:
			return "", 0, 0, &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("invalid JSON at byte %d: control character 0x%02x in a %s must be escaped", p.pos, c, what)}
		case c < utf8.RuneSelf:
			p.pos++
			runes++
			size += encodedRuneSize(rune(c))
		default:
			r, w := utf8.DecodeRune(p.buf[p.pos:])
			if r == utf8.RuneError && w <= 1 {
				return "", 0, 0, &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("invalid UTF-8 at byte %d in a %s", p.pos, what)}
			}
			p.pos += w
			runes++
			size += encodedRuneSize(r)
		}
	}
}

// stringEnd finds the closing quote of the string being read (or the end
// of the document): the decoded string is no longer than the raw one.
func (p *parser) stringEnd() int {
	for i := p.pos; i < len(p.buf); i++ {
		switch p.buf[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(p.buf)
}

// escape decodes the escape sequence at p.pos (at the backslash).
func (p *parser) escape(what string) (rune, error) {
	at := p.pos
	if p.pos+1 >= len(p.buf) {
		return 0, &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("invalid JSON at byte %d: unterminated %s", at, what)}
	}
	c := p.buf[p.pos+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, ok := p.hex4()
		if !ok {
			return 0, &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("invalid JSON at byte %d: malformed \\u escape in a %s", at, what)}
		}
		switch {
		case r == 0 && !p.lim.AllowNUL:
			return 0, &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("%s contains U+0000 (byte %d), which PostgreSQL jsonb cannot store", what, at)}
		case r >= 0xDC00 && r <= 0xDFFF:
			return 0, &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("%s contains an unpaired surrogate escape (byte %d), which PostgreSQL jsonb cannot store", what, at)}
		case r >= 0xD800 && r <= 0xDBFF:
			if p.pos+1 < len(p.buf) && p.buf[p.pos] == '\\' && p.buf[p.pos+1] == 'u' {
				save := p.pos
				p.pos += 2
				lo, ok := p.hex4()
				if ok && lo >= 0xDC00 && lo <= 0xDFFF {
					return utf16Pair(r, lo), nil
				}
				p.pos = save
			}
			return 0, &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("%s contains an unpaired surrogate escape (byte %d), which PostgreSQL jsonb cannot store", what, at)}
		}
		return r, nil
	}
	return 0, &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("invalid JSON at byte %d: invalid escape in a %s", at, what)}
}

func utf16Pair(hi, lo rune) rune { return (hi-0xD800)<<10 | (lo - 0xDC00) + 0x10000 }

func (p *parser) hex4() (rune, bool) {
	if p.pos+4 > len(p.buf) {
		return 0, false
	}
	var r rune
	for _, c := range p.buf[p.pos : p.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

// encodedRuneSize is the size of r in encoding/json output (HTML-safe
// escaping, as json.Marshal does).
func encodedRuneSize(r rune) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
		return 6
	}
	return utf8.RuneLen(r)
}

func (p *parser) number() (vnode, error) {
	start := p.pos
	i := p.pos
	digits := func() int {
		n := 0
		for i < len(p.buf) && p.buf[i] >= '0' && p.buf[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if p.buf[i] == '-' {
		i++
	}
	if i < len(p.buf) && p.buf[i] == '0' {
		i++
	} else if digits() == 0 {
		p.pos = i
		return vnode{}, p.syntax("expecting a digit")
	}
	if i < len(p.buf) && p.buf[i] == '.' {
		i++
		if digits() == 0 {
			p.pos = i
			return vnode{}, p.syntax("expecting a digit after the decimal point")
		}
	}
	if i < len(p.buf) && (p.buf[i] == 'e' || p.buf[i] == 'E') {
		i++
		if i < len(p.buf) && (p.buf[i] == '+' || p.buf[i] == '-') {
			i++
		}
		if digits() == 0 {
			p.pos = i
			return vnode{}, p.syntax("expecting a digit in the exponent")
		}
	}
	lit := string(p.buf[start:i])
	p.pos = i
	if len(lit) > p.lim.MaxNumberLen {
		return vnode{}, &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("number literal is %d characters, more than the limit of %d", len(lit), p.lim.MaxNumberLen)}
	}
	ni, err := parseNumber(lit)
	if err != nil {
		return vnode{}, &ScanError{Pointer: p.ptr(), Detail: err.Error()}
	}
	if n := plainLen(lit, ni); n > p.lim.MaxNumberLen {
		return vnode{}, &ScanError{Pointer: p.ptr(), Detail: fmt.Sprintf("number %s is %d characters in plain decimal notation, "+
			"the form PostgreSQL stores and returns, more than the limit of %d; write it with fewer digits", lit, n, p.lim.MaxNumberLen)}
	}
	size := max(len(lit), maxFloatTextLen)
	val := json.Number(lit)
	if p.tree && ni.isZero() && lit != "0" {
		// For validation only: the library compares through encoding/json,
		// which prints -0 and 0 differently, and parses 0e1000 as a big.Rat
		// with its exponent. The caller's bytes are kept.
		val = "0"
	}
	return vnode{val: val, kind: kNumber, num: ni, size: int32(size), nums: 1}, nil
}

// maxFloatTextLen is the longest float64 text encoding/json writes
// ("-2.2250738585072014e-308").
const maxFloatTextLen = 24

// MaxZeroExponent bounds the exponent written in a zero ("0e5"):
// PostgreSQL refuses 0e9999999999. A number other than zero whose
// exponent is that large is beyond the range of a 64-bit float anyway.
const MaxZeroExponent = 1000

// smallestFloat is the smallest positive float64 (a subnormal).
const smallestFloat = "4.9406564584124654e-324"

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	s = strings.ReplaceAll(s, "~", "~0")
	return strings.ReplaceAll(s, "/", "~1")
}
