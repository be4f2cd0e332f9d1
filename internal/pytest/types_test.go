package pytest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPythonTypesAreCurrent: the Python SDK's committed models
// (src/chatd/types.py) are what scripts/generate.py makes of the served
// document (regenerate with make generate-sdk).
func TestPythonTypesAreCurrent(t *testing.T) {
	t.Parallel()
	py := venv(t)
	dir := t.TempDir()
	doc := filepath.Join(dir, "openapi.json")
	if err := os.WriteFile(doc, servedDocument(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "types.py")
	if _, err := run(t.Context(), sdkDir, nil, py, "scripts/generate.py", doc, "-o", out); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(out)
	got, err := os.ReadFile(filepath.Join(sdkDir, "src", "chatd", "types.py"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("sdk/python/src/chatd/types.py is stale (%v): run make generate-sdk", err)
	}
}

// TestPythonStrict: the SDK's own code, its generated models included,
// its examples and tests/typing_check.py (the types response_format= gives
// results, as assert_type calls) pass pyright --strict (pyproject.toml's
// [tool.pyright], Python 3.10 as the target).
func TestPythonStrict(t *testing.T) {
	t.Parallel()
	py := venv(t)
	pyrightMu.Lock()
	defer pyrightMu.Unlock()
	out, err := run(t.Context(), sdkDir, nil, tool("pyright"), "--pythonpath", py)
	if err != nil || !strings.Contains(out, "0 errors") {
		t.Fatalf("pyright --strict on sdk/python: %v\n%s", err, out)
	}
}
