package validate

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	oracle "github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaStoreSample is a sample of the SchemaStore catalogue's draft-07
// schemas that have test files (testdata/schemastore/README.md).
const schemaStoreSample = "testdata/schemastore/draft7-sample.jsonl.gz"

type storeEntry struct {
	Name      string            `json:"name"`
	RemoteRef bool              `json:"remote_ref"`
	Schema    json.RawMessage   `json:"schema"`
	Valid     []json.RawMessage `json:"valid"`
	Invalid   []json.RawMessage `json:"invalid"`
}

// loadSchemaStore reads a catalogue file (CHATD_SCHEMASTORE names another
// one, such as the whole catalogue built the same way).
func loadSchemaStore(t testing.TB) []storeEntry {
	t.Helper()
	path := schemaStoreSample
	if p := os.Getenv("CHATD_SCHEMASTORE"); p != "" {
		path = p
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 64<<20)
	var out []storeEntry
	for sc.Scan() {
		var e storeEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func compact(t testing.TB, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// storeOracle compiles a catalogue schema with the oracle, as
// oracleSchema does, reporting an error instead of failing.
func storeOracle(raw []byte) (*oracle.Schema, error) {
	doc, err := oracle.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := oracle.NewCompiler()
	c.DefaultDraft(oracle.Draft7)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	c.UseRegexpEngine(oracleRegexp)
	if err := c.AddResource("urn:chatd:store", doc); err != nil {
		return nil, err
	}
	return c.Compile("urn:chatd:store")
}

// TestSchemaStore: the hermetic schemas of the SchemaStore
// sample are admitted as written (at least 95 %); every refusal names its
// place and cause; on the catalogue's instance files of admitted schemas
// the verdicts agree with the oracle's (at least 99.5 %); and no value is
// refused by the work budget that the oracle validates in under 50 ms.
func TestSchemaStore(t *testing.T) {
	t.Parallel()
	var hermetic, admitted, files, agree int
	causes := map[string]int{}
	var disagreements, budget []string
	for _, e := range loadSchemaStore(t) {
		if e.RemoteRef {
			continue
		}
		hermetic++
		raw := compact(t, e.Schema)
		s, err := Compile(raw)
		if err != nil {
			var se *ScanError // the first problem
			if !errors.As(err, &se) || se.Detail == "" {
				t.Errorf("%s: refused without a cause: %v", e.Name, err)
				continue
			}
			causes[refusalCause(se)]++
			t.Logf("refused %s (%s): %.160s", e.Name, refusalCause(se), se.Error())
			continue
		}
		admitted++
		o, oerr := storeOracle(raw)
		if oerr != nil {
			t.Logf("%s: the oracle refuses the schema: %.160s", e.Name, oerr)
			continue
		}
		check := func(v json.RawMessage, kind string, i int) {
			inst := compact(t, v)
			r := s.Validate(inst)
			doc, err := oracle.UnmarshalJSON(bytes.NewReader(inst))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			oValid := o.Validate(doc) == nil
			took := time.Since(start)
			files++
			if len(r.Errors) > 0 && r.Errors[0].Keyword == CodeBudget {
				b := fmt.Sprintf("%s %s #%d (%d bytes; the oracle took %s)", e.Name, kind, i, len(inst), took)
				if took < 50*time.Millisecond {
					budget = append(budget, b)
				} else {
					t.Logf("refused by the work budget: %s", b)
				}
				return
			}
			if r.Valid() == oValid {
				agree++
				return
			}
			disagreements = append(disagreements, fmt.Sprintf("%s %s #%d: chatd valid=%v (%.160s), oracle valid=%v",
				e.Name, kind, i, r.Valid(), r.Summary(), oValid))
		}
		for i, v := range e.Valid {
			check(v, "valid", i)
		}
		for i, v := range e.Invalid {
			check(v, "invalid", i)
		}
	}
	for _, d := range disagreements {
		t.Logf("disagreement: %s", d)
	}
	t.Logf("admitted %d of %d hermetic schemas (%.3f); refusals by cause: %s", admitted, hermetic, float64(admitted)/float64(hermetic), sortedCounts(causes))
	t.Logf("instance files of admitted schemas: %d, the oracle agrees on %d (%.4f)", files, agree, float64(agree)/float64(max(files, 1)))
	if hermetic < 200 {
		t.Fatalf("only %d hermetic schemas: is the sample complete?", hermetic)
	}
	if float64(admitted) < 0.95*float64(hermetic) {
		t.Errorf("admitted %d of %d, below 95 %%", admitted, hermetic)
	}
	if float64(agree) < 0.995*float64(files) {
		t.Errorf("the oracle agrees on %d of %d instance files, below 99.5 %%", agree, files)
	}
	for _, b := range budget {
		t.Errorf("refused by the work budget, which the oracle validates in under 50 ms: %s", b)
	}
}

// refusalCause names the kind of a refusal from its detail.
func refusalCause(se *ScanError) string {
	d := se.Detail
	for _, c := range []struct{ key, cause string }{
		{"reference cycle", "reference cycle"},
		{"patternProperties key", "ECMAScript patternProperties key"},
		{"did you mean", "typo"},
		{"more than", "cap"},
		{"refers to another document", "remote reference"},
		{"beyond the range", "number"},
	} {
		if strings.Contains(d, c.key) {
			return c.cause
		}
	}
	return "other: " + d
}

// sortedCounts renders a map of counts in a stable order (logs).
func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return b.String()
}
