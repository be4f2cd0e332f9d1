package sql

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// advisoryLock matches an advisory lock's first argument: the key of a
// single-key lock, the class of a two-key one.
var advisoryLock = regexp.MustCompile(`pg_(?:try_)?advisory_(?:xact_)?(?:un)?lock(?:_shared)?\((\d+)(,)?`)

// Every advisory lock in the SQL files and in the Go code that runs SQL
// uses a key of locks.go, in its form (a class with a second key, or a
// single key).
func TestAdvisoryLockKeys(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for _, dir := range []string{"queries", "triggers", "schema", "../internal", "../cmd"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(path, "_test.go") ||
				!strings.HasSuffix(path, ".sql") && !strings.HasSuffix(path, ".go") {
				return err
			}
			b, err := os.ReadFile(path)
			for _, p := range lockProblems(string(b), seen) {
				t.Errorf("%s: %s", path, p)
			}
			if strings.Contains(string(b), "chatdsql.LockTestTemplate") {
				seen[LockTestTemplate] = true // Go code passes the constant itself
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []int{LockClassClaim, LockClassFollow, LockSweep, LockTestTemplate} {
		if !seen[key] {
			t.Errorf("lock key %d of sql/locks.go is taken nowhere: retire it with a comment", key)
		}
	}
	if p := lockProblems("SELECT pg_advisory_xact_lock(99, 1); SELECT pg_advisory_lock(17); SELECT pg_try_advisory_xact_lock(16)",
		map[int]bool{}); len(p) != 3 {
		t.Errorf("unknown keys and a class used as a single key: %q", p)
	}
}

// lockProblems lists the advisory locks of text whose key is not one of
// locks.go in its form, and notes in seen the keys it found.
func lockProblems(text string, seen map[int]bool) []string {
	classes := map[int]bool{LockClassClaim: true, LockClassFollow: true}
	singles := map[int]bool{LockSweep: true, LockTestTemplate: true}
	var out []string
	for _, m := range advisoryLock.FindAllStringSubmatch(text, -1) {
		key, _ := strconv.Atoi(m[1])
		seen[key] = true
		if class := m[2] != ""; class && !classes[key] || !class && !singles[key] {
			out = append(out, m[0]+"…: not a key of sql/locks.go in that form")
		}
	}
	return out
}
