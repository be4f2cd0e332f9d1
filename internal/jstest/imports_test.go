package jstest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// localImport matches an import of a sibling module: from "./name.js".
var localImport = regexp.MustCompile(`from "\./([A-Za-z0-9_-]+)\.js"`)

// TestSDKImportsHaveNoCycle: the TypeScript SDK's modules import one
// another in one direction (client.ts uses partials.ts, never the reverse),
// so each can be read, and loaded, after what it needs.
func TestSDKImportsHaveNoCycle(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "sdk", "typescript", "src")
	files, err := filepath.Glob(filepath.Join(dir, "*.ts"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no SDK sources in %s (%v)", dir, err)
	}
	imports := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".ts")
		for _, m := range localImport.FindAllStringSubmatch(string(b), -1) {
			imports[name] = append(imports[name], m[1])
		}
	}
	if c := importCycle(imports); c != nil {
		t.Errorf("the SDK's modules import each other: %s", strings.Join(c, " → "))
	}
	if importCycle(map[string][]string{"client": {"partials"}, "partials": {"client"}}) == nil {
		t.Error("a two-module cycle was not found")
	}
}

// importCycle returns a cycle of the import graph, or nil.
func importCycle(imports map[string][]string) []string {
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(string) []string
	visit = func(n string) []string {
		switch state[n] {
		case open:
			for i, p := range path {
				if p == n {
					return append(append([]string{}, path[i:]...), n)
				}
			}
		case done:
			return nil
		}
		state[n] = open
		path = append(path, n)
		for _, m := range imports[n] {
			if c := visit(m); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return nil
	}
	for n := range imports {
		if c := visit(n); c != nil {
			return c
		}
	}
	return nil
}
