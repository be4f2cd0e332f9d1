package validate

import "strings"

// bytesMargin covers pooled state re-allocated when several garbage
// collections pass during one validation.
const bytesMargin = 1.02

// coefficients: upper bounds of the library's cost per unit on the
// reference machine (2 shared vCPUs), measured by TestCalibrate
// (calibrate_test.go, run with CHATD_CALIBRATE=1) with a safety margin.
type coefficients struct {
	decNodeNs, decNodeB float64 // decoding, per value
	decByteNs, decByteB float64 // decoding, per byte
	// one validation: the result and root context, and the pooled state of
	// regexp (a 32 KiB backtracker bit set, NFA queues) and fmt, which a
	// validation allocates afresh when a garbage collection emptied the pools
	baseNs, baseB       float64
	evalNs, evalB       float64 // one validateRecursive call
	subNs, subB         float64 // one sub-result (anyOf branch, item, ...)
	ctxNs, ctxB         float64 // one path element
	iterNs              float64 // one object key or array element visited by a loop
	errNs, errB         float64 // one error, before its text
	textNs, textB       float64 // one byte of error text (path, property name, allowed values)
	numErrNs, numErrB   float64 // extra for a numeric error, besides rendering the keyword value
	cmpNs, cmpB         float64 // one numeric keyword comparison, fixed part
	cmpQuadNs           float64 // per squared decimal digit of both operands (big.Rat Cmp)
	quoQuadNs           float64 // same for multipleOf (big.Rat Quo and normalisation)
	cmpByteB            float64 // bytes per decimal digit of both operands
	mergeNs, mergeB     float64 // one error copied into a parent result
	parseNs, parseB     float64 // one number parse, fixed part
	parseCharNs         float64 // per character of the literal
	parseCharB          float64
	parseExpNs          float64 // per unit of decimal exponent
	parseExpB           float64
	marshalNs, marshalB float64 // one byte through marshalWithoutNumber
	uniqNs, uniqB       float64 // one uniqueItems entry (map insert)
	recompNs, recompB   float64 // one patternProperties recompile, fixed part
	instNs, instB       float64 // per program instruction of a recompile
	srcNs, srcB         float64 // per byte of pattern source of a recompile
	tableNs, tableB     float64 // per Unicode table range a recompile copies (\p{L}: 650)
	foldNs, foldB       float64 // per rune a recompile case-folds
	matchNs             float64 // per instruction in flight × input position of a match by the NFA
	backtrackNs         float64 // the same when regexp uses its bit-state backtracker
	bitNs               float64 // per instruction × input position: the backtracker's bit set
	matchFixedNs        float64 // one match call
	lenNs, lenB         float64 // per byte of a minLength/maxLength check
	keyCmpNs            float64 // one instance key compared with one "properties" name
}

var coef = coefficients{
	baseNs: 5000, baseB: 96 << 10,
	decNodeNs: 600, decNodeB: 800, decByteNs: 15, decByteB: 2,
	evalNs: 520, evalB: 100,
	subNs: 80, subB: 48,
	ctxNs: 40, ctxB: 32,
	iterNs: 60,
	errNs:  6000, errB: 1100,
	textNs: 5, textB: 4,
	numErrNs: 2000, numErrB: 400,
	cmpNs: 500, cmpB: 100, cmpQuadNs: 0.03, quoQuadNs: 0.06, cmpByteB: 4,
	mergeNs: 25, mergeB: 48,
	parseNs: 300, parseB: 160,
	parseCharNs: 50, parseCharB: 8,
	parseExpNs: 6, parseExpB: 4,
	marshalNs: 200, marshalB: 32,
	uniqNs: 200, uniqB: 100,
	recompNs: 3500, recompB: 900,
	instNs: 700, instB: 330,
	srcNs: 250, srcB: 128,
	tableNs: 150, tableB: 100,
	foldNs: 40, foldB: 2,
	matchNs: 20, backtrackNs: 10, bitNs: 0.1, matchFixedNs: 200,
	lenNs: 8, lenB: 1.2,
	keyCmpNs: 8,
}

