package validate

import (
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"
)

func compileProg(t *testing.T, src string) (*syntax.Regexp, *syntax.Prog) {
	t.Helper()
	re, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		t.Fatal(err)
	}
	return re, prog
}

// regexWidth: narrow for ordinary anchored patterns, the whole program
// for the unanchored counted repetitions that make matching expensive.
func TestRegexWidth(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		src      string
		min, max int // bounds on the width
		whole    bool
	}{
		{src: `^[a-z]+$`, min: 1, max: 4},
		{src: `^[0-9]{4}-[0-9]{2}-[0-9]{2}$`, min: 1, max: 4},
		{src: `^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$`, min: 3, max: 16},
		{src: `.{245}x0`, whole: true},
		{src: `^a.{240}[a-z]+0$`, min: 1, max: 8}, // anchored: one path through the repetition
	} {
		_, prog := compileProg(t, c.src)
		w := regexWidth(prog)
		switch {
		case w < 1 || w > len(prog.Inst):
			t.Errorf("%s: width %d outside 1..%d", c.src, w, len(prog.Inst))
		case c.whole && w < len(prog.Inst)-2:
			t.Errorf("%s: width %d, want about the whole program (%d)", c.src, w, len(prog.Inst))
		case !c.whole && (w < c.min || c.max > 0 && w > c.max):
			t.Errorf("%s: width %d, want %d..%d (program %d)", c.src, w, c.min, c.max, len(prog.Inst))
		}
	}
}

// The width bounds the threads Go's NFA keeps at any position, on random
// patterns and inputs: the simulation (threadsInFlight) runs the program
// on the real input, so it must never exceed the input-free bound.
func TestRegexWidthBoundsThreads(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(13, 2))
	atoms := []string{"a", "b", ".", "[a-c]", "[^a]", "(a|bc)", "(?:ab)*", "a?", "b+", "x{2,4}", "$", "^", `\b`}
	for range 500 {
		var sb strings.Builder
		if r.IntN(2) == 0 {
			sb.WriteString("^")
		}
		for range 1 + r.IntN(6) {
			sb.WriteString(atoms[r.IntN(len(atoms))])
		}
		src := sb.String()
		_, prog := compileProg(t, src)
		w := regexWidth(prog)
		for range 5 {
			in := make([]byte, r.IntN(12))
			for i := range in {
				in[i] = "abcx "[r.IntN(5)]
			}
			if got := threadsInFlight(prog, string(in)); got > w {
				t.Fatalf("%q on %q: %d threads in flight, width %d", src, in, got, w)
			}
		}
	}
}

// threadsInFlight runs prog as an unanchored NFA on s and returns the
// largest number of instructions live at one position.
func threadsInFlight(prog *syntax.Prog, s string) int {
	type set = map[uint32]bool
	var add func(st set, pc uint32, pos int)
	add = func(st set, pc uint32, pos int) {
		if st[pc] {
			return
		}
		st[pc] = true
		in := &prog.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			add(st, in.Out, pos)
			add(st, in.Arg, pos)
		case syntax.InstCapture, syntax.InstNop:
			add(st, in.Out, pos)
		case syntax.InstEmptyWidth:
			var before, after rune = -1, -1
			if pos > 0 {
				before = rune(s[pos-1])
			}
			if pos < len(s) {
				after = rune(s[pos])
			}
			if syntax.EmptyOp(in.Arg)&^syntax.EmptyOpContext(before, after) == 0 {
				add(st, in.Out, pos)
			}
		}
	}
	anchored := prog.StartCond()&syntax.EmptyBeginText != 0
	cur, most := set{}, 0
	for pos := 0; pos <= len(s); pos++ {
		if pos == 0 || !anchored {
			add(cur, uint32(prog.Start), pos)
		}
		most = max(most, len(cur))
		if pos == len(s) {
			break
		}
		next := set{}
		for pc := range cur {
			in := &prog.Inst[pc]
			switch in.Op {
			case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
				if in.MatchRune(rune(s[pos])) {
					add(next, in.Out, pos+1)
				}
			}
		}
		cur = next
	}
	return most
}

// parseWork finds the parsing work a program's size does not show.
func TestParseWork(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		src                string
		minTables, maxTabs int
		minFold, maxFold   int
	}{
		{src: `^[a-z]+_[0-9]+$`},
		{src: `^\\p{L}$`}, // an escaped backslash: no table
		{src: `^\p{L}+$`, minTables: 500, maxTabs: 2000},
		{src: `^\pL\pN$`, minTables: 600, maxTabs: 3000},
		{src: `^[\p{Lu}\p{Ll}]+$`, minTables: 1000, maxTabs: 4000}, // strided table ranges count one by one
		{src: `^\p{Greek}+$`, minTables: 10, maxTabs: 200},
		{src: `(?i)^[a-z]+$`, minFold: 26, maxFold: 200},
		{src: `(?i)[\x{42}-\x{1e942}]`, minFold: 100000, maxFold: 200000},
		{src: `(?i:[^a])`, minFold: 100000, maxFold: 300000},
		{src: `(?:[\x{42}-\x{1e942}])`}, // no folding
	} {
		re, _ := compileProg(t, c.src)
		tables, fold := parseWork(c.src, re)
		if tables < c.minTables || tables > c.maxTabs || fold < c.minFold || fold > c.maxFold {
			t.Errorf("%s: %d table ranges, %d folded runes; want %d..%d and %d..%d", c.src, tables, fold, c.minTables, c.maxTabs, c.minFold, c.maxFold)
		}
		if _, err := regexp.Compile(c.src); err != nil {
			t.Fatal(err)
		}
	}
}
