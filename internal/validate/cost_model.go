package validate

import (
	"encoding/json"
	"net/url"
	"regexp"
	"regexp/syntax"
	"sort"
)

// cnode is the cost model's view of one compiled subschema: what
// gojsonschema v1.2.0 will do at a location, without the assertions. It is
// built from the adapted document, so it mirrors what the library compiled.
type cnode struct {
	pass  int8  // 0: an object schema; 1: true; -1: false
	types uint8 // bit set of typeBit; 0 means untyped
	tlen  int   // length of the type list in error text

	hasConst  bool
	constLen  int
	constKey  string // canonical float form: what the library compares
	constNums []*numInfo
	enum      bool
	enumLen   int // length of the joined enum text in an enum error
	enumKeys  map[string]bool
	enumNums  []*numInfo

	numKws []numKw

	minLen, maxLen int        // -1 when absent
	pat            *pattern   // nil when absent
	ecma           *ecmaEntry // an ECMAScript pattern, which the library runs as a format
	enumSet        *enumSet   // an enum of strings, which the library runs as a format
	format         string

	itemsOne      *cnode
	itemsTuple    []*cnode
	addItems      *cnode
	addItemsFalse bool
	minItems      int // -1 when absent
	maxItems      int
	unique        bool
	contains      *cnode

	minProps, maxProps int // -1 when absent
	required           []string
	props              map[string]*cnode
	patProps           []patProp
	addProps           *cnode
	addPropsFalse      bool
	propNames          *cnode
	deps               map[string]dep

	allOf, anyOf, oneOf []*cnode
	not, ifS, thenS     *cnode
	elseS               *cnode

	// ref is the schema a "$ref" names; the library validates against it
	// alone (its siblings are never assertions: admit_screen.go, prepare).
	ref *cnode
}

// numKw is one numeric keyword: multipleOf, maximum, exclusiveMaximum,
// minimum or exclusiveMinimum.
type numKw struct {
	name string
	lit  *numInfo
	// the library renders the keyword value as a big.Float in each error;
	// its cost grows with the digits of the value's denominator.
	errNs, errB float64
}

type patProp struct {
	pat  *pattern
	node *cnode
}

// pattern is one screened regular expression as the cost model sees it.
type pattern struct {
	src   string
	re    *regexp.Regexp // decides matches exactly, as the library does
	insts int            // compiled program size (regexp/syntax instructions)
	width int            // instructions in flight per input position (regexWidth)
	// what parsing it costs besides its size (parseWork): Unicode table
	// ranges it copies, runes it case-folds one by one
	tableRanges, foldRunes int
}

type dep struct {
	names []string
	node  *cnode
}

const (
	tNull uint8 = 1 << iota
	tBool
	tObject
	tArray
	tNumber
	tInteger
	tString
)

var typeBits = map[string]uint8{"null": tNull, "boolean": tBool, "object": tObject, "array": tArray,
	"number": tNumber, "integer": tInteger, "string": tString}

// buildModel mirrors gojsonschema's parse of an adapted schema document.
// insts maps pattern sources to their program size (from the screening).
func buildModel(doc any, insts map[string]int) *cnode {
	b := &modelBuilder{root: doc, insts: insts, targets: map[string]*cnode{}, patterns: map[string]*pattern{}}
	return b.node(doc)
}

// modelBuilder builds the model of one document. The nodes of reference
// targets are shared, so recursive schemas make a cyclic model.
type modelBuilder struct {
	root     any
	insts    map[string]int
	targets  map[string]*cnode   // canonical reference → its node
	patterns map[string]*pattern // source → its model, made once
}

// pattern compiles a screened pattern the way the library does (its
// validation calls regexp.MatchString on the same source) and measures
// its program.
func (b *modelBuilder) pattern(src string) *pattern {
	if p, ok := b.patterns[src]; ok {
		return p
	}
	p := &pattern{src: src, insts: max(b.insts[src], 1)}
	p.width = p.insts
	re, err := regexp.Compile(src)
	if err != nil {
		re = regexp.MustCompile(`\A\z.`) // unreachable: the screening compiled it; never matches
	}
	p.re = re
	if parsed, err := syntax.Parse(src, syntax.Perl); err == nil {
		p.tableRanges, p.foldRunes = parseWork(src, parsed)
		if prog, err := syntax.Compile(parsed.Simplify()); err == nil {
			p.insts, p.width = len(prog.Inst), regexWidth(prog)
		}
	}
	b.patterns[src] = p
	return p
}

