package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dlclark/regexp2/v2"
	oracle "github.com/santhosh-tekuri/jsonschema/v6"
)

// generatorDir holds the real generators' output for the fixture models
// and the instances (testdata/generators/README.md).
const generatorDir = "testdata/generators"

// generatorFixture is one schema a generator emitted, with the instances
// of its model.
type generatorFixture struct {
	name           string // generator file / schema key, e.g. "pydantic/order"
	schema         json.RawMessage
	valid, invalid []json.RawMessage
}

func loadGeneratorFixtures(t testing.TB) []generatorFixture {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(generatorDir, "schemas", "*.json"))
	if err != nil || len(files) < 4 {
		t.Fatalf("generator outputs: %v %v", files, err)
	}
	var out []generatorFixture
	for _, f := range files {
		var doc struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		}
		readJSON(t, f, &doc)
		for key, schema := range doc.Schemas {
			model, _, _ := strings.Cut(key, "-")
			var inst struct{ Valid, Invalid []json.RawMessage }
			readJSON(t, filepath.Join(generatorDir, "instances", model+".json"), &inst)
			out = append(out, generatorFixture{name: strings.TrimSuffix(filepath.Base(f), ".json") + "/" + key,
				schema: schema, valid: inst.Valid, invalid: inst.Invalid})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// oracleSchema compiles a fixture with santhosh-tekuri/jsonschema/v6, a
// test-only second opinion: Draft-07 unless the document declares its
// dialect, formats asserted, and a loader that loads nothing.
func oracleSchema(t testing.TB, raw []byte) *oracle.Schema {
	t.Helper()
	doc, err := oracle.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := oracle.NewCompiler()
	c.DefaultDraft(oracle.Draft7)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	c.UseRegexpEngine(oracleRegexp)
	if err := c.AddResource("urn:chatd:fixture", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("urn:chatd:fixture")
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	return s
}

// oracleRegexp gives the oracle ECMA-262 patterns (regexp2's ECMAScript
// mode with Unicode semantics, as ajv uses them) for every pattern, not
// only those RE2 cannot run: an independent second opinion on ours.
func oracleRegexp(src string) (oracle.Regexp, error) {
	re, err := regexp2.Compile(src, regexp2.ECMAScript|regexp2.Unicode)
	if err != nil {
		return nil, err
	}
	return ecmaOracle{re}, nil
}

type ecmaOracle struct{ re *regexp2.Regexp }

func (r ecmaOracle) MatchString(s string) bool {
	m, err := r.re.MatchString(s)
	return m && err == nil
}

func (r ecmaOracle) String() string { return r.re.String() }

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("loading %s is not allowed", url)
}

// TestGeneratorFixtures: every schema emitted by Pydantic 2, zod 4 (its
// 2020-12 default and draft-7), zod-to-json-schema and invopop/jsonschema
// for the fixture models is admitted as written; every valid instance
// validates and every invalid one is refused; the oracle agrees with every
// verdict.
func TestGeneratorFixtures(t *testing.T) {
	t.Parallel()
	fixtures := loadGeneratorFixtures(t)
	generators := map[string]bool{}
	for _, f := range fixtures {
		generators[strings.Split(f.name, "/")[0]] = true
		s, err := Compile(f.schema)
		if err != nil {
			t.Errorf("%s: refused: %v", f.name, err)
			continue
		}
		o := oracleSchema(t, f.schema)
		check := func(v json.RawMessage, want bool) {
			r := s.Validate(v)
			inst, _ := oracle.UnmarshalJSON(bytes.NewReader(v))
			oerr := o.Validate(inst)
			if r.Valid() != want || (oerr == nil) != want {
				t.Errorf("%s: %s: chatd valid=%v (%s), oracle %v; want valid=%v", f.name, v, r.Valid(), r.Summary(), oerr, want)
			}
		}
		for _, v := range f.valid {
			check(v, true)
		}
		for _, v := range f.invalid {
			check(v, false)
		}
	}
	if len(generators) != 4 || len(fixtures) < 15 {
		t.Errorf("%d fixtures from %v", len(fixtures), generators)
	}
}
