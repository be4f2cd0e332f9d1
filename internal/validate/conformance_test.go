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
)

// suiteDir locates one dialect's directory of the official
// JSON-Schema-Test-Suite, a copy of which is kept in testdata (see its
// READMEs for provenance and licence); CHATD_JSON_SCHEMA_SUITE points at
// another copy of its tests directory. A missing suite is a failure.
func suiteDir(t *testing.T, draft string) string {
	dir := filepath.Join("testdata", "json-schema-test-suite", draft)
	if root := os.Getenv("CHATD_JSON_SCHEMA_SUITE"); root != "" {
		dir = filepath.Join(root, draft)
	}
	if _, err := os.Stat(filepath.Join(dir, "type.json")); err != nil {
		t.Fatalf("%s test suite not found at %s (set CHATD_JSON_SCHEMA_SUITE): %v", draft, dir, err)
	}
	return dir
}

// suiteDrafts are the suite's directories and the dialect each declares.
var suiteDrafts = []string{"draft4", "draft6", "draft7", "draft2019-09", "draft2020-12"}

type suiteGroup struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tests       []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Valid       bool            `json:"valid"`
	} `json:"tests"`
}

type suiteTally struct {
	groups, rejectedGroups        int
	tests, rejectedTests          int // rejectedTests: in rejected groups
	pass, fail, refused, budgeted int // accepted groups: refused by the scan, refused by the budget/precision guard
	asserted                      int // format tests of 2019-09 and 2020-12's annotation default, which chatd asserts
	failures                      []string
	rejections                    map[string]int
}

// TestConformance runs the suite of every dialect through our admission
// (Compile) and validation (Schema.Validate, raw bytes in), each group's
// schema declaring its dialect. Groups whose schema we refuse by design
// are counted as rejected; every accepted required test must pass, so
// what is admitted in a dialect is checked exactly as it says.
func TestConformance(t *testing.T) {
	for _, draft := range suiteDrafts {
		t.Run(draft, func(t *testing.T) { conformance(t, draft) })
	}
}

func conformance(t *testing.T, draft string) {
	dir := suiteDir(t, draft)
	tallies := map[string]*suiteTally{}
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "remotes" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".json") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, file := range files {
		rel, _ := filepath.Rel(dir, file)
		category := "core"
		switch {
		case strings.HasPrefix(rel, "optional/format/"):
			category = "optional/format"
		case strings.HasPrefix(rel, "optional/"):
			category = "optional"
		}
		tally := tallies[category]
		if tally == nil {
			tally = &suiteTally{rejections: map[string]int{}}
			tallies[category] = tally
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var groups []suiteGroup
		if err := json.Unmarshal(raw, &groups); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		for _, g := range groups {
			tally.groups++
			s, err := Compile(withDialect(t, g.Schema, draft))
			if err != nil {
				tally.rejectedGroups++
				tally.rejectedTests += len(g.Tests)
				tally.rejections[rejectionReason(err)]++
				t.Logf("rejected %s %q: %v", rel, g.Description, err)
				continue
			}
			for _, tc := range g.Tests {
				tally.tests++
				if _, err := decodeTree(tc.Data, ValueLimits); err != nil {
					tally.refused++
					t.Logf("value refused by the scan: %s %q / %q: %v", rel, g.Description, tc.Description, err)
					continue
				}
				res := s.Validate(tc.Data)
				if !res.Valid() && len(res.Errors) == 1 && (res.Errors[0].Message == TooExpensive || strings.Contains(res.Errors[0].Message, "64-bit float precision")) {
					tally.budgeted++
					t.Logf("value refused by the cost/precision guard: %s %q / %q: %s", rel, g.Description, tc.Description, res.Summary())
					continue
				}
				if res.Valid() == tc.Valid {
					tally.pass++
					continue
				}
				if rel == "format.json" && strings.Contains(tc.Description, "only an annotation by default") {
					// chatd asserts format in every dialect (docs/structured-output.md, Formats)
					tally.asserted++
					continue
				}
				tally.fail++
				tally.failures = append(tally.failures, fmt.Sprintf("%s | %s | %s (want valid=%v; got %s)", rel, g.Description, tc.Description, tc.Valid, res.Summary()))
			}
		}
	}
	var b strings.Builder
	b.WriteString("\n| category | groups | rejected groups (tests) | accepted tests | pass | fail | value refused by scan | refused by guard | format asserted |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range []string{"core", "optional", "optional/format"} {
		tl := tallies[c]
		if tl == nil {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d (%d) | %d | %d | %d | %d | %d | %d |\n", c, tl.groups, tl.rejectedGroups, tl.rejectedTests, tl.tests, tl.pass, tl.fail, tl.refused, tl.budgeted, tl.asserted)
	}
	for _, c := range []string{"core", "optional", "optional/format"} {
		tl := tallies[c]
		if tl == nil {
			continue
		}
		reasons := make([]string, 0, len(tl.rejections))
		for r, n := range tl.rejections {
			reasons = append(reasons, fmt.Sprintf("%s ×%d", r, n))
		}
		sort.Strings(reasons)
		fmt.Fprintf(&b, "%s rejections: %s\n", c, strings.Join(reasons, "; "))
		for _, f := range tl.failures {
			fmt.Fprintf(&b, "%s failure: %s\n", c, f)
		}
	}
	t.Log(b.String())
	core := tallies["core"]
	if core == nil || core.tests == 0 {
		t.Fatal("no core tests ran")
	}
	if core.fail > 0 || core.budgeted > 0 {
		t.Errorf("%d accepted core tests failed and %d were refused by the guard; want 0", core.fail, core.budgeted)
	}
}

// rejectionReason classifies an admission error for the summary.
func rejectionReason(err error) string {
	se, ok := err.(*ScanError)
	if !ok {
		return "other"
	}
	parts := strings.Split(se.Pointer, "/")
	last := parts[len(parts)-1]
	switch {
	case strings.Contains(se.Detail, "U+0000"):
		return "U+0000"
	case strings.Contains(se.Detail, `beside "$ref" is ignored`):
		return "assertion beside $ref"
	case last == "$ref" || last == "$id" || last == "id" || last == "$schema":
		return last
	case strings.HasPrefix(se.Detail, "unknown keyword"):
		return "unknown keyword"
	case strings.HasPrefix(se.Detail, "unsupported format"):
		return "format " + strings.Trim(strings.Fields(se.Detail)[2], `";`)
	case strings.HasPrefix(se.Detail, "pattern is not valid"):
		return "non-RE2 pattern"
	}
	return se.Detail
}

// withDialect declares the suite's dialect in an object schema that does
// not (the suite's runners assume it; chatd reads no "$schema" as
// Draft-07).
func withDialect(t testing.TB, raw json.RawMessage, draft string) json.RawMessage {
	t.Helper()
	uri := map[string]string{"draft4": Draft04URI, "draft6": Draft06URI, "draft7": Draft07URI,
		"draft2019-09": Draft2019URI, "draft2020-12": Draft2020URI}[draft]
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) < 2 || trimmed[0] != '{' || bytes.Contains(raw, []byte(`"$schema"`)) {
		return raw
	}
	if bytes.Equal(trimmed, []byte("{}")) {
		return json.RawMessage(fmt.Sprintf(`{"$schema":%q}`, uri))
	}
	return json.RawMessage(fmt.Sprintf(`{"$schema":%q,`, uri) + string(trimmed[1:]))
}
