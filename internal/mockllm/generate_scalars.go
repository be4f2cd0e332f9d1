package mockllm

import (
	"encoding/json"
	"fmt"
	"iter"
	"math/big"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Generation of strings and numbers, and the exact arithmetic it needs.

// numbers picks values in range, on the multipleOf grid, using exact
// rational arithmetic so that fractional multipleOf (0.01) stays exact.
func numbers(v map[string]any, integer bool, nth int) []any {
	rg := bounds(v)
	var step *big.Rat
	if m, ok := ratOf(v["multipleOf"]); ok && m.Sign() > 0 {
		step = m
	}
	if integer {
		if step == nil {
			step = big.NewRat(1, 1)
		} else {
			// Integer multiples of p/q (lowest terms) are exactly the multiples of p.
			step = new(big.Rat).SetInt(new(big.Int).Abs(step.Num()))
		}
	}
	var out []*big.Rat
	if step != nil {
		out = gridNumbers(rg, step, nth)
	} else {
		out = freeNumbers(rg, nth)
	}
	res := make([]any, 0, len(out))
	for _, x := range out {
		if rg.contains(x) {
			res = append(res, json.Number(ratString(x)))
		}
	}
	return res
}

// gridNumbers are multiples of step: the one nearest zero in range, then
// alternately above and below it. A few spare values beyond nth give
// not/oneOf something to choose from.
func gridNumbers(rg numberRange, step *big.Rat, nth int) []*big.Rat {
	zero := new(big.Rat)
	c0 := zero
	switch {
	case rg.contains(zero):
	case rg.below(zero):
		c0 = mulRat(ceilRat(quoRat(rg.lo, step)), step)
		if rg.loEx && c0.Cmp(rg.lo) == 0 {
			c0 = addRat(c0, step)
		}
	case rg.hi != nil:
		c0 = mulRat(floorRat(quoRat(rg.hi, step)), step)
		if rg.hiEx && c0.Cmp(rg.hi) == 0 {
			c0 = subRat(c0, step)
		}
	}
	var out []*big.Rat
	for k := 0; k <= nth+2; k++ {
		d := mulRat(big.NewRat(int64(k), 1), step)
		out = append(out, addRat(c0, d))
		if k > 0 {
			out = append(out, subRat(c0, d))
		}
	}
	return out
}

// freeNumbers are numbers off any grid: zero, a bound or the middle of the
// range, then values around it.
func freeNumbers(rg numberRange, nth int) []*big.Rat {
	zero := new(big.Rat)
	lo, hi := rg.lo, rg.hi
	c0 := zero
	switch {
	case rg.contains(zero):
	case rg.below(zero) && !rg.loEx:
		c0 = lo
	case rg.below(zero) && hi != nil:
		c0 = quoRat(addRat(lo, hi), big.NewRat(2, 1))
	case rg.below(zero):
		c0 = addRat(lo, big.NewRat(1, 1))
	case hi != nil && !rg.hiEx:
		c0 = hi
	case hi != nil && lo != nil:
		c0 = quoRat(addRat(lo, hi), big.NewRat(2, 1))
	case hi != nil:
		c0 = subRat(hi, big.NewRat(1, 1))
	}
	out := []*big.Rat{c0}
	for k := 1; k <= nth+2; k++ {
		if hi != nil {
			// Halve the distance to the upper bound: stays in range and
			// keeps a finite decimal expansion.
			gap := quoRat(subRat(hi, c0), new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(min(k, 64)))))
			out = append(out, subRat(hi, gap))
		} else {
			out = append(out, addRat(c0, big.NewRat(int64(k), 1)))
		}
		out = append(out, subRat(c0, big.NewRat(int64(k), 1)))
	}
	return out
}

// numberRange is the interval a number schema allows; a nil end is
// unbounded, an exclusive one (loEx, hiEx) is not in the range.
type numberRange struct {
	lo, hi     *big.Rat
	loEx, hiEx bool
}

// below reports whether x lies under the range.
func (rg numberRange) below(x *big.Rat) bool {
	return rg.lo != nil && (x.Cmp(rg.lo) < 0 || rg.loEx && x.Cmp(rg.lo) == 0)
}

// contains reports whether x lies in the range.
func (rg numberRange) contains(x *big.Rat) bool {
	if rg.below(x) {
		return false
	}
	return rg.hi == nil || x.Cmp(rg.hi) < 0 || !rg.hiEx && x.Cmp(rg.hi) == 0
}

// bounds reads minimum/maximum and both spellings of exclusiveMinimum and
// exclusiveMaximum (Draft-07 numbers, Draft-04 booleans).
func bounds(v map[string]any) numberRange {
	var rg numberRange
	rg.lo, _ = ratOf(v["minimum"])
	switch x := v["exclusiveMinimum"].(type) {
	case bool:
		rg.loEx = x && rg.lo != nil
	default:
		if r, ok := ratOf(x); ok && (rg.lo == nil || r.Cmp(rg.lo) >= 0) {
			rg.lo, rg.loEx = r, true
		}
	}
	rg.hi, _ = ratOf(v["maximum"])
	switch x := v["exclusiveMaximum"].(type) {
	case bool:
		rg.hiEx = x && rg.hi != nil
	default:
		if r, ok := ratOf(x); ok && (rg.hi == nil || r.Cmp(rg.hi) <= 0) {
			rg.hi, rg.hiEx = r, true
		}
	}
	return rg
}

