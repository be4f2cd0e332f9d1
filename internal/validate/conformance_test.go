package validate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// suiteDir locates the official JSON-Schema-Test-Suite (Draft-07), a copy of
// which is kept in testdata (see its README for provenance and licence);
// CHATD_JSON_SCHEMA_SUITE points elsewhere. A missing suite is a failure.
func suiteDir(t *testing.T) string {
	dir := os.Getenv("CHATD_JSON_SCHEMA_SUITE")
	if dir == "" {
		dir = filepath.Join("testdata", "json-schema-test-suite", "draft7")
	}
	if _, err := os.Stat(filepath.Join(dir, "type.json")); err != nil {
		t.Fatalf("Draft-07 test suite not found at %s (set CHATD_JSON_SCHEMA_SUITE): %v", dir, err)
	}
	return dir
}

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
	failures                      []string
	rejections                    map[string]int
}

// TestConformance runs the Draft-07 suite through our admission (Compile)
// and validation (Schema.Validate, raw bytes in). Groups whose schema we
// reject by design are counted as rejected; every accepted required test
// must pass.
func TestConformance(t *testing.T) {
	dir := suiteDir(t)
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
			s, err := Compile(g.Schema)
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
				tally.fail++
				tally.failures = append(tally.failures, fmt.Sprintf("%s | %s | %s (want valid=%v; got %s)", rel, g.Description, tc.Description, tc.Valid, res.Summary()))
			}
		}
	}
	var b strings.Builder
	b.WriteString("\n| category | groups | rejected groups (tests) | accepted tests | pass | fail | value refused by scan | refused by guard |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, c := range []string{"core", "optional", "optional/format"} {
		tl := tallies[c]
		if tl == nil {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d (%d) | %d | %d | %d | %d | %d |\n", c, tl.groups, tl.rejectedGroups, tl.rejectedTests, tl.tests, tl.pass, tl.fail, tl.refused, tl.budgeted)
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
