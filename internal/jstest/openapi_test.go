package jstest

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// acceptedWarnings are the recommended rules' warnings the document keeps,
// with their counts: the probes and the document itself (/healthz,
// /readyz, /metrics, /api/v1/openapi.json) have no 4xx answer to
// document, and the project has not chosen a license.
var acceptedWarnings = map[string]string{"operation-4xx-response": "4", "info-license": "1"}

// lintSummaryRE is a line of redocly's --format=summary output.
var lintSummaryRE = regexp.MustCompile(`(?m)^(error|warning) ([a-z0-9-]+): (\d+)$`)

// TestOpenAPILint: an independent linter (@redocly/cli, its recommended
// rules) finds no error in the served document, and no warning but the
// accepted ones.
func TestOpenAPILint(t *testing.T) {
	t.Parallel()
	npm(t)
	out, err := run(t.Context(), sdkDir, nil, bin("redocly"), "lint", writeDocument(t), "--format=summary")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("redocly lint:\n%s", out)
	if !strings.Contains(out, "Your API description is valid") {
		t.Fatal("redocly did not find the document valid")
	}
	for _, m := range lintSummaryRE.FindAllStringSubmatch(out, -1) {
		if m[1] == "error" || acceptedWarnings[m[2]] != m[3] {
			t.Errorf("redocly lint: %s %s: %s", m[1], m[2], m[3])
		}
	}
}

// TestGeneratedClientTypeChecks: a client generated from the served
// document by openapi-typescript, used through openapi-fetch by typical code
// (conformance/typical.ts: a nested schema as response_format, a dynamic
// tool's input_schema, a send without busy_behavior, narrowing a message
// part by type and a send's answer by queued), compiles with tsc --strict
// and no casts.
func TestGeneratedClientTypeChecks(t *testing.T) {
	t.Parallel()
	npm(t)
	generated := filepath.Join(sdkDir, "conformance", "generated.ts")
	if _, err := run(t.Context(), sdkDir, nil, bin("openapi-typescript"), writeDocument(t), "-o", generated); err != nil {
		t.Fatal(err)
	}
	typical, err := os.ReadFile(filepath.Join(sdkDir, "conformance", "typical.ts"))
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile(`//.*`).ReplaceAll(typical, nil)
	if regexp.MustCompile(`\bas\s+[A-Za-z{(\[]|<any>|\bany\b|@ts-`).Match(code) {
		t.Fatal("conformance/typical.ts must not cast, use any, or silence the compiler")
	}
	if _, err := run(t.Context(), sdkDir, nil, bin("tsc"), "-p", "conformance/tsconfig.json"); err != nil {
		t.Fatal(err)
	}
}

// TestSDKTypesAreCurrent: the SDK's committed document and generated types
// are those of the served document (regenerate with make generate-sdk).
func TestSDKTypesAreCurrent(t *testing.T) {
	t.Parallel()
	npm(t)
	committed, err := os.ReadFile(filepath.Join(sdkDir, "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, servedDocument()) {
		t.Fatal("sdk/typescript/openapi.json is not the served document: run make generate-sdk")
	}
	out := filepath.Join(t.TempDir(), "schema.ts")
	if _, err := run(t.Context(), sdkDir, nil, bin("openapi-typescript"), "openapi.json", "-o", out); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(out)
	got, err := os.ReadFile(filepath.Join(sdkDir, "src", "schema.ts"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("sdk/typescript/src/schema.ts is stale (%v): run make generate-sdk", err)
	}
}