// strings yields format examples, strings built from the pattern, then
// generic words sized to minLength/maxLength; the validity check picks.
func (g *generator) strings(v map[string]any, nth int) iter.Seq[any] {
	return func(yield func(any) bool) {
		minL, maxL := minCount(v, "minLength"), maxCount(v, "maxLength")
		if maxL >= 0 && minL > maxL || minL > maxLen {
			return
		}
		fit := func(s string) string {
			r := []rune(s)
			if n := minL - len(r); n > 0 {
				r = append(r, []rune(strings.Repeat("x", n))...)
			}
			if maxL >= 0 && len(r) > maxL {
				r = r[len(r)-maxL:] // keep the tail, where the distinguishing suffix is
			}
			return string(r)
		}
		if f, ok := v["format"].(string); ok {
			for _, s := range formatExamples(f, nth+1) {
				if !yield(s) {
					return
				}
			}
		}
		if p, ok := v["pattern"].(string); ok {
			if re := g.pattern(p); re != nil {
				for s := range patternStrings(p, minL, nth) {
					if !yield(s) || !yield(fit(s)) {
						return
					}
				}
			}
		}
		for i := 0; i <= nth+1; i++ {
			s := "mock"
			if i > 0 {
				s += strconv.Itoa(i)
			}
			if !yield(fit(s)) {
				return
			}
		}
	}
}

func formatExamples(format string, n int) []string {
	var out []string
	for i := range n {
		var s string
		switch format {
		case "email", "idn-email":
			s = fmt.Sprintf("user%d@example.com", i+1)
		case "date":
			s = time.Date(2024, 1, 15+i, 0, 0, 0, 0, time.UTC).Format(time.DateOnly)
		case "date-time":
			s = time.Date(2024, 1, 15, 10, 30+i, 0, 0, time.UTC).Format(time.RFC3339)
		case "time":
			s = time.Date(2024, 1, 15, 10, 30+i, 0, 0, time.UTC).Format("15:04:05Z07:00")
		case "uri", "iri", "uri-reference", "iri-reference":
			s = fmt.Sprintf("https://example.com/mock/%d", i+1)
		case "uri-template":
			s = fmt.Sprintf("https://example.com/items/{id}/%d", i+1)
		case "uuid":
			s = fmt.Sprintf("123e4567-e89b-42d3-a456-%012x", 0x426614174000+i)
		case "ipv4":
			s = fmt.Sprintf("192.0.2.%d", 1+i%254)
		case "ipv6":
			s = fmt.Sprintf("2001:db8::%x", 1+i)
		case "hostname", "idn-hostname":
			s = fmt.Sprintf("host%d.example.com", i+1)
		case "json-pointer":
			s = fmt.Sprintf("/mock/%d", i)
		case "relative-json-pointer":
			s = fmt.Sprintf("%d/mock", i)
		case "regex":
			s = fmt.Sprintf("^mock%d$", i)
		default:
			return nil
		}
		out = append(out, s)
	}
	return out
}

// pattern compiles and caches a pattern. Patterns Go's RE2 cannot compile
// (lookaround, backreferences) return nil and are ignored: we cannot check
// them, so we do not pretend to.
func (g *generator) pattern(p string) *regexp.Regexp {
	re, ok := g.patterns[p]
	if !ok {
		re, _ = regexp.Compile(p)
		g.patterns[p] = re
	}
	return re
}

// patternStrings builds strings from the regexp syntax tree: each variant
// picks a different character in classes / branch in alternations (pick)
// and a different repetition count for unbounded repeats (reps).
func patternStrings(p string, minL, nth int) iter.Seq[string] {
	return func(yield func(string) bool) {
		re, err := syntax.Parse(p, syntax.Perl)
		if err != nil {
			return
		}
		reps := []int{1, 0, 2, 3, 5, 8}
		if minL > 8 {
			reps = append(reps, minL)
		}
		for pick := 0; pick < nth+3; pick++ {
			for _, r := range reps {
				s := synth{pick: pick, reps: r}
				if s.walk(re) && !yield(s.b.String()) {
					return
				}
			}
		}
	}
}

// synth writes one string that a pattern's syntax tree matches: pick
// chooses among characters and branches, reps counts unbounded repeats.
type synth struct {
	pick, reps int
	b          strings.Builder
}

