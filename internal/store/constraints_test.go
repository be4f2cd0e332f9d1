package store_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"testing"

	chatdsql "github.com/chatd/chatd/sql"

	"github.com/chatd/chatd/internal/dbtest"
)

// TestConstraintsDeclared: every constraint and unique index of the schema
// and every named RAISE of the trigger files is a Constraint constant of
// constraints.go, and every constant names one of them.
func TestConstraintsDeclared(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	var inDB []string
	rows, err := pool.Query(t.Context(), `
		SELECT conname FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid
		WHERE r.relnamespace = 'public'::regnamespace AND r.relname <> 'goose_db_version'
		  AND c.contype <> 't' -- constraint triggers raise their own names
		UNION
		SELECT indexname FROM pg_indexes
		WHERE schemaname = 'public' AND tablename <> 'goose_db_version' AND indexdef LIKE 'CREATE UNIQUE INDEX%'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		inDB = append(inDB, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	raised := regexp.MustCompile(`CONSTRAINT = '([a-z0-9_]+)'`)
	err = fs.WalkDir(chatdsql.Triggers(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(chatdsql.Triggers(), path)
		for _, m := range raised.FindAllStringSubmatch(string(b), -1) {
			inDB = append(inDB, m[1])
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(inDB)
	inDB = slices.Compact(inDB)

	declared := declaredConstraints(t)
	for _, n := range inDB {
		if !slices.Contains(declared, n) {
			t.Errorf("constraint %s is not declared in constraints.go", n)
		}
	}
	for _, n := range declared {
		if !slices.Contains(inDB, n) {
			t.Errorf("constraints.go declares %s, which the database does not have", n)
		}
	}
}

// declaredConstraints reads the Constraint constants of constraints.go.
func declaredConstraints(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "constraints.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Constraint" {
				continue
			}
			for _, val := range v.Values {
				lit, ok := val.(*ast.BasicLit)
				if !ok {
					t.Fatalf("constant %v: not a literal", v.Names)
				}
				n, _ := strconv.Unquote(lit.Value)
				out = append(out, n)
			}
		}
	}
	return out
}
