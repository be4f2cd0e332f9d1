package validate

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/admission.golden")

// admissionGolden records what the package says about a fixed corpus.
const admissionGolden = "testdata/admission.golden"

// goldenInstances caps the instances recorded per schema (the first ones
// of each document, valid and invalid together).
const goldenInstances = 4

// TestAdmissionGolden pins every verdict and every word the package says
// about a fixed, varied corpus (the dialect corpus, every dialect of the
// JSON-Schema-Test-Suite, the SchemaStore sample, the generators' schemas
// and a few response_format envelopes): per schema, admitted or the exact
// refusal, each warning, a digest of the provider's tool schema, and the
// exact errors of its first instances. A change of any of them fails here;
// go test -run TestAdmissionGolden -update rewrites the file.
func TestAdmissionGolden(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	for _, e := range goldenCorpus(t) {
		goldenEntry(&b, e)
	}
	goldenEnvelopes(&b)
	if *update {
		if err := os.WriteFile(admissionGolden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(admissionGolden)
	if err != nil {
		t.Fatalf("%v (go test -run TestAdmissionGolden -update writes it)", err)
	}
	if got := b.Bytes(); !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			g, w := lineAt(gl, i), lineAt(wl, i)
			if g != w {
				t.Fatalf("%s differs at line %d:\n got %.400s\nwant %.400s", admissionGolden, i+1, g, w)
			}
		}
	}
}

func lineAt(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "<end of file>"
}

// goldenCorpus is the dialect corpus (its real-world documents and the
// suite's draft4, draft6 and draft7), the suite's 2019-09 and 2020-12,
// the SchemaStore sample and the generators' schemas, in a fixed order.
func goldenCorpus(t *testing.T) []corpusEntry {
	t.Helper()
	out := loadDialectCorpus(t)
	for _, d := range []string{"draft2019-09", "draft2020-12"} {
		out = append(out, suiteEntries(t, d)...)
	}
	for _, s := range loadSchemaStore(t) {
		out = append(out, corpusEntry{Name: s.Name, Source: "schemastore", Schema: s.Schema, Valid: s.Valid, Invalid: s.Invalid})
	}
	files, err := filepath.Glob(filepath.Join("testdata", "generators", "schemas", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("generator schemas: %d, %v", len(files), err)
	}
	slices.Sort(files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, corpusEntry{Name: filepath.Base(f), Source: "generators", Schema: raw})
	}
	return out
}

// goldenEntry writes one schema's record: its verdict, warnings, tool
// schema digest and the results of its first instances (the simple
// values of every JSON type when the corpus has none for it).
func goldenEntry(b *bytes.Buffer, e corpusEntry) {
	fmt.Fprintf(b, "== %s %s\n", e.Source, strconv.Quote(e.Name))
	s, err := Compile(e.Schema)
	if err != nil {
		fmt.Fprintf(b, "refused %s\n", strconv.Quote(err.Error()))
		return
	}
	b.WriteString("admitted\n")
	for _, w := range s.Warnings {
		fmt.Fprintf(b, "warning %s %s %s\n", strconv.Quote(w.Location), w.Keyword, strconv.Quote(w.Message))
	}
	if tool, err := ToolSchema(e.Schema, ""); err != nil {
		fmt.Fprintf(b, "tool error %s\n", strconv.Quote(err.Error()))
	} else {
		out, _ := json.Marshal(tool)
		fmt.Fprintf(b, "tool %x\n", sha256.Sum256(out))
	}
	insts := append(slices.Clip(e.Valid), e.Invalid...)
	if len(insts) == 0 {
		for _, v := range []string{`null`, `true`, `0`, `1.5`, `""`, `"x"`, `[]`, `{}`} {
			insts = append(insts, json.RawMessage(v))
		}
	}
	for i, inst := range insts[:min(len(insts), goldenInstances)] {
		goldenResult(b, i, s.Validate(inst))
	}
}

// goldenResult writes one instance's result. The library reports the
// errors of an object's members in map order, so they are sorted; a
// result cut at MaxReportedErrors keeps an arbitrary subset of them, so
// only its count is recorded.
func goldenResult(b *bytes.Buffer, i int, r Result) {
	if r.Valid() {
		fmt.Fprintf(b, "%d valid\n", i)
		return
	}
	fmt.Fprintf(b, "%d invalid %d\n", i, r.Total)
	if r.Total > len(r.Errors) {
		return
	}
	lines := make([]string, 0, len(r.Errors))
	for _, e := range r.Errors {
		lines = append(lines, fmt.Sprintf("  %s %s %s", strconv.Quote(e.Location), e.Keyword, strconv.Quote(e.Message)))
	}
	slices.Sort(lines)
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
}

// goldenEnvelopes writes the verdicts on a few response_format envelopes.
func goldenEnvelopes(b *bytes.Buffer) {
	env := func(schema string) string {
		return `{"type":"json_schema","json_schema":{"name":"r","description":"d","schema":` + schema + `}}`
	}
	for _, raw := range []string{
		``, `null`, `{"type":"text"}`, `{"type":"xml"}`, `[]`, `{"type":"json_schema"}`,
		env(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`),
		env(`{"$ref":"http://example.invalid/s.json"}`),
		env(`{"properties":{"a":{"type":"string","type":"number"}}}`),
		env(`{"requird":["a"]}`),
		env(`{"x-vendor":1,"format":"colour"}`),
		env(`{}`) + ` x`,
		`{"type":"json_schema","json_schema":{"name":"bad name","schema":{}}}`,
		`{"type":"json_schema","json_schema":{"name":"r","schema":{},"strict":false}}`,
		`{"type":"json_schema","json_schema":{"name":"r","schema":{},"extra":true}}`,
	} {
		f, fe := ParseResponseFormat([]byte(raw))
		switch {
		case fe != nil:
			fmt.Fprintf(b, "envelope %s: refused\n", strconv.Quote(raw))
			for _, e := range fe.All() {
				fmt.Fprintf(b, "  %s %s\n", e.Field, strconv.Quote(e.Detail))
			}
		case f == nil:
			fmt.Fprintf(b, "envelope %s: absent\n", strconv.Quote(raw))
		default:
			fmt.Fprintf(b, "envelope %s: %s %s %s %d warnings\n", strconv.Quote(raw), f.Name,
				strconv.Quote(f.Description), f.Schema, len(f.Compiled.Warnings))
		}
	}
}
