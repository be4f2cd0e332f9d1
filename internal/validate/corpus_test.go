package validate

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	oracle "github.com/santhosh-tekuri/jsonschema/v6"
)

// dialectCorpus is the real-world part of the dialect corpus
// (testdata/dialects/README.md); the JSON-Schema-Test-Suite's draft4,
// draft6 and draft7 directories are the rest.
const dialectCorpus = "testdata/dialects/corpus.jsonl.gz"

// corpusEntry is one schema document of the corpus and the instances we
// have for it.
type corpusEntry struct {
	Name    string            `json:"name"`
	Source  string            `json:"source"`
	Schema  json.RawMessage   `json:"schema"`
	Valid   []json.RawMessage `json:"valid"`
	Invalid []json.RawMessage `json:"invalid"`
}

// loadDialectCorpus reads the corpus: the real-world file, the required
// tests of the suite for each dialect (a group is one document), and,
// when CHATD_DIALECT_CORPUS names a directory, every *.json file below it
// as a schema without instances (such as JSONSchemaBench's data
// directory, whose licences do not let it be kept here).
func loadDialectCorpus(t testing.TB) []corpusEntry {
	t.Helper()
	f, err := os.Open(dialectCorpus)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []corpusEntry
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var e corpusEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"draft4", "draft6", "draft7"} {
		out = append(out, suiteEntries(t, d)...)
	}
	if dir := os.Getenv("CHATD_DIALECT_CORPUS"); dir != "" {
		out = append(out, dirEntries(t, dir)...)
	}
	return out
}

// suiteEntries are the required test groups of one dialect of the
// JSON-Schema-Test-Suite, those of remote references excepted (they name
// documents that would have to be fetched).
func suiteEntries(t testing.TB, draft string) []corpusEntry {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "json-schema-test-suite", draft, "*.json"))
	if err != nil || len(files) < 20 {
		t.Fatalf("the %s suite: %d files, %v", draft, len(files), err)
	}
	var out []corpusEntry
	for _, file := range files {
		if filepath.Base(file) == "refRemote.json" {
			continue
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var groups []suiteGroup
		if err := json.Unmarshal(raw, &groups); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, g := range groups {
			e := corpusEntry{Name: draft + "/" + filepath.Base(file) + "/" + g.Description, Source: "suite-" + draft,
				Schema: withDialect(t, g.Schema, draft)}
			for _, tc := range g.Tests {
				if tc.Valid {
					e.Valid = append(e.Valid, tc.Data)
				} else {
					e.Invalid = append(e.Invalid, tc.Data)
				}
			}
			out = append(out, e)
		}
	}
	return out
}

// dirEntries reads every *.json file below dir as a schema.
func dirEntries(t testing.TB, dir string) []corpusEntry {
	t.Helper()
	var out []corpusEntry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, corpusEntry{Name: rel, Source: "dir:" + strings.Split(rel, string(filepath.Separator))[0], Schema: raw})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// corpusOracle compiles a document with the oracle in its own dialect
// (Draft-07 when it declares none, as chatd reads it), asserting the
// formats chatd checks and, like chatd, no others: the oracle knows no
// idn-email, which is its email checker here.
func corpusOracle(raw []byte) (*oracle.Schema, error) {
	doc, err := oracle.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := oracle.NewCompiler()
	c.DefaultDraft(oracle.Draft7)
	c.AssertFormat()
	for _, name := range []string{"duration", "period", "semver"} {
		c.RegisterFormat(&oracle.Format{Name: name, Validate: func(any) error { return nil }})
	}
	c.RegisterFormat(&oracle.Format{Name: "idn-email", Validate: oracleEmail})
	c.UseLoader(noLoader{})
	c.UseRegexpEngine(oracleRegexp)
	if err := c.AddResource("urn:chatd:corpus", doc); err != nil {
		return nil, err
	}
	return c.Compile("urn:chatd:corpus")
}

// oracleEmail is the oracle's own email format check.
func oracleEmail(v any) error {
	emailOnce.Do(func() {
		c := oracle.NewCompiler()
		c.AssertFormat()
		if err := c.AddResource("urn:chatd:email", map[string]any{"format": "email"}); err != nil {
			panic(err)
		}
		emailSchema = c.MustCompile("urn:chatd:email")
	})
	return emailSchema.Validate(v)
}

var (
	emailOnce   sync.Once
	emailSchema *oracle.Schema
)

// corpusTally is what TestDialectCorpus counts.
type corpusTally struct {
	documents, admitted int
	causes              map[string]int
	bySource            map[string][2]int // admitted, documents
	instances, agree    int
	scanRefused         int
	budget              []string
	disagreements       []string
	unexplained         []string
	compile             []time.Duration
	slowest             []timedDoc // the slowest admissions, slowest first
}

type timedDoc struct {
	name string
	took time.Duration
}

