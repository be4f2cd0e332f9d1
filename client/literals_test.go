package client_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// vocabulary are the typed states and codes (by package, the file that
// defines them, and type). Outside their definitions, code names them by
// constant; a string literal that becomes one of these types
// (`Status: "running"`, `case "pending":`) is a typo waiting to happen, and
// this test fails on it.
var vocabulary = map[string]struct {
	file  string
	types []string
}{
	"github.com/chatd/chatd/client":         {"types.go", []string{"ChatStatus", "RequestStatus", "ErrorCode", "ChatMode", "Role", "Scope"}},
	"github.com/chatd/chatd/internal/store": {"types.go", []string{"MessageKind", "Visibility"}},
}

// TestNoVocabularyLiterals type-checks every package of the module (tests
// included) and reports each string literal whose type is one of the
// vocabulary types, except in client/types.go, which defines them.
func TestNoVocabularyLiterals(t *testing.T) {
	t.Parallel()
	all := listPackages(t)
	base := map[string]string{}
	for _, p := range all {
		if !strings.Contains(p.ImportPath, " ") {
			base[p.ImportPath] = p.Export
		}
	}
	var found []string
	for _, p := range all {
		if p.Module == nil || !p.Module.Main || strings.Contains(p.ImportPath, " ") || strings.HasSuffix(p.ImportPath, ".test") {
			continue
		}
		// Internal test files belong to the package. External ones import
		// it with its test files compiled in: "pkg [pkg.test]" variants.
		found = append(found, check(t, p.ImportPath, p.Dir, append(p.GoFiles, p.TestGoFiles...), base)...)
		if len(p.XTestGoFiles) > 0 {
			exports := maps.Clone(base)
			for _, v := range all {
				if path, ok := strings.CutSuffix(v.ImportPath, " ["+p.ImportPath+".test]"); ok {
					exports[path] = v.Export
				}
			}
			found = append(found, check(t, p.ImportPath+"_test", p.Dir, p.XTestGoFiles, exports)...)
		}
	}
	slices.Sort(found)
	for _, f := range found {
		t.Error(f)
	}
}

type listed struct {
	ImportPath, Dir, Export            string
	GoFiles, TestGoFiles, XTestGoFiles []string
	Module                             *struct{ Main bool }
}

// listPackages asks the go command for the module's packages, their test
// variants and the export data of everything they import.
func listPackages(t *testing.T) []listed {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-e", "-export", "-deps", "-test",
		"-json=ImportPath,Dir,Export,GoFiles,TestGoFiles,XTestGoFiles,Module", "./...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// check type-checks the files of one package against exports and returns
// the literals that take a vocabulary type.
func check(t *testing.T, path, dir string, names []string, exports map[string]string) []string {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	for _, n := range names {
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f := exports[path]
		if f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check(path, fset, files, info); err != nil {
		t.Fatalf("type-check %s: %v", path, err)
	}
	var found []string
	for expr, tv := range info.Types {
		lit, ok := expr.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING || lit.Value == `""` {
			continue // "" is the zero value: none
		}
		named, ok := tv.Type.(*types.Named)
		if !ok || named.Obj().Pkg() == nil {
			continue
		}
		def, ok := vocabulary[named.Obj().Pkg().Path()]
		if !ok || !slices.Contains(def.types, named.Obj().Name()) {
			continue
		}
		pos := fset.Position(lit.Pos())
		if pos.Filename == filepath.Join(dir, def.file) && path == named.Obj().Pkg().Path() {
			continue
		}
		found = append(found, fmt.Sprintf("%s: string literal %s used as %s.%s; use its constant", pos, lit.Value,
			named.Obj().Pkg().Name(), named.Obj().Name()))
	}
	return found
}
