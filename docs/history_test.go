package docs_test

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The docs describe chatd as it is and the code says why it is so; how it
// came to be is git log's and docs/CHANGES.md's, the one file exempt.
var (
	issueRef       = regexp.MustCompile(`(?i)\bissues?[ -]#?\d+`)
	historyHeading = regexp.MustCompile(`(?i)^#+ (history|before|until|since|changes)\b|\bbefore(/| and )after\b|\b\d{4}-\d{2}(-\d{2})?\b`)
	headingLine    = regexp.MustCompile(`^#{1,6} `)
)

const changelog = "CHANGES.md"

// TestNoHistory fails on issue numbers in the docs and in non-test Go code,
// and on history headings (a date, "Before and after", or one that starts
// with "History", "Before", "Until", "Since", "Changes") in the docs, listing every violation with its file and line.
func TestNoHistory(t *testing.T) {
	t.Parallel()
	var found []string
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append(docs, "../README.md") {
		if filepath.Base(doc) == changelog {
			continue
		}
		found = append(found, scan(t, doc, true)...)
	}
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != "..") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			found = append(found, scan(t, path, false)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("%d places tell history (say what is, and put what changed in docs/%s with its commit):\n%s",
			len(found), changelog, strings.Join(found, "\n"))
	}
}

// scan lists a file's issue references and, for Markdown, its history
// headings (outside fenced code, where `#` starts a shell comment).
func scan(t *testing.T, path string, markdown bool) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var found []string
	fenced := false
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		if markdown && strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		switch {
		case issueRef.MatchString(line):
			found = append(found, fmt.Sprintf("%s:%d: %q", path, n, issueRef.FindString(line)))
		case markdown && !fenced && headingLine.MatchString(line) && historyHeading.MatchString(line):
			found = append(found, fmt.Sprintf("%s:%d: history heading %q", path, n, line))
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return found
}

// TestNoHistoryCatches: the patterns find what they are for and leave
// today's words alone.
func TestNoHistoryCatches(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]bool{
		"until issue 33 the limit was 64":         true,
		"see Issue #12":                           true,
		"issues 4 and 5":                          true,
		"(benchmarks.md#capacity-issue-31-after)": true,
		"a tissue 3 cm wide":                      false,
		"an issue with the provider":              false,
	} {
		if got := issueRef.MatchString(line); got != want {
			t.Errorf("issueRef on %q = %v, want %v", line, got, want)
		}
	}
	for heading, want := range map[string]bool{
		"## Before and after":                    true,
		"## History":                             true,
		"### 2026-11-03: the codec":              true,
		"## Receipt webhooks":                    false,
		"### What the model's provider receives": false,
		"### `GET /api/v1/chats/{chat}/messages` — history and queue": false,
		"## Measured before and after the change":                     true,
	} {
		if got := historyHeading.MatchString(heading); got != want {
			t.Errorf("historyHeading on %q = %v, want %v", heading, got, want)
		}
	}
}
