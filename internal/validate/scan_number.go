package validate

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// numInfo is a syntactically valid, accepted number literal: its float64
// value and its exact decimal value as digits × 10^exp (digits without
// leading or trailing zeros, "" for zero).
type numInfo struct {
	lit    string
	f      float64
	neg    bool
	digits string
	exp    int
	litExp int // the exponent written in the literal
}

func (n *numInfo) isZero() bool { return n.digits == "" }

// isInt reports whether the exact value is an integer.
func (n *numInfo) isInt() bool { return n.digits == "" || n.exp >= 0 }

// exactEqual compares exact decimal values (-0 equals 0).
func (n *numInfo) exactEqual(o *numInfo) bool {
	if n.isZero() || o.isZero() {
		return n.isZero() && o.isZero()
	}
	return n.neg == o.neg && n.digits == o.digits && n.exp == o.exp
}

// cmpDecimal compares exact decimal values.
func cmpDecimal(a, b *numInfo) int {
	sa, sb := sign(a), sign(b)
	if sa != sb {
		if sa < sb {
			return -1
		}
		return 1
	}
	if sa == 0 {
		return 0
	}
	c := cmpMagnitude(a, b)
	if sa < 0 {
		return -c
	}
	return c
}

func sign(n *numInfo) int {
	switch {
	case n.isZero():
		return 0
	case n.neg:
		return -1
	}
	return 1
}

// cmpMagnitude compares |a| and |b| (both non-zero).
func cmpMagnitude(a, b *numInfo) int {
	// the position of the leading digit: value in [10^(p-1), 10^p)
	pa, pb := len(a.digits)+a.exp, len(b.digits)+b.exp
	if pa != pb {
		if pa < pb {
			return -1
		}
		return 1
	}
	for i := 0; i < len(a.digits) || i < len(b.digits); i++ {
		da, db := byte('0'), byte('0')
		if i < len(a.digits) {
			da = a.digits[i]
		}
		if i < len(b.digits) {
			db = b.digits[i]
		}
		if da != db {
			if da < db {
				return -1
			}
			return 1
		}
	}
	return 0
}

// parseNumber checks a literal that matched the JSON number grammar: its
// value must be zero or within the range of a 64-bit float, which rounds
// it to a finite number other than zero.
func parseNumber(lit string) (*numInfo, error) {
	n := &numInfo{lit: lit}
	s := lit
	if s[0] == '-' {
		n.neg = true
		s = s[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.Replace(s, "E", "e", 1), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	trimmed := strings.TrimRight(digits, "0")
	if hasExp {
		e, ok := smallInt(expPart)
		if !ok {
			// beyond ±10^9: outside the range, or (for zero) far too long
			// in plain notation, either way
			e = 1 << 30
			if strings.HasPrefix(expPart, "-") {
				e = -e
			}
		}
		n.litExp = e
	}
	n.digits = trimmed
	if trimmed != "" {
		n.exp = n.litExp - len(frac) + len(digits) - len(trimmed)
	}
	if trimmed == "" && (n.litExp > MaxZeroExponent || n.litExp < -MaxZeroExponent) {
		return nil, fmt.Errorf("number %s has an exponent beyond ±%d, which PostgreSQL cannot store; it is 0, write it so", shortNumber(lit), MaxZeroExponent)
	}
	if err := n.inRange(); err != nil {
		return nil, err
	}
	return n, nil
}

// inRange sets n.f, refusing a value that is not zero and rounds to an
// infinity or to zero as a 64-bit float.
func (n *numInfo) inRange() error {
	if n.isZero() {
		n.f = 0
		return nil
	}
	// the leading digit's position: the value is in [10^(p-1), 10^p)
	if p := len(n.digits) + n.exp; p > 310 || p < -330 {
		return n.rangeError(p > 0)
	}
	f, err := strconv.ParseFloat(n.canonical(), 64)
	if (err != nil && !errors.Is(err, strconv.ErrRange)) || math.IsNaN(f) {
		return fmt.Errorf("number %s cannot be read as a 64-bit float", shortNumber(n.lit))
	}
	if math.IsInf(f, 0) || f == 0 {
		return n.rangeError(f != 0)
	}
	n.f = f
	return nil
}

func (n *numInfo) rangeError(large bool) error {
	if large {
		return fmt.Errorf("number %s is beyond the range of a 64-bit float (at most ±1.7976931348623157e308), so it cannot be stored; send a smaller number", shortNumber(n.lit))
	}
	return fmt.Errorf("number %s is too close to zero for a 64-bit float (the smallest is %s), so it cannot be stored; send 0 or a larger number", shortNumber(n.lit), smallestFloat)
}

// canonical renders the exact value as digits×10^exp, short whatever the
// literal's length.
func (n *numInfo) canonical() string {
	sign := ""
	if n.neg {
		sign = "-"
	}
	return sign + n.digits + "e" + strconv.Itoa(n.exp)
}

// shortNumber quotes a literal in a message, cut after 40 characters.
func shortNumber(lit string) string {
	if len(lit) > 40 {
		return lit[:40] + "…"
	}
	return lit
}

// plainLen is the length of an accepted number literal once PostgreSQL's
// numeric type (and so jsonb) has rendered it, in plain decimal notation:
// the scale is the written fraction digits minus the exponent (at least
// 0), leading zeros go, and zero has no sign ("123e65" becomes 68 digits,
// "1.50e2" becomes "150", "1.5e-3" becomes "0.0015").
func plainLen(lit string, ni *numInfo) int {
	s := strings.TrimPrefix(lit, "-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	scale := max(0, len(frac)-ni.litExp)
	n := 1 // the integer part, at least "0"
	if !ni.isZero() {
		all := intPart + frac
		leading := len(all) - len(strings.TrimLeft(all, "0"))
		n = max(1, len(intPart)+ni.litExp-leading)
		if ni.neg {
			n++
		}
	}
	if scale > 0 {
		n += 1 + scale
	}
	return n
}

// smallInt parses an optionally signed run of digits, reporting false when
// it exceeds ±10^9.
func smallInt(s string) (int, bool) {
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	s = strings.TrimLeft(s, "0")
	if len(s) > 9 {
		return 0, false
	}
	v := 0
	for _, c := range []byte(s) {
		v = v*10 + int(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}
