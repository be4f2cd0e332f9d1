// Package check runs the invariant checks of sql/check.sql against a chatd
// database and reports every violation. `chatd check` is its command line;
// the crash and storm tests run it after their traffic.
package check

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	chatdsql "github.com/chatd/chatd/sql"
)

// Check is one named query of sql/check.sql.
type Check struct {
	Name string
	// Doc is the explanation under the name, comment markers removed.
	Doc string
	SQL string
}

// Violation is one row a check returned.
type Violation struct {
	Check     string
	ChatID    uuid.NullUUID
	RequestID uuid.NullUUID
	MessageID *int64
	Detail    string
}

func (v Violation) String() string {
	var b strings.Builder
	b.WriteString(v.Check)
	b.WriteString(":")
	if v.ChatID.Valid {
		fmt.Fprintf(&b, " chat=%s", v.ChatID.UUID)
	}
	if v.RequestID.Valid {
		fmt.Fprintf(&b, " request=%s", v.RequestID.UUID)
	}
	if v.MessageID != nil {
		fmt.Fprintf(&b, " message=%d", *v.MessageID)
	}
	b.WriteString(": ")
	b.WriteString(v.Detail)
	return b.String()
}

// Report is the outcome of Run: the checks run, in file order, and their
// violations, grouped by check in that order.
type Report struct {
	Checks     []Check
	Violations []Violation
}

// Clean reports whether no check found anything.
func (r Report) Clean() bool { return len(r.Violations) == 0 }

// Of returns the violations of one check.
func (r Report) Of(name string) []Violation {
	var out []Violation
	for _, v := range r.Violations {
		if v.Check == name {
			out = append(out, v)
		}
	}
	return out
}

var (
	parseOnce sync.Once
	parsed    []Check
	parseErr  error
)

// Checks returns the checks of sql/check.sql, in file order.
func Checks() []Check {
	parseOnce.Do(func() { parsed, parseErr = Parse(chatdsql.Checks()) })
	if parseErr != nil {
		panic("check: sql/check.sql: " + parseErr.Error()) // a test keeps the embedded file well-formed
	}
	return parsed
}

// Parse splits a check file into its checks: each starts at a line
// "-- name: NAME", continues with comment lines (its Doc) and then its query,
// up to the next name line. Text before the first name is the file's
// preamble.
func Parse(file string) ([]Check, error) {
	var out []Check
	var cur *Check
	var sqlLines []string
	inDoc := false
	flush := func() error {
		if cur == nil {
			return nil
		}
		cur.SQL = strings.TrimSuffix(strings.TrimSpace(strings.Join(sqlLines, "\n")), ";")
		if strings.TrimSpace(cur.SQL) == "" {
			return fmt.Errorf("check %s has no query", cur.Name)
		}
		if strings.Contains(cur.SQL, ";") {
			return fmt.Errorf("check %s holds more than one statement", cur.Name)
		}
		out = append(out, *cur)
		return nil
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(file, "\n") {
		if name, ok := strings.CutPrefix(line, "-- name:"); ok {
			if err := flush(); err != nil {
				return nil, err
			}
			name = strings.TrimSpace(name)
			if name == "" || seen[name] {
				return nil, fmt.Errorf("check name %q is empty or repeated", name)
			}
			seen[name] = true
			cur, sqlLines, inDoc = &Check{Name: name}, nil, true
			continue
		}
		if cur == nil {
			continue
		}
		if inDoc {
			if text, ok := strings.CutPrefix(line, "--"); ok {
				cur.Doc = strings.TrimSpace(cur.Doc + "\n" + strings.TrimPrefix(text, " "))
				continue
			}
			inDoc = false
		}
		sqlLines = append(sqlLines, line)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no checks")
	}
	return out, nil
}

// Beginner is what Run reads through: a *pgxpool.Pool or a *pgx.Conn.
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Run runs every check in one read-only REPEATABLE READ transaction, so
// the checks see one snapshot even while the server is running.
func Run(ctx context.Context, db Beginner) (Report, error) {
	rep := Report{Checks: Checks()}
	err := pgx.BeginTxFunc(ctx, db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		for _, c := range rep.Checks {
			rows, err := tx.Query(ctx, c.SQL)
			if err != nil {
				return fmt.Errorf("check %s: %w", c.Name, err)
			}
			vs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Violation, error) {
				var v Violation
				err := row.Scan(&v.Check, &v.ChatID, &v.RequestID, &v.MessageID, &v.Detail)
				return v, err
			})
			if err != nil {
				return fmt.Errorf("check %s: %w", c.Name, err)
			}
			rep.Violations = append(rep.Violations, vs...)
		}
		return nil
	})
	return rep, err
}
