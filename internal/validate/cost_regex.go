package validate

import (
	"math/bits"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
)

// regexWidth bounds the number of instructions of prog that one match can
// have in flight at an input position, for any input. Go's three matchers
// (one-pass, bit-state backtracker, NFA) each do constant work per
// instruction in flight per position (the backtracker visits each
// instruction and position at most once), so a match costs at most about
// width × (positions + 1) steps, not len(prog.Inst) × (positions + 1):
// ^[a-z]+$ has 7 instructions and 3 in flight, zod's 116-instruction
// uuid pattern about 12. An unanchored .{245}x keeps 247 in flight, as
// many as it has, which is what makes it expensive.
//
// It simulates the NFA on an input of which every rune matches every rune
// instruction (so the set in flight after k runes contains the real one
// after any k runes), starting a new thread at every position unless the
// pattern is anchored at the start of the text. The sequence of sets is
// deterministic, so once a set repeats the maximum is known; if none
// repeats within a bound, the program size is the answer.
func regexWidth(prog *syntax.Prog) int {
	n := len(prog.Inst)
	if n > maxWidthProg {
		return n
	}
	words := (n + 63) / 64
	newSet := func() []uint64 { return make([]uint64, words) }
	// closure adds pc and everything reachable from it without consuming
	// input; at the start of the text only, "^" (EmptyBeginText) holds.
	var stack []uint32
	closure := func(set []uint64, pc uint32, atStart bool) {
		stack = append(stack[:0], pc)
		for len(stack) > 0 {
			pc := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if set[pc/64]&(1<<(pc%64)) != 0 {
				continue
			}
			set[pc/64] |= 1 << (pc % 64)
			in := &prog.Inst[pc]
			switch in.Op {
			case syntax.InstAlt, syntax.InstAltMatch:
				stack = append(stack, in.Out, in.Arg)
			case syntax.InstCapture, syntax.InstNop:
				stack = append(stack, in.Out)
			case syntax.InstEmptyWidth:
				if atStart || syntax.EmptyOp(in.Arg)&syntax.EmptyBeginText == 0 {
					stack = append(stack, in.Out)
				}
			}
		}
	}
	// after[pc]: what a rune instruction leads to, past the start
	after := make([][]uint64, n)
	for pc := range prog.Inst {
		switch prog.Inst[pc].Op {
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			after[pc] = newSet()
			closure(after[pc], prog.Inst[pc].Out, false)
		}
	}
	restart := newSet()
	if prog.StartCond()&syntax.EmptyBeginText == 0 {
		closure(restart, uint32(prog.Start), false)
	}
	cur := newSet()
	closure(cur, uint32(prog.Start), true)
	return widestSet(cur, restart, after)
}

// widestSet runs regexWidth's simulation from the set cur: each step is
// what cur's rune instructions lead to (after) and a new thread
// (restart). It returns the largest set seen once a set repeats, or the
// program size when none does within the bound.
func widestSet(cur, restart []uint64, after [][]uint64) int {
	n, words := len(after), len(cur)
	seen := map[string]bool{}
	width := 0
	for range n + maxWidthExtraSteps {
		size, key := 0, make([]byte, 0, 8*words)
		for _, w := range cur {
			size += bits.OnesCount64(w)
			key = append(key, byte(w), byte(w>>8), byte(w>>16), byte(w>>24), byte(w>>32), byte(w>>40), byte(w>>48), byte(w>>56))
		}
		width = max(width, size)
		if seen[string(key)] {
			return max(width, 1)
		}
		seen[string(key)] = true
		next := make([]uint64, words)
		copy(next, restart)
		for i, w := range cur {
			for w != 0 {
				pc := i*64 + bits.TrailingZeros64(w)
				w &= w - 1
				if a := after[pc]; a != nil {
					for j := range next {
						next[j] |= a[j]
					}
				}
			}
		}
		cur = next
	}
	return n
}

// Bounds on regexWidth's own work: programs above maxWidthProg
// instructions, or whose sets have not repeated after their size plus
// maxWidthExtraSteps runes, count as wide as they are.
const (
	maxWidthProg       = 512
	maxWidthExtraSteps = 64
)

// parseWork measures what parsing src costs besides its program size,
// which matters for patternProperties (the library recompiles their
// patterns for every key): each \p{X} or \P{X} copies Unicode table X
// (\p{L} has 650 ranges: 50 µs and 50 KiB per compile, against 5 µs for
// ^[a-z]+$), and under case folding ((?i)) every rune of a class is folded
// one by one ((?i)[\x{42}-\x{1e942}]: 2 ms per compile). The folded runes
// are bounded by those of the parsed classes within the folding range.
func parseWork(src string, re *syntax.Regexp) (tableRanges, foldRunes int) {
	fold := foldFlag.MatchString(src)
	for i := 0; i+1 < len(src); i++ {
		if src[i] != '\\' {
			continue
		}
		i++
		if src[i] != 'p' && src[i] != 'P' || i+1 >= len(src) {
			continue
		}
		name := src[i+1 : i+2]
		if name == "{" {
			end := strings.IndexByte(src[i+1:], '}')
			if end < 0 {
				continue
			}
			name = src[i+2 : i+1+end]
		}
		i += len(name)
		tableRanges += unicodeTableRanges(strings.TrimPrefix(name, "^"), fold)
	}
	if fold {
		foldRunes = classRunes(re)
		if strings.Contains(src, "[^") {
			// a negated class is folded before it is negated: its
			// parsed form does not show what was folded
			foldRunes += maxFold - minFold + 1
		}
	}
	return tableRanges, foldRunes
}

// minFold and maxFold bound the runes regexp/syntax folds one by one.
const minFold, maxFold = 0x41, 0x1e943

// foldFlag finds a flag group that turns case folding on; a false match
// only over-charges.
var foldFlag = regexp.MustCompile(`\(\?[a-zA-Z-]*i`)

// unicodeTableRanges counts the ranges the parser appends for \p{name}:
// a table range with a stride is appended rune by rune, and under case
// folding the table's fold table follows.
func unicodeTableRanges(name string, fold bool) int {
	t, f := unicode.Categories[name], unicode.FoldCategory[name]
	if t == nil {
		t, f = unicode.Scripts[name], unicode.FoldScript[name]
	}
	if t == nil {
		return 1 // Any, or a name the parser refuses
	}
	n := tableRanges(t)
	if fold && f != nil {
		n += tableRanges(f)
	}
	return n
}

func tableRanges(t *unicode.RangeTable) int {
	n := 0
	for _, r := range t.R16 {
		n += (int(r.Hi)-int(r.Lo))/int(r.Stride) + 1
		if r.Stride == 1 {
			n -= int(r.Hi) - int(r.Lo)
		}
	}
	for _, r := range t.R32 {
		n += (int(r.Hi)-int(r.Lo))/int(r.Stride) + 1
		if r.Stride == 1 {
			n -= int(r.Hi) - int(r.Lo)
		}
	}
	return n
}

// classRunes counts the runes of re's character classes within the range
// regexp/syntax folds rune by rune (minFold-maxFold in its parse.go).
func classRunes(re *syntax.Regexp) int {
	n := 0
	if re.Op == syntax.OpCharClass {
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if lo, hi := max(re.Rune[i], minFold), min(re.Rune[i+1], maxFold); lo <= hi {
				n += int(hi-lo) + 1
			}
		}
	}
	for _, sub := range re.Sub {
		n += classRunes(sub)
	}
	return n
}
