package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/pglocal"
	"github.com/chatd/chatd/internal/proctest"
	"github.com/chatd/chatd/internal/store"
)

// TestMalformedDatabaseURL: every command that opens the database answers
// a URL it cannot parse with one line and exit 1, never a panic (the real
// binary, so that a panic would show as exit 2 and a stack).
func TestMalformedDatabaseURL(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "./cmd/server")
	for _, args := range [][]string{
		{"server", "--listen", "127.0.0.1:0"},
		{"token", "create", "--user", "alice"},
		{"check"},
		{"migrate", "up"},
		{"migrate", "status"},
	} {
		for _, url := range []string{"notaurl", "postgres://host:notaport/db"} {
			cmd := exec.CommandContext(t.Context(), bin, append(args, "--database-url", url)...)
			cmd.Env = append(os.Environ(), "CHATD_LOG_FORMAT=text")
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("chatd %v --database-url %s: %v, want exit 1\n%s", args, url, err, out)
				continue
			}
			msg := strings.TrimSpace(string(out))
			if strings.Count(msg, "\n") != 0 || !strings.HasPrefix(msg, "chatd: --database-url: ") {
				t.Errorf("chatd %v --database-url %s: want one line naming --database-url:\n%s", args, url, out)
			}
			cmd = exec.CommandContext(t.Context(), bin, append(args, "--database-url", "postgres://x/db", "--direct-database-url", url)...)
			cmd.Env = append(os.Environ(), "CHATD_LOG_FORMAT=text")
			out, err = cmd.CombinedOutput()
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 ||
				!strings.HasPrefix(string(out), "chatd: --direct-database-url: ") {
				t.Errorf("chatd %v --direct-database-url %s: %v, want exit 1 and one line naming --direct-database-url:\n%s", args, url, err, out)
			}
		}
	}
}

// TestToolsDoNotCreateAClusterQuietly: token create and check, with no
// --database-url and no cluster under --data-dir, say where they looked and
// create nothing unless --create-cluster asks for it.
func TestToolsDoNotCreateAClusterQuietly(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	for _, args := range [][]string{{"token", "create", "--user", "alice"}, {"check"}} {
		_, _, err := runCmd(t.Context(), append(args, "--data-dir", dataDir)...)
		if exitCode(err) != 1 || err == nil || !strings.Contains(err.Error(), "no local PostgreSQL cluster at ") ||
			!strings.Contains(err.Error(), "--create-cluster") {
			t.Errorf("chatd %v in an empty data dir: exit %d, %v", args, exitCode(err), err)
		}
	}
	entries, err := os.ReadDir(dataDir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("the data dir is no longer empty: %v %v", entries, err)
	}
	dir, err := pglocal.ClusterDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s was created (%v)", dir, err)
	}
}

// TestSighupDrains: SIGHUP (the terminal closed) stops the server through
// the same drain as SIGINT and SIGTERM: "shutting down", then "stopped",
// exit 0.
func TestSighupDrains(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "./cmd/server")
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "server", "--listen", "127.0.0.1:0", "--database-url", dbtest.NewURL(t),
		"--migrate", "--workers", "1", "--log-format", "text")
	cmd.Env = os.Environ()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var log []string
	for line := range lines {
		log = append(log, line)
		if strings.Contains(line, "chatd listening") {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for line := range lines {
		log = append(log, line)
	}
	err = cmd.Wait()
	all := strings.Join(log, "\n")
	if err != nil || !strings.Contains(all, "shutting down") || !strings.Contains(all, "msg=stopped") {
		t.Fatalf("after SIGHUP: %v\n%s", err, all)
	}
}

// TestTokenListRevokeExpiry: chatd token create --expires-in, token list and
// token revoke (item 13).
func TestTokenListRevokeExpiry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewURL(t)
	token, errOut, err := runCmd(ctx, "token", "create", "--user", "dora", "--expires-in", "2h", "--database-url", url)
	if err != nil || !strings.HasPrefix(errOut, "chatd: the token expires at ") {
		t.Fatalf("create: %v %q", err, errOut)
	}
	if _, _, err := runCmd(ctx, "token", "create", "--user", "erin", "--database-url", url); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCmd(ctx, "token", "list", "--user", "dora", "--database-url", url)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 2 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[1], " dora ") ||
		strings.Contains(lines[1], "never") || strings.Contains(lines[1], "expired") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	id := strings.Fields(lines[1])[0]
	if out, _, err := runCmd(ctx, "token", "list", "--database-url", url); err != nil || strings.Count(out, "\n") != 3 ||
		!strings.Contains(out, " erin ") || !strings.Contains(out, "never") {
		t.Fatalf("list all: %v\n%s", err, out)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := store.New(pool).Authenticate(ctx, strings.TrimSpace(token)); err != nil {
		t.Fatalf("the new token: %v", err)
	}
	if out, _, err := runCmd(ctx, "token", "revoke", id, "--database-url", url); err != nil || !strings.HasPrefix(out, "revoked "+id) {
		t.Fatalf("revoke: %v %q", err, out)
	}
	if _, err := store.New(pool).Authenticate(ctx, strings.TrimSpace(token)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the revoked token: %v", err)
	}
	if _, _, err := runCmd(ctx, "token", "revoke", id, "--database-url", url); exitCode(err) != 1 || !strings.Contains(err.Error(), "no token") {
		t.Fatalf("revoke again: %v", err)
	}
	// Scopes and the act-as capability; users.
	if _, _, err := runCmd(ctx, "token", "create", "--user", "svc", "--scopes", "read, admin", "--act-as", "--database-url", url); err != nil {
		t.Fatal(err)
	}
	if out, _, err := runCmd(ctx, "token", "list", "--user", "svc", "--database-url", url); err != nil || !strings.Contains(out, " read,admin ") ||
		!strings.Contains(out, " yes ") {
		t.Fatalf("list svc: %v\n%s", err, out)
	}
	if out, _, err := runCmd(ctx, "token", "users", "--database-url", url); err != nil || strings.Count(out, "\n") != 4 ||
		!strings.Contains(out, " svc ") {
		t.Fatalf("users: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"token", "revoke"}, {"token", "revoke", "nope"}, {"token", "create", "--user", "x", "--expires-in", "-1h"},
		{"token", "sideways"}, {"token", "create", "--user", "x", "--scopes", "root"}, {"token", "users", "extra"}} {
		if _, _, err := runCmd(ctx, append(args, "--database-url", url)...); exitCode(err) != 2 {
			t.Errorf("chatd %v: exit %d %v, want 2", args, exitCode(err), err)
		}
	}
}
