package validate

import (
	"errors"
	"fmt"
	"regexp/syntax"
)

// pattern checks one regular expression: Go RE2 syntax (what the library
// compiles), a bounded source and a bounded compiled program. Each
// pattern is compiled here once; its program size feeds the cost model.
// A pattern RE2 cannot parse (lookaround, backreferences) is run by the
// ECMAScript engine instead: a "pattern" as a format (ecma.go), a
// patternProperties key (key) by specialising the document (ecma_keys.go).
func (s *screener) pattern(src, ptr string, key bool) error {
	s.patterns++
	if s.patterns > MaxPatterns {
		return s.limit(ptr, "more than %d patterns (pattern keywords and patternProperties keys) in one schema", MaxPatterns)
	}
	if len(src) > MaxPatternBytes {
		return fail(ptr, "pattern is %d bytes, more than the limit of %d", len(src), MaxPatternBytes)
	}
	n, err := patternInsts(src)
	if err != nil {
		return s.ecmaPattern(src, ptr, key, err)
	}
	if n > 4*MaxPatternInsts {
		return fail(ptr, "pattern compiles to about %d instructions, more than the limit of %d (counted repetitions such as .{1000} are expensive)", n, MaxPatternInsts)
	}
	if n > MaxPatternInsts {
		return fail(ptr, "pattern compiles to %d instructions, more than the limit of %d (counted repetitions such as .{1000} are expensive)", n, MaxPatternInsts)
	}
	if s.patInsts += n; s.patInsts > MaxPatternTotal {
		return s.limit(ptr, "the patterns compile to more than %d instructions together", MaxPatternTotal)
	}
	s.insts[src] = n
	return nil
}

// patternInsts compiles a pattern the way regexp.Compile does and returns
// its program size. Counted repetitions make small sources expand (256
// bytes of .{1000} compile to 36,002 instructions in about 150 ms), so a
// size estimated on the parsed tree refuses those before they expand.
func patternInsts(src string) (int, error) {
	re, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return 0, err
	}
	if n := estimateInsts(re); n > 4*MaxPatternInsts {
		return n, nil
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0, err
	}
	return len(prog.Inst), nil
}

// estimateInsts approximates the program size of a parsed expression
// (within a small factor either way), saturating at a million.
func estimateInsts(re *syntax.Regexp) int {
	const most = 1 << 20
	sum := func(subs []*syntax.Regexp) int {
		n := 0
		for _, s := range subs {
			n = min(most, n+estimateInsts(s))
		}
		return n
	}
	switch re.Op {
	case syntax.OpLiteral:
		return max(1, len(re.Rune))
	case syntax.OpConcat:
		return sum(re.Sub)
	case syntax.OpAlternate:
		return min(most, sum(re.Sub)+len(re.Sub))
	case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return min(most, sum(re.Sub)+2)
	case syntax.OpRepeat:
		reps := re.Max
		if reps < 0 {
			reps = re.Min + 1
		}
		return min(most, sum(re.Sub)*max(reps, 1)+reps)
	}
	return 1
}

// ecmaPattern admits a pattern that RE2 cannot parse when the ECMAScript
// engine compiles it, naming the construct otherwise.
func (s *screener) ecmaPattern(src, ptr string, key bool, re2 error) error {
	construct := re2.Error()
	var se *syntax.Error
	if errors.As(re2, &se) {
		construct = fmt.Sprintf("%s `%s`", se.Code, se.Expr)
	}
	re, err := compileECMA(src)
	if err != nil {
		return fail(ptr, "pattern is neither ECMAScript nor RE2 syntax: %v (RE2: %s)", err, construct)
	}
	if key {
		s.ecmaKeys[src] = re
		s.ecmaKeyPtrs = append(s.ecmaKeyPtrs, ptr)
		return nil
	}
	s.ecma[src] = re
	return nil
}