// TestDialectCorpus: of the Draft-04, -06 and -07 documents of the corpus
// at least 98 % are admitted as written; every refusal names a cause that
// stays (a reference to another document, a cap, a typo, a reference
// cycle, a number, a pattern no engine parses, something that cannot be
// checked exactly, a key written twice, a keyword the document's dialect
// removed, an unknown dialect, or a document the oracle refuses too); on the
// admitted ones chatd and the oracle, in the document's own dialect,
// agree on every instance (the corpus's and generated ones), those the
// work budget refuses included (validated without it, to compare); and
// the budget refuses at most one value in 200 (values the library itself
// takes tens of milliseconds on: web-types', renovate's). It logs the
// admission's CPU time (median, p99), and each value the budget refused,
// with what the library and the oracle took on it.
func TestDialectCorpus(t *testing.T) {
	t.Parallel()
	tl := &corpusTally{causes: map[string]int{}, bySource: map[string][2]int{}}
	for _, e := range loadDialectCorpus(t) {
		tl.entry(t, e)
	}
	tl.report(t)
	if float64(tl.admitted) < 0.98*float64(tl.documents) {
		t.Errorf("admitted %d of %d documents, below 98 %%", tl.admitted, tl.documents)
	}
	for _, u := range tl.unexplained {
		t.Errorf("refused without a cause that stays: %s", u)
	}
	for _, d := range tl.disagreements {
		t.Errorf("disagreement: %s", d)
	}
	for _, b := range tl.budget {
		t.Logf("refused by the work budget: %s", b)
	}
	if len(tl.budget)*200 > tl.instances {
		t.Errorf("the work budget refused %d of %d values", len(tl.budget), tl.instances)
	}
}

func (tl *corpusTally) entry(t *testing.T, e corpusEntry) {
	tl.documents++
	src := tl.bySource[e.Source]
	src[1]++
	var s *Schema
	var err error
	took := threadCPU(func() { s, err = Compile(e.Schema) }) // what other work on the machine takes does not count
	tl.compile = append(tl.compile, took)
	tl.slowest = append(tl.slowest, timedDoc{e.Name, took})
	slices.SortFunc(tl.slowest, func(a, b timedDoc) int { return int(b.took - a.took) })
	tl.slowest = tl.slowest[:min(len(tl.slowest), 3)]
	if err != nil {
		tl.bySource[e.Source] = src
		tl.refused(t, e, err)
		return
	}
	tl.admitted++
	src[0]++
	tl.bySource[e.Source] = src
	o, oerr := corpusOracle(e.Schema)
	if oerr != nil {
		t.Logf("%s: admitted, but the oracle refuses it: %.200s", e.Name, oerr)
		return
	}
	insts := slices.Concat(e.Valid, e.Invalid, sampleInstances(e.Schema))
	for i, inst := range insts {
		tl.instance(t, e.Name, i, s, o, inst)
	}
}

// refused records a refusal and its cause.
func (tl *corpusTally) refused(t *testing.T, e corpusEntry, err error) {
	var se *ScanError
	if !errors.As(err, &se) || se.Detail == "" {
		tl.unexplained = append(tl.unexplained, fmt.Sprintf("%s: %v", e.Name, err))
		return
	}
	cause := stayingCause(se)
	if cause == "" {
		if _, oerr := corpusOracle(e.Schema); oerr != nil {
			cause = "invalid (the oracle refuses it too)"
		}
	}
	if cause == "" {
		tl.causes["other"]++
		tl.unexplained = append(tl.unexplained, fmt.Sprintf("%s: %.300s", e.Name, se.Error()))
		return
	}
	tl.causes[cause]++
	t.Logf("refused %s (%s): %.200s", e.Name, cause, se.Error())
}

func (tl *corpusTally) instance(t *testing.T, name string, i int, s *Schema, o *oracle.Schema, inst json.RawMessage) {
	if _, err := decodeTree(inst, ValueLimits); err != nil {
		tl.scanRefused++
		return
	}
	doc, err := oracle.UnmarshalJSON(bytes.NewReader(inst))
	if err != nil {
		t.Fatalf("%s #%d: %v", name, i, err)
	}
	r := s.Validate(inst)
	start := time.Now()
	oValid := o.Validate(doc) == nil
	took := time.Since(start)
	tl.instances++
	if len(r.Errors) > 0 && r.Errors[0].Keyword == CodeBudget {
		// the verdict the library would give, compared all the same
		r = tl.overBudget(t, name, i, s, inst, took)
	}
	if r.Valid() == oValid {
		tl.agree++
		return
	}
	tl.disagreements = append(tl.disagreements, fmt.Sprintf("%s #%d %.200s: chatd valid=%v (%.200s), oracle valid=%v",
		name, i, inst, r.Valid(), r.Summary(), oValid))
}

