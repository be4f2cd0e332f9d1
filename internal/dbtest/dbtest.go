// Package dbtest gives tests real PostgreSQL databases: a throwaway local
// cluster per test binary (or the server named by CHATD_TEST_DATABASE_URL),
// one migrated template database built once, and a fresh clone of it per test.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { dbtest.Main(m) }
//
// then call dbtest.New(t) for a pool on a database of the test's own. Tests
// never skip when PostgreSQL is missing: they fail, saying what to install.
package dbtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/chatd/chatd/internal/migrate"
	"github.com/chatd/chatd/internal/pglocal"
	"github.com/chatd/chatd/internal/store"
	chatdsql "github.com/chatd/chatd/sql"
)

var (
	mu        sync.Mutex
	adminURL  string // a maintenance database on the test server
	template  string
	setupErr  error
	cluster   *pglocal.Cluster
	clonesSeq atomic.Int64
	runID     = fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffff)
)

// Main runs the package's tests with a database server available and stops
// the server afterwards.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit: it returns m.Run's code, for a TestMain
// that checks something after the tests. When the tests passed, it fails
// the run if goroutines they started are still running (goleak): every
// worker, stream, pool and listener a test starts ends with the test. The
// before functions run first: they end what the package shares across tests.
func Run(m *testing.M, before ...func()) int {
	code := m.Run()
	for _, f := range before {
		f() // what the package shares across tests ends before the leak check
	}
	mu.Lock()
	if cluster != nil {
		_ = cluster.Stop(context.Background())
	}
	mu.Unlock()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: goroutines outlived the tests: %v\n", err)
			code = 1
		}
	}
	return code
}

// setup starts (once) the server and builds the template.
func setup(ctx context.Context) (string, string, error) {
	mu.Lock()
	defer mu.Unlock()
	if adminURL != "" || setupErr != nil {
		return adminURL, template, setupErr
	}
	adminURL, template, setupErr = start(ctx)
	return adminURL, template, setupErr
}

func start(ctx context.Context) (string, string, error) {
	admin := os.Getenv("CHATD_TEST_DATABASE_URL")
	if admin == "" {
		dir, err := os.MkdirTemp("", "chatd-test-pg-")
		if err != nil {
			return "", "", err
		}
		cluster, err = pglocal.Start(ctx, pglocal.Options{
			Dir:       dir,
			Ephemeral: true,
			Settings:  map[string]string{"max_connections": "400", "shared_buffers": "64MB"},
		})
		if err != nil {
			_ = os.RemoveAll(dir)
			return "", "", fmt.Errorf("start a throwaway PostgreSQL for tests: %w", err)
		}
		admin = cluster.URL("postgres")
	}
	tpl, err := buildTemplate(ctx, admin)
	return admin, tpl, err
}

// buildTemplate creates the migrated template database named after a hash of
// the schema and trigger files, unless it already exists. An advisory lock
// serialises test binaries sharing one server.
func buildTemplate(ctx context.Context, admin string) (string, error) {
	name := "chatd_tpl_" + sqlHash()[:16]
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to the test server: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", chatdsql.LockTestTemplate); err != nil {
		return "", err
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", chatdsql.LockTestTemplate) //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	building := name + "_building"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{building}.Sanitize()); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()); err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, withDatabase(admin, building))
	if err != nil {
		return "", err
	}
	m, err := migrate.New(pool)
	if err == nil {
		_, err = m.Up(ctx)
		_ = m.Close()
	}
	pool.Close()
	if err != nil {
		return "", fmt.Errorf("migrate the template database: %w", err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{building}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	return name, nil
}

func sqlHash() string {
	h := sha256.New()
	for _, fsys := range []fs.FS{chatdsql.Migrations(), chatdsql.Triggers()} {
		names, _ := fs.Glob(fsys, "*.sql")
		sort.Strings(names)
		for _, n := range names {
			b, _ := fs.ReadFile(fsys, n)
			fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func withDatabase(rawURL, name string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		log.Panicf("dbtest: bad database URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// NewURL creates a database of the test's own, cloned from the migrated
// template, drops it when the test ends, and returns its URL.
func NewURL(t testing.TB) string {
	t.Helper()
	admin, tpl, err := setup(context.Background())
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return clone(t, admin, tpl)
}

// CloneURL creates a database of the test's own as a copy of the test
// database at rawURL, which nothing may be connected to (close its pools
// first), drops it when the test ends, and returns its URL: two copies of
// one state, for comparing two ways of changing it.
func CloneURL(t testing.TB, rawURL string) string {
	t.Helper()
	admin, _, err := setup(context.Background())
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("dbtest: bad database URL: %v", err)
	}
	return clone(t, admin, strings.TrimPrefix(u.Path, "/"))
}

// clone creates a database from the template tpl, dropped when the test
// ends, and returns its URL.
func clone(t testing.TB, admin, tpl string) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("chatd_t_%s_%d", runID, clonesSeq.Add(1))
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("dbtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tpl}.Sanitize()); err != nil {
		t.Fatalf("dbtest: clone template: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("CHATD_TEST_KEEP_FAILED") != "" {
			t.Logf("dbtest: kept database %s for inspection", name)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("dbtest: drop %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("dbtest: drop %s: %v", name, err)
		}
	})
	return withDatabase(admin, name)
}

// New returns a pool on a database of the test's own (see NewURL), closed
// when the test ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return NewPool(t, Config(t))
}

// Config is the pool configuration New uses, on a database of the test's
// own, for a test that adjusts it (a tracer, say) before NewPool.
func Config(t testing.TB) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(NewURL(t))
	if err != nil {
		t.Fatalf("dbtest: pool: %v", err)
	}
	cfg.MaxConns = 16 // as a server with a few workers and open streams has
	store.Configure(cfg)
	return cfg
}

// NewPool opens a pool on cfg, closed when the test ends.
func NewPool(t testing.TB, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("dbtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// AdminURL returns the URL of the test server's maintenance database, for
// tests that manage databases themselves (for example migration tests).
func AdminURL(t testing.TB) string {
	t.Helper()
	admin, _, err := setup(context.Background())
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return admin
}

// EmptyURL creates an empty (unmigrated) database for the test and returns
// its URL.
func EmptyURL(t testing.TB) string {
	t.Helper()
	admin := AdminURL(t)
	name := fmt.Sprintf("chatd_e_%s_%d", runID, clonesSeq.Add(1))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("dbtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("dbtest: create: %v", err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return withDatabase(admin, name)
}
