package validate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"runtime"
	"strings"
	"sync"

	"github.com/xeipuuv/gojsonschema"
)

// Large enums of strings.
//
// gojsonschema checks, while compiling, that the values of an enum are
// distinct by comparing each with every one before it, a cost that grows
// with the square of their number (2,048 values of 17 bytes took 50 ms,
// 5,000 about 400 ms), and scans the list for every value it validates.
// Real enums of strings run to thousands of values (time zones, languages,
// a game engine's 2,461 console variables), so an enum of more than
// setEnumMin values, all strings, is checked as a set instead: the library
// is given {"allOf": [..., {"type": "string", "format": F}]}, where F is a
// format of our own (enumFormat and a hash of the values) whose checker
// looks the string up. That is exactly the enum: a value that is not a
// string is in no such enum. Its error reads as the enum's own ("must be
// one of ..."). The checker is registered in the library's process-wide
// format registry while a compiled schema uses it, as ECMAScript patterns
// are (ecma.go), under a name no caller can write (a format chatd does
// not check is dropped before the library sees the document).

// setEnumMin is the largest enum of strings the library checks itself.
const setEnumMin = 256

// enumFormat prefixes the format name standing for an enum of strings.
const enumFormat = "\x00enum\x00"

// enumSet is one registered enum of strings.
type enumSet struct {
	name   string
	values map[string]bool
	list   string // the first values, as the library would list them, for messages
	refs   int    // compiled schemas using it (enumMu)
}

var (
	enumMu       sync.Mutex
	enumRegistry = map[string]*enumSet{}
)

// setEnum returns the strings of an enum checked as a set, or nil when the
// library checks it itself (it is small, or has a value that is not a
// string).
func setEnum(v any) []string {
	arr, _ := v.([]any)
	if len(arr) <= setEnumMin {
		return nil
	}
	out := make([]string, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil
		}
		out[i] = s
	}
	return out
}

// enumSetName names the format of an enum of strings by its values.
func enumSetName(values []string) string {
	h := sha256.New()
	for _, v := range values {
		h.Write([]byte(v))
		h.Write([]byte{0})
	}
	return enumFormat + hex.EncodeToString(h.Sum(nil)[:16])
}

// acquireEnums registers the enums of one compiled schema (found by the
// screening, by name); releaseEnums undoes it.
func acquireEnums(sets map[string][]string) []*enumSet {
	enumMu.Lock()
	defer enumMu.Unlock()
	out := make([]*enumSet, 0, len(sets))
	for _, name := range sortedKeysOf(sets) {
		e := enumRegistry[name]
		if e == nil {
			e = newEnumSet(name, sets[name])
			enumRegistry[name] = e
			gojsonschema.FormatCheckers.Add(name, enumChecker{e})
		}
		e.refs++
		out = append(out, e)
	}
	return out
}

func newEnumSet(name string, values []string) *enumSet {
	e := &enumSet{name: name, values: make(map[string]bool, len(values))}
	var b strings.Builder
	for i, v := range values {
		e.values[v] = true
		if b.Len() < maxMessageBytes {
			if i > 0 {
				b.WriteString(", ")
			}
			q, _ := json.Marshal(v)
			b.Write(q)
		}
	}
	e.list = b.String()
	return e
}

func releaseEnums(sets []*enumSet) {
	enumMu.Lock()
	defer enumMu.Unlock()
	for _, e := range sets {
		if e.refs--; e.refs == 0 {
			delete(enumRegistry, e.name)
			gojsonschema.FormatCheckers.Remove(e.name)
		}
	}
}

// holdEnums ties the registration of sets to the life of s.
func holdEnums(s *Schema, sets []*enumSet) {
	if len(sets) > 0 {
		runtime.AddCleanup(s, releaseEnums, sets)
	}
}

// enumSetOf returns the registered set behind a format name.
func enumSetOf(format string) *enumSet {
	if !strings.HasPrefix(format, enumFormat) {
		return nil
	}
	enumMu.Lock()
	defer enumMu.Unlock()
	return enumRegistry[format]
}

// enumChecker is the library's format checker for one enum: a string is
// in it or not; anything else is left to the "type" beside it.
type enumChecker struct{ e *enumSet }

func (c enumChecker) IsFormat(input any) bool {
	s, ok := input.(string)
	return !ok || c.e.values[s]
}