func (s *synth) walk(re *syntax.Regexp) bool {
	if s.b.Len() > maxLen {
		return false
	}
	repeat := func(n int) bool {
		for range n {
			if !s.walk(re.Sub[0]) {
				return false
			}
		}
		return true
	}
	switch re.Op {
	case syntax.OpLiteral:
		s.b.WriteString(string(re.Rune))
	case syntax.OpCharClass:
		r, ok := pickRune(re.Rune, s.pick)
		if !ok {
			return false
		}
		s.b.WriteRune(r)
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		s.b.WriteRune(rune('a' + s.pick%26))
	case syntax.OpCapture:
		return s.walk(re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !s.walk(sub) {
				return false
			}
		}
	case syntax.OpAlternate:
		return s.walk(re.Sub[s.pick%len(re.Sub)])
	case syntax.OpStar:
		return repeat(s.reps)
	case syntax.OpPlus:
		return repeat(max(1, s.reps))
	case syntax.OpQuest:
		return repeat(min(1, s.reps))
	case syntax.OpRepeat:
		n := max(s.reps, re.Min)
		if re.Max >= 0 {
			n = min(n, re.Max)
		}
		return repeat(n)
	case syntax.OpNoMatch:
		return false
	}
	// Anchors, word boundaries and empty matches produce no text.
	return true
}

// pickRune chooses a character from a class, preferring readable ASCII over
// whatever sorts first (a negated class starts at \x00).
func pickRune(ranges []rune, pick int) (rune, bool) {
	var pool []rune
	for _, pref := range [][2]rune{{'a', 'z'}, {'0', '9'}, {'A', 'Z'}, {'!', '~'}, {' ', ' '}} {
		for i := 0; i+1 < len(ranges) && len(pool) < 128; i += 2 {
			for r := max(ranges[i], pref[0]); r <= min(ranges[i+1], pref[1]); r++ {
				if !slices.Contains(pool, r) {
					pool = append(pool, r)
				}
			}
		}
	}
	if len(pool) > 0 {
		return pool[pick%len(pool)], true
	}
	if len(ranges) >= 2 {
		return ranges[0], true
	}
	return 0, false
}

// ratOf parses a JSON number exactly. Absurd exponents are refused because
// big.Rat would try to materialise 10^exponent.
func ratOf(v any) (*big.Rat, bool) {
	n, ok := v.(json.Number)
	if !ok || len(n) > 1000 {
		return nil, false
	}
	s := string(n)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e > maxExponent || e < -maxExponent {
			return nil, false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

func bothRats(a, b any) (*big.Rat, *big.Rat, bool) {
	x, ok1 := ratOf(a)
	y, ok2 := ratOf(b)
	return x, y, ok1 && ok2
}

// minCount and maxCount read a count keyword (minItems, maxLength...),
// rounding towards the stricter side; maxCount is -1 when it is absent.
func minCount(v map[string]any, k string) int {
	r, ok := ratOf(v[k])
	if !ok || r.Sign() <= 0 {
		return 0
	}
	c := ceilRat(r)
	if c.Cmp(big.NewRat(maxLen+1, 1)) > 0 {
		return maxLen + 1
	}
	return int(c.Num().Int64())
}

func maxCount(v map[string]any, k string) int {
	r, ok := ratOf(v[k])
	if !ok {
		return -1
	}
	if r.Sign() < 0 {
		return 0
	}
	f := floorRat(r)
	if f.Cmp(big.NewRat(1<<30, 1)) > 0 {
		return -1 // effectively unbounded
	}
	return int(f.Num().Int64())
}

func addRat(a, b *big.Rat) *big.Rat { return new(big.Rat).Add(a, b) }

func subRat(a, b *big.Rat) *big.Rat { return new(big.Rat).Sub(a, b) }

func mulRat(a, b *big.Rat) *big.Rat { return new(big.Rat).Mul(a, b) }

func quoRat(a, b *big.Rat) *big.Rat { return new(big.Rat).Quo(a, b) }

func floorRat(r *big.Rat) *big.Rat {
	// Euclidean division by a positive denominator rounds towards -inf.
	return new(big.Rat).SetInt(new(big.Int).Div(r.Num(), r.Denom()))
}

func ceilRat(r *big.Rat) *big.Rat {
	return new(big.Rat).Neg(floorRat(new(big.Rat).Neg(r)))
}

// ratLCM is the least common multiple of two positive rationals:
// lcm(a/b, c/d) = lcm(a, c) / gcd(b, d).
func ratLCM(x, y *big.Rat) *big.Rat {
	gn := new(big.Int).GCD(nil, nil, x.Num(), y.Num())
	ln := new(big.Int).Mul(x.Num(), new(big.Int).Quo(y.Num(), gn))
	gd := new(big.Int).GCD(nil, nil, x.Denom(), y.Denom())
	return new(big.Rat).SetFrac(ln, gd)
}

// ratString renders a rational as a plain JSON number: an integer, or the
// exact finite decimal when the denominator is of the form 2^a*5^b.
func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	d := new(big.Int).Set(r.Denom())
	prec := 0
	for _, p := range []int64{2, 5} {
		n := 0
		bp := big.NewInt(p)
		for new(big.Int).Rem(d, bp).Sign() == 0 {
			d.Quo(d, bp)
			n++
		}
		prec = max(prec, n)
	}
	if d.Cmp(big.NewInt(1)) != 0 {
		prec = 20 // not a finite decimal; an approximation is the best we can do
	}
	return r.FloatString(prec)
}