func (b *modelBuilder) node(doc any) *cnode {
	n := &cnode{}
	b.fill(n, doc)
	return n
}

// target returns the node of a canonical reference, made once.
func (b *modelBuilder) target(ref string) *cnode {
	if n, ok := b.targets[ref]; ok {
		return n
	}
	n := &cnode{}
	b.targets[ref] = n
	var doc any = true
	if u, err := url.Parse(ref); err == nil {
		if d, ok := lookup(b.root, u.Fragment); ok {
			doc = d
		}
	}
	b.fill(n, doc)
	return n
}

// fill makes n the model of the schema doc: a boolean schema, a
// reference, or an object schema's assertions and subschemas.
func (b *modelBuilder) fill(n *cnode, doc any) {
	if pass, ok := doc.(bool); ok {
		n.pass = -1
		if pass {
			n.pass = 1
		}
		return
	}
	m, _ := doc.(map[string]any)
	*n = cnode{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1, minProps: -1, maxProps: -1}
	if ref, ok := m["$ref"].(string); ok {
		n.ref = b.target(ref)
		return
	}
	fillType(n, m)
	fillLiterals(n, m)
	fillCounts(n, m)
	b.fillString(n, m)
	b.fillArray(n, m)
	b.fillObject(n, m)
	n.allOf, n.anyOf, n.oneOf = b.list(m, "allOf"), b.list(m, "anyOf"), b.list(m, "oneOf")
	n.not, n.ifS, n.thenS, n.elseS = b.sub(m, "not"), b.sub(m, "if"), b.sub(m, "then"), b.sub(m, "else")
}

// sub is the node of the schema m[k], nil when m has no k.
func (b *modelBuilder) sub(m map[string]any, k string) *cnode {
	if v, ok := m[k]; ok {
		return b.node(v)
	}
	return nil
}

// list is the nodes of the schemas in the array m[k].
func (b *modelBuilder) list(m map[string]any, k string) []*cnode {
	arr, _ := m[k].([]any)
	out := make([]*cnode, len(arr))
	for i, v := range arr {
		out[i] = b.node(v)
	}
	return out
}

// fillType reads "type" into a bit set and the length of its text.
func fillType(n *cnode, m map[string]any) {
	switch t := m["type"].(type) {
	case string:
		n.types, n.tlen = typeBits[t], len(t)
	case []any:
		n.tlen = 2
		for _, e := range t {
			s, _ := e.(string)
			n.types |= typeBits[s]
			n.tlen += len(s) + 1
		}
	}
}

// fillLiterals reads const, enum and the numeric keywords.
func fillLiterals(n *cnode, m map[string]any) {
	if c, ok := m["const"]; ok {
		n.hasConst, n.constLen, n.constKey = true, jsonSize(c), canonical(c, false)
		n.constNums = literalNumbers(c, nil)
	}
	if arr, ok := m["enum"].([]any); ok {
		n.enum, n.enumKeys = true, make(map[string]bool, len(arr))
		for _, e := range arr {
			n.enumLen += jsonSize(e) + 2
			n.enumKeys[canonical(e, false)] = true
			n.enumNums = literalNumbers(e, n.enumNums)
		}
	}
	for _, k := range []string{"multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"} {
		if lit, ok := m[k].(json.Number); ok {
			if ni, err := parseNumber(string(lit)); err == nil {
				ns, nb := bigFloatTextCost(ni)
				n.numKws = append(n.numKws, numKw{name: k, lit: ni, errNs: ns, errB: nb})
			}
		}
	}
}

// fillCounts reads the count keywords; -1 is absent.
func fillCounts(n *cnode, m map[string]any) {
	count := func(k string) int {
		if v, ok := m[k]; ok {
			c, _ := countValue(v)
			return c
		}
		return -1
	}
	n.minLen, n.maxLen = count("minLength"), count("maxLength")
	n.minItems, n.maxItems = count("minItems"), count("maxItems")
	n.minProps, n.maxProps = count("minProperties"), count("maxProperties")
}

