package validate

import (
	"fmt"
	"math/big"
	"strconv"
)

// checkPrecision flags an instance number that equals a literal number as
// float64 but not exactly: the library would call them equal.
func (e *estimate) checkPrecision(v *vnode, lits []*numInfo, keyword string) {
	if len(lits) == 0 || v.nums == 0 || e.imprecise != nil || e.over {
		return
	}
	forNumbers(v, func(ni *numInfo) bool {
		for _, l := range lits {
			if l.f == ni.f && !l.exactEqual(ni) {
				e.flagImprecise(ni, l, keyword)
				return false
			}
		}
		return true
	})
}

func (e *estimate) flagImprecise(ni, other *numInfo, keyword string) {
	e.imprecise = &ValueError{
		Location: pointerOf(e.root, ni), Keyword: keyword,
		Message: fmt.Sprintf("number %s cannot be checked against %s: it differs from %s only beyond 64-bit float precision, which the validator compares; send it with fewer significant digits",
			ni.lit, keyword, other.lit),
	}
}

// forNumbers calls f for each number in v's subtree until f returns false.
func forNumbers(v *vnode, f func(*numInfo) bool) bool {
	if v.kind == kNumber {
		return f(v.num)
	}
	if v.nums == 0 {
		return true
	}
	for i := range v.kids {
		if !forNumbers(&v.kids[i], f) {
			return false
		}
	}
	return true
}

// pointerOf finds the JSON Pointer of the number ni inside root.
func pointerOf(root *vnode, ni *numInfo) string {
	var find func(v *vnode, ptr string) (string, bool)
	find = func(v *vnode, ptr string) (string, bool) {
		if v.num == ni {
			return ptr, true
		}
		for i := range v.kids {
			seg := strconv.Itoa(i)
			if v.kind == kObject {
				seg = escapePointer(v.keys[i].name)
			}
			if p, ok := find(&v.kids[i], ptr+"/"+seg); ok {
				return p, true
			}
		}
		return "", false
	}
	p, _ := find(root, "")
	return p
}

func digits(i int) int {
	n := 1
	for i >= 10 {
		i /= 10
		n++
	}
	return n
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// multipleOf decides whether x is an integer multiple of m when the
// arithmetic fits in uint64; known is false otherwise.
func multipleOf(x, m *numInfo) (is, known bool) {
	if x.isZero() {
		return true, true
	}
	dx, ok1 := strconv.ParseUint(x.digits, 10, 64)
	dm, ok2 := strconv.ParseUint(m.digits, 10, 64)
	if ok1 != nil || ok2 != nil || dm == 0 {
		return false, false
	}
	// x/m = (dx/dm) × 10^(x.exp-m.exp)
	k := x.exp - m.exp
	for ; k > 0; k-- {
		if dx > (1<<64-1)/10 {
			return false, false
		}
		dx *= 10
	}
	for ; k < 0; k++ {
		if dm > (1<<64-1)/10 {
			return false, false
		}
		dm *= 10
	}
	return dx%dm == 0, true
}

// multipleOfBig decides x = k × m for an integer k exactly, whatever the
// sizes (literals are at most MaxNumberLen characters, values within
// float64's range).
func multipleOfBig(x, m *numInfo) bool {
	if x.isZero() {
		return true
	}
	dx, ok1 := new(big.Int).SetString(x.digits, 10)
	dm, ok2 := new(big.Int).SetString(m.digits, 10)
	if !ok1 || !ok2 || dm.Sign() == 0 {
		return false
	}
	// x/m = (dx/dm) × 10^(x.exp-m.exp)
	if k := x.exp - m.exp; k > 0 {
		dx.Mul(dx, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil))
	} else if k < 0 {
		dm.Mul(dm, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-k)), nil))
	}
	return new(big.Int).Rem(dx, dm).Sign() == 0
}