// overBudget validates a value the work budget refused without the
// budget, and records how long the library and the oracle took.
func (tl *corpusTally) overBudget(t *testing.T, name string, i int, s *Schema, inst json.RawMessage, oracleTook time.Duration) Result {
	tree, err := decodeTree(inst, ValueLimits)
	if err != nil {
		t.Fatal(err)
	}
	compiled := s.compiled
	if len(s.ecmaKeys) > 0 {
		if compiled, _, _, err = s.specialize(tree); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	r := s.run(compiled, tree.val)
	took := time.Since(start)
	tl.budget = append(tl.budget, fmt.Sprintf("%s #%d (%d bytes): the library took %s, the oracle %s", name, i, len(inst), took, oracleTook))
	return r
}

func (tl *corpusTally) report(t *testing.T) {
	slices.Sort(tl.compile)
	pct := func(p float64) time.Duration { return tl.compile[int(p*float64(len(tl.compile)-1))] }
	sources := make([]string, 0, len(tl.bySource))
	for s := range tl.bySource {
		sources = append(sources, s)
	}
	sort.Strings(sources)
	var b strings.Builder
	for _, s := range sources {
		fmt.Fprintf(&b, "%s %d/%d; ", s, tl.bySource[s][0], tl.bySource[s][1])
	}
	t.Logf("admitted %d of %d documents (%.4f): %s", tl.admitted, tl.documents, float64(tl.admitted)/float64(tl.documents), b.String())
	t.Logf("refusals by cause: %s", sortedCounts(tl.causes))
	t.Logf("instances of admitted documents: %d, the oracle agrees on %d; %d refused by the scan", tl.instances, tl.agree, tl.scanRefused)
	t.Logf("admission CPU time over %d documents: median %s, p99 %s, max %s; slowest %v", len(tl.compile), pct(0.5), pct(0.99),
		tl.compile[len(tl.compile)-1], tl.slowest)
}

// stayingCause names the cause of a refusal when it is one that stays,
// "" otherwise.
func stayingCause(se *ScanError) string {
	d := se.Detail
	for _, c := range []struct{ key, cause string }{
		{"refers to another document", "reference to another document"},
		{"did you mean", "typo"},
		{"more than", "cap"},
		{"reference cycle", "reference cycle"},
		{"beyond the range", "number"},
		{"too close to zero", "number"},
		{"neither ECMAScript nor RE2", "pattern no engine parses"},
		{"cannot be checked exactly", "not exactly checkable"},
		{"duplicate object key", "ambiguous document (a key twice)"},
		{"rather than read without it", "a keyword its dialect removed"},
		{"unknown dialect", "unknown dialect"},
	} {
		if strings.Contains(d, c.key) {
			return c.cause
		}
	}
	return ""
}

// sampleInstances makes instances for a document: every JSON type's
// simplest value, the root's default and examples, and an object filled
// from its properties (their const, enum, default, example or type;
// local references followed a few levels deep), whole and with each
// property in turn left out.
func sampleInstances(raw json.RawMessage) []json.RawMessage {
	var root any
	if json.Unmarshal(raw, &root) != nil {
		return nil
	}
	var out []json.RawMessage
	add := func(v any) {
		if b, err := json.Marshal(v); err == nil {
			out = append(out, b)
		}
	}
	for _, v := range []any{nil, true, 0, 1.5, "", "x", []any{}, map[string]any{}} {
		add(v)
	}
	m, _ := root.(map[string]any)
	if d, ok := m["default"]; ok {
		add(d)
	}
	if ex, ok := m["examples"].([]any); ok {
		for _, v := range ex {
			add(v)
		}
	}
	budget := 2000 // values in the filled object, at most
	filled, ok := sampleValue(root, root, 0, &budget).(map[string]any)
	if !ok {
		return out
	}
	add(filled)
	for _, k := range sortedKeys(filled) {
		part := map[string]any{}
		for k2, v := range filled {
			if k2 != k {
				part[k2] = v
			}
		}
		add(part)
	}
	return out
}

// sampleValue builds a plausible value for a schema, of at most *budget
// values.
func sampleValue(s, root any, depth int, budget *int) any {
	m, ok := s.(map[string]any)
	if *budget--; !ok || depth > 6 || *budget < 0 {
		return nil
	}
	if ref, ok := m["$ref"].(string); ok && strings.HasPrefix(ref, "#") {
		if target, ok := lookup(root, strings.TrimPrefix(ref, "#")); ok {
			return sampleValue(target, root, depth+1, budget)
		}
	}
	if c, ok := m["const"]; ok {
		return c
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	if d, ok := m["default"]; ok {
		return d
	}
	if ex, ok := m["examples"].([]any); ok && len(ex) > 0 {
		return ex[0]
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if arr, ok := m[k].([]any); ok && len(arr) > 0 {
			if v := sampleValue(arr[0], root, depth+1, budget); v != nil {
				return v
			}
		}
	}
	typ, _ := m["type"].(string)
	if arr, ok := m["type"].([]any); ok && len(arr) > 0 {
		typ, _ = arr[0].(string)
	}
	props, _ := m["properties"].(map[string]any)
	switch {
	case typ == "object" || (typ == "" && props != nil):
		obj := map[string]any{}
		for _, k := range sortedKeys(props) {
			obj[k] = sampleValue(props[k], root, depth+1, budget)
		}
		return obj
	case typ == "array":
		if it, ok := m["items"].(map[string]any); ok {
			return []any{sampleValue(it, root, depth+1, budget)}
		}
		return []any{}
	case typ == "string":
		return "x"
	case typ == "integer":
		return 1
	case typ == "number":
		return 1.5
	case typ == "boolean":
		return true
	}
	return nil
}