// formatCost: each format checker's time per call and per input byte,
// and per byte of the characters that make it slow (net/mail parses
// quoted strings and spaces by the rune, the hostname pattern backtracks at
// each dot), with its allocation per byte and per call: the worst over the
// input shapes and lengths TestCalibrateFormats tries, with a margin.
var formatCost = map[string]struct {
	fixedNs, ns, specialNs float64
	special                string
	b, fixedB              float64
}{
	"date":                  {fixedNs: 600, ns: 15, b: 16, fixedB: 4 << 10},
	"date-time":             {fixedNs: 3500, ns: 40, b: 24, fixedB: 2 << 10},
	"time":                  {fixedNs: 1200, ns: 25, b: 16, fixedB: 2 << 10},
	"email":                 {fixedNs: 2500, ns: 25, specialNs: 150, special: " \"(),:;<>[]\\", b: 64, fixedB: 2 << 10},
	"idn-email":             {fixedNs: 2500, ns: 25, specialNs: 150, special: " \"(),:;<>[]\\", b: 64, fixedB: 2 << 10},
	"hostname":              {fixedNs: 1800, ns: 20, specialNs: 80, special: ".", b: 64, fixedB: 4 << 10},
	"ipv4":                  {fixedNs: 400, ns: 4, b: 8, fixedB: 2 << 10},
	"ipv6":                  {fixedNs: 400, ns: 4, b: 8, fixedB: 2 << 10},
	"uri":                   {fixedNs: 900, ns: 25, b: 16, fixedB: 2 << 10},
	"uri-reference":         {fixedNs: 900, ns: 25, b: 12, fixedB: 2 << 10},
	"iri":                   {fixedNs: 900, ns: 25, b: 16, fixedB: 2 << 10},
	"iri-reference":         {fixedNs: 900, ns: 25, b: 12, fixedB: 2 << 10},
	"uri-template":          {fixedNs: 1800, ns: 200, b: 80, fixedB: 4 << 10},
	"uuid":                  {fixedNs: 600, ns: 2, b: 8, fixedB: 2 << 10},
	"json-pointer":          {fixedNs: 500, ns: 25, b: 8, fixedB: 2 << 10},
	"relative-json-pointer": {fixedNs: 500, ns: 25, b: 8, fixedB: 2 << 10},
}

// The cost of checking a string against an enum set (compile_enumset.go): the
// registry's lock and lookup, and hashing the string.
const (
	enumSetNs     = 600
	enumSetByteNs = 2
	enumSetB      = 64
)

// formatCheckCost bounds one check of s by the named format's checker.
func formatCheckCost(name, s string) (ns, b float64) {
	fc := formatCost[name]
	ns = fc.fixedNs + float64(len(s))*fc.ns
	if fc.special != "" {
		special := 0
		for i := 0; i < len(s); i++ {
			if strings.IndexByte(fc.special, s[i]) >= 0 {
				special++
			}
		}
		ns += float64(special) * fc.specialNs
	}
	return ns, fc.fixedB + float64(len(s))*fc.b
}

// matchCost bounds one match of p on n bytes. Go's regexp runs a
// one-pass matcher when it can, small programs on short inputs with a
// bit-state backtracker (at most 500 instructions and 256 Ki instruction ×
// position pairs, regexp/backtrack.go), and an NFA otherwise; each does
// constant work per instruction in flight per position, at most p.width
// of them (regexWidth), and the backtracker also clears one bit per
// instruction and position.
func matchCost(p *pattern, n int) float64 {
	pos := float64(n + 1)
	if p.insts <= 500 && p.insts*(n+1) <= 256<<10 {
		return coef.matchFixedNs + pos*(float64(p.width)*coef.backtrackNs+float64(p.insts)*coef.bitNs)
	}
	return coef.matchFixedNs + pos*float64(p.width)*coef.matchNs
}

// recompileCost bounds regexp.MatchString's compilation of p, which the
// library repeats for every key and patternProperties entry: parsing grows
// with the source, compiling with the program.
func recompileCost(p *pattern) (ns, b float64) {
	ns = coef.recompNs + float64(p.insts)*coef.instNs + float64(len(p.src))*coef.srcNs +
		float64(p.tableRanges)*coef.tableNs + float64(p.foldRunes)*coef.foldNs
	b = coef.recompB + float64(p.insts)*coef.instB + float64(len(p.src))*coef.srcB +
		float64(p.tableRanges)*coef.tableB + float64(p.foldRunes)*coef.foldB
	return ns, b
}

// regexBytes bounds what one match allocates besides the pooled matcher
// state that baseB pays for once.
func regexBytes(insts int) float64 {
	return float64(64*insts + 256)
}

// What one ECMAScript match allocates: its state, and the input as runes
// (regexp2 matches on []rune; its pools keep buffers between matches, so
// this is an upper bound).
const (
	ecmaFixedB = 4 << 10
	ecmaRuneB  = 8
)