// fillString reads pattern and format, a format of our own standing for
// an ECMAScript pattern or an enum set included.
func (b *modelBuilder) fillString(n *cnode, m map[string]any) {
	if p, ok := m["pattern"].(string); ok {
		n.pat = b.pattern(p)
	}
	n.format, _ = m["format"].(string)
	if e := ecmaEntryOf(n.format); e != nil {
		n.ecma, n.format = e, ""
	}
	if e := enumSetOf(n.format); e != nil {
		n.enumSet, n.format = e, ""
	}
}

// fillArray reads the array keywords.
func (b *modelBuilder) fillArray(n *cnode, m map[string]any) {
	if items, ok := m["items"]; ok {
		if _, isArr := items.([]any); isArr {
			n.itemsTuple = b.list(m, "items")
		} else {
			n.itemsOne = b.node(items)
		}
	}
	if add, ok := m["additionalItems"].(bool); ok {
		n.addItemsFalse = !add
	} else {
		n.addItems = b.sub(m, "additionalItems")
	}
	n.unique, _ = m["uniqueItems"].(bool)
	n.contains = b.sub(m, "contains")
}

// fillObject reads the object keywords.
func (b *modelBuilder) fillObject(n *cnode, m map[string]any) {
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			s, _ := r.(string)
			n.required = append(n.required, s)
		}
	}
	if props, ok := m["properties"].(map[string]any); ok {
		n.props = make(map[string]*cnode, len(props))
		for k, v := range props {
			n.props[k] = b.node(v)
		}
	}
	if pp, ok := m["patternProperties"].(map[string]any); ok {
		for _, k := range sortedKeys(pp) {
			n.patProps = append(n.patProps, patProp{pat: b.pattern(k), node: b.node(pp[k])})
		}
	}
	if add, ok := m["additionalProperties"].(bool); ok {
		n.addPropsFalse = !add
	} else {
		n.addProps = b.sub(m, "additionalProperties")
	}
	n.propNames = b.sub(m, "propertyNames")
	if deps, ok := m["dependencies"].(map[string]any); ok {
		b.fillDeps(n, deps)
	}
}

// fillDeps reads dependencies: lists of names and schemas.
func (b *modelBuilder) fillDeps(n *cnode, deps map[string]any) {
	n.deps = map[string]dep{}
	for k, v := range deps {
		arr, isArr := v.([]any)
		if !isArr {
			n.deps[k] = dep{node: b.node(v)}
			continue
		}
		if len(arr) == 0 {
			continue // the library registers nothing for []
		}
		d := dep{}
		for _, e := range arr {
			s, _ := e.(string)
			d.names = append(d.names, s)
		}
		n.deps[k] = d
	}
}

// literalNumbers appends the numbers found in a literal value.
func literalNumbers(v any, out []*numInfo) []*numInfo {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = literalNumbers(t[k], out)
		}
	case []any:
		for _, e := range t {
			out = literalNumbers(e, out)
		}
	case json.Number:
		if ni, err := parseNumber(string(t)); err == nil {
			out = append(out, ni)
		}
	}
	return out
}

// decimalSize is the number of decimal digits in the numerator and
// denominator of n as a reduced fraction (an upper bound).
func decimalSize(n *numInfo) (num, den int) {
	if n.exp >= 0 {
		return len(n.digits) + n.exp, 1
	}
	return len(n.digits), -n.exp
}

// bigFloatTextCost bounds the cost of rendering a keyword value the way
// each numeric error does (new(big.Float).SetRat(v) through text/template):
// it grows with the square of the denominator's digits (1e-300 takes about
// 250 µs) and of the numerator's (1.7976931348623157e308, a 309-digit
// integer, about 50 µs). Fitted by TestCalibrateNumeric and V28, on values
// up to float64's extremes (1e-320 allocates about 46 KB per error).
func bigFloatTextCost(n *numInfo) (ns, b float64) {
	num, den := decimalSize(n)
	d := float64(num + den)
	return 6000 + 6*float64(den)*float64(den) + 0.6*d*d, 1200 + 160*float64(den) + 40*float64(num)
}
