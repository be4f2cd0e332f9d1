package validate

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/xeipuuv/gojsonschema"
)

// ECMA-262 patterns.
//
// JSON Schema patterns are ECMA-262 regular expressions; Go's regexp (RE2)
// runs most of them, and stays the engine for those, but not lookaround or
// backreferences ("^(?!@@)[\w@]+$"). A "pattern" RE2 cannot parse is
// compiled by github.com/dlclark/regexp2 (v2) in ECMAScript mode with
// Unicode semantics (what ajv, the catalogue's validator, uses). That
// engine backtracks, so a match can take exponential time: every match has
// a deadline (MatchTimeout) and a bounded backtracking stack, and its
// measured time is charged to the validation's work budget (cost.go).
//
// gojsonschema knows only Go's regexp, so such a pattern reaches it as a
// format of our own (ecmaFormat + source), whose checker runs the ECMAScript
// match: inside anyOf, not or if, it decides as a pattern would. The
// checker is registered in the library's process-wide format registry
// while a compiled schema uses it (reference-counted, released when the
// last such schema is garbage), under a name no caller can write (a
// format chatd does not check is dropped before the library sees the
// document). A patternProperties key the library matches with Go's
// regexp by its source, which no format can stand in for: such a key is
// handled by specialising the document (ecma_keys.go).

// ecmaFormat prefixes the format name standing for an ECMAScript pattern.
const ecmaFormat = "\x00ecma\x00"

// ecmaMatchTimeout bounds one ECMAScript match in wall time: twice the
// budget, so that a loaded machine's stretched wall clock does not cut a
// match short that fits the budget; the estimator charges each match's CPU
// time (twice: its own run and the library's), so a value whose matches
// take longer than the budget is refused anyway.
const ecmaMatchTimeout = 2 * time.Duration(BudgetTime)

// ecmaStackSlots bounds the backtracking stack of one match (8 bytes a
// slot): a match needing more fails, and the value is refused as too
// expensive.
const ecmaStackSlots = 1 << 17

func init() {
	// regexp2 checks deadlines against a clock a goroutine advances
	// every half period, and adds a period to each deadline: the default
	// (100 ms) would let a match run 4-5 times the budget. The goroutine
	// runs only while deadlines are pending.
	regexp2.SetTimeoutCheckPeriod(2 * time.Millisecond)
}

// ecmaEntry is one registered ECMAScript pattern.
type ecmaEntry struct {
	src      string
	re       *regexp2.Regexp
	refs     int          // compiled schemas using it (ecmaMu)
	failures atomic.Int64 // library matches that timed out or overflowed
}

var (
	ecmaMu       sync.Mutex
	ecmaRegistry = map[string]*ecmaEntry{}
)

// compileECMA compiles a pattern in the ECMAScript dialect.
func compileECMA(src string) (*regexp2.Regexp, error) {
	re, err := regexp2.Compile(src, regexp2.ECMAScript|regexp2.Unicode, regexp2.OptionMaxBacktrackingStackSize(ecmaStackSlots))
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = ecmaMatchTimeout
	return re, nil
}

// acquireECMA registers the patterns of one compiled schema (compiled by
// the screening); releaseECMA undoes it.
func acquireECMA(srcs []string, compiled map[string]*regexp2.Regexp) []*ecmaEntry {
	ecmaMu.Lock()
	defer ecmaMu.Unlock()
	out := make([]*ecmaEntry, 0, len(srcs))
	for _, src := range srcs {
		e := ecmaRegistry[src]
		if e == nil {
			e = &ecmaEntry{src: src, re: compiled[src]}
			ecmaRegistry[src] = e
			gojsonschema.FormatCheckers.Add(ecmaFormat+src, ecmaChecker{e})
		}
		e.refs++
		out = append(out, e)
	}
	return out
}

func releaseECMA(entries []*ecmaEntry) {
	ecmaMu.Lock()
	defer ecmaMu.Unlock()
	releaseLocked(entries)
}

func releaseLocked(entries []*ecmaEntry) {
	for _, e := range entries {
		if e.refs--; e.refs == 0 {
			delete(ecmaRegistry, e.src)
			gojsonschema.FormatCheckers.Remove(ecmaFormat + e.src)
		}
	}
}

// holdECMA ties the registration of entries to the life of s.
func holdECMA(s *Schema, entries []*ecmaEntry) {
	if len(entries) == 0 {
		return
	}
	s.ecma = entries
	runtime.AddCleanup(s, releaseECMA, entries)
}

// ecmaEntryOf returns the registered entry behind a format name.
func ecmaEntryOf(format string) *ecmaEntry {
	src, ok := strings.CutPrefix(format, ecmaFormat)
	if !ok {
		return nil
	}
	ecmaMu.Lock()
	defer ecmaMu.Unlock()
	return ecmaRegistry[src]
}

// ecmaChecker is the library's format checker for one pattern. A match
// that fails (timeout, stack) counts as a mismatch and is counted, so that
// Schema.run reports the value as too expensive instead of its verdict.
type ecmaChecker struct{ e *ecmaEntry }

func (c ecmaChecker) IsFormat(input any) bool {
	s, ok := input.(string)
	if !ok {
		return true
	}
	matched, err := c.e.re.MatchString(s)
	if err != nil {
		c.e.failures.Add(1)
		return false
	}
	return matched
}

// ecmaFailures sums the failed library matches of a schema's patterns.
func ecmaFailures(entries []*ecmaEntry) int64 {
	var n int64
	for _, e := range entries {
		n += e.failures.Load()
	}
	return n
}
