package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xeipuuv/gojsonschema"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/pglocal"
	"github.com/chatd/chatd/internal/proctest"
	chatdsql "github.com/chatd/chatd/sql"
)

func TestMain(m *testing.M) {
	code := dbtest.Run(m)
	proctest.Cleanup()
	os.Exit(code)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// runCmd runs the chatd command line in-process.
func runCmd(ctx context.Context, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	err := run(ctx, args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestWalkthrough follows the README: a server with its own PostgreSQL,
// mockllm, a token, a structured request, and a succeeded receipt whose value
// validates against the schema sent.
func TestWalkthrough(t *testing.T) {
	t.Parallel()
	// make mockllm: the real binary with the example rules.
	mock := proctest.Mockllm(t, "--script", "examples/mockllm.json")

	dataDir, err := os.MkdirTemp("", "chatd-walkthrough-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	_ = os.Chmod(dataDir, 0o755)
	// make run's config, examples/chatd.json, with the mock where this
	// test's mockllm listens.
	example, err := os.ReadFile("../../examples/chatd.json")
	if err != nil {
		t.Fatal(err)
	}
	const exampleMock = "http://127.0.0.1:9999"
	if !bytes.Contains(example, []byte(exampleMock)) {
		t.Fatalf("examples/chatd.json does not call mockllm at %s", exampleMock)
	}
	configPath := filepath.Join(dataDir, "chatd.json")
	if err := os.WriteFile(configPath, bytes.ReplaceAll(example, []byte(exampleMock), []byte(mock.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var serverErr error
	var serverLog bytes.Buffer
	wg.Go(func() {
		serverErr = run(ctx, []string{"server", "--listen", addr, "--data-dir", dataDir, "--config", configPath,
			"--experiments", "chat-structured-output", "--log-format", "text"}, io.Discard, &syncWriter{w: &serverLog})
	})
	stopped := false
	shutdown := func() {
		if !stopped {
			stopped = true
			stop()
			wg.Wait()
		}
	}
	defer shutdown()

	base := "http://" + addr
	waitReady(t, base)

	// Terminal 3, exactly as the README has it, with bin/chatd and examples/
	// where the reader has them.
	out := runWalkthrough(t, base, dataDir)
	t.Logf("the walkthrough printed:\n%s", out)
	// What it printed is what the README says it prints.
	if err := matchReadmeOutput(readmeWalkthroughOutput(t), out); err != nil {
		t.Fatalf("the walkthrough's output differs from the README's: %v", err)
	}
	// docs/cli.md's session: its $ lines run, the rest is their output.
	script, want := cliSession(t)
	got := runScript(t, base, dataDir, "export CHATD_TOKEN=$(bin/chatd token create --user alice)\n"+script)
	if err := matchReadmeOutput(want, got); err != nil {
		t.Fatalf("docs/cli.md's session differs from what it prints: %v\nit printed:\n%s", err, got)
	}
	l := strings.Split(strings.TrimSpace(out), "\n")
	var res client.StructuredOutputResult
	if len(l) != 3 || json.Unmarshal([]byte(l[2]), &res) != nil || res.Status != client.OutputSucceeded ||
		res.ChatID.String() != l[0] || res.RequestID.String() != l[1] {
		t.Fatalf("the walkthrough printed:\n%s", out)
	}
	schema, err := os.ReadFile("../../examples/project-report.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(schema), gojsonschema.NewBytesLoader(res.Value))
	if err != nil || !v.Valid() {
		t.Fatalf("value %s does not validate: %v", res.Value, err)
	}
	waitCtx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	created := struct{ Chat client.Chat }{client.Chat{ID: res.ChatID}}

	// Without a token: 401; another user's chat: 404.
	if _, err := client.New(base, "", nil).GetChat(waitCtx, created.Chat.ID); !isStatus(err, 401) {
		t.Fatalf("no token: %v", err)
	}
	bob, bobErr, err := runCmd(context.Background(), "token", "create", "--user", "bob", "--data-dir", dataDir)
	if err != nil {
		t.Fatal(err)
	}
	// It says which cluster it used (the server's).
	if clusterDir, _ := pglocal.ClusterDir(dataDir); bobErr != "chatd: using the local PostgreSQL cluster at "+clusterDir+"\n" {
		t.Fatalf("token create said %q", bobErr)
	}
	if _, err := client.New(base, strings.TrimSpace(bob), nil).GetChat(waitCtx, created.Chat.ID); !isStatus(err, 404) {
		t.Fatalf("another user's chat: %v", err)
	}

	shutdown()
	if serverErr != nil {
		t.Fatalf("server: %v\n%s", serverErr, serverLog.String())
	}
	// The server stopped its PostgreSQL on exit.
	pidFile := filepath.Join(dataDir, "pg", "data", "postmaster.pid")
	if _, err := os.Stat(pidFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("postmaster still running after the server stopped (%v)\n%s", err, serverLog.String())
	}
}

// runWalkthrough runs the README's walkthrough block (the sh block after
// the "<!-- walkthrough" marker) in bash, in a directory laid out like the
// repository (bin/chatd, examples/), against the server at base, and returns
// what it printed.
func runWalkthrough(t *testing.T, base, dataDir string) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(readme), "<!-- walkthrough")
	_, block, ok := strings.Cut(block, "```sh\n")
	if !ok {
		t.Fatal("README.md: no sh block after the walkthrough marker")
	}
	block, _, _ = strings.Cut(block, "```")
	if !strings.Contains(block, "bin/chatd chat new") {
		t.Fatalf("the walkthrough block does not use the CLI:\n%s", block)
	}
	return runScript(t, base, dataDir, block)
}

// cliSession is docs/cli.md's example session (its last text block): the
// commands of its $ lines, as a script, and the output it shows.
func cliSession(t *testing.T) (script, output string) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(doc), "```text\n")
	block, _, _ := strings.Cut(blocks[len(blocks)-1], "```")
	var sh, out strings.Builder
	for line := range strings.Lines(block) {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			sh.WriteString(cmd)
		} else {
			out.WriteString(line)
		}
	}
	if !strings.Contains(sh.String(), "chatd chat tail") {
		t.Fatalf("docs/cli.md: the last text block is not the session:\n%s", block)
	}
	return sh.String(), out.String()
}

// runScript runs script in bash in a directory laid out like the
// repository (bin/chatd, examples/; chatd on the PATH), against the server
// at base, and returns its standard output.
func runScript(t *testing.T, base, dataDir, script string) string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	examples, _ := filepath.Abs("../../examples")
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"bin/chatd": proctest.Build(t, "./cmd/server"), "examples": examples} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + filepath.Join(dir, "bin") + ":" + os.Getenv("PATH"), "HOME=" + dir, "CHATD_URL=" + base, "CHATD_DATA_DIR=" + dataDir}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the script failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// readmeWalkthroughOutput is the README's text block after the walkthrough
// block: what the walkthrough prints.
func readmeWalkthroughOutput(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(readme), "<!-- walkthrough")
	_, rest, _ = strings.Cut(rest, "```sh\n")
	_, rest, _ = strings.Cut(rest, "```")
	_, block, ok := strings.Cut(rest, "```text\n")
	if !ok {
		t.Fatal("README.md: no text block after the walkthrough block")
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

// Placeholders of the docs' examples: an id shortened to its first
// characters ("4b0c…"), any JSON string ("…"), any number (a bare …), any
// time of day (14:02:11).
var (
	readmeID     = regexp.MustCompile(`[0-9a-f]{4}…`)
	readmeString = regexp.MustCompile(`"…"`)
	readmeNumber = regexp.MustCompile(`…`)
	readmeTime   = regexp.MustCompile(`\b[0-9]{2}:[0-9]{2}:[0-9]{2}\b`)
)

// matchReadmeOutput checks got line by line against the README's text,
// each of whose placeholders stands for an id, a string or a number; the
// same shortened id stands for the same id throughout.
func matchReadmeOutput(readme, got string) error {
	want := strings.Split(strings.TrimRight(readme, "\n"), "\n")
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if len(lines) != len(want) {
		return fmt.Errorf("%d lines, the README shows %d:\n%s", len(lines), len(want), got)
	}
	ids := map[string]string{}
	for i, w := range want {
		// Build the line's pattern: literal text between placeholders.
		var pat strings.Builder
		var names []string
		pat.WriteString("^")
		for w != "" {
			loc := readmeID.FindStringIndex(w)
			kind := "id"
			if l := readmeString.FindStringIndex(w); l != nil && (loc == nil || l[0] < loc[0]) {
				loc, kind = l, "string"
			}
			if l := readmeTime.FindStringIndex(w); l != nil && (loc == nil || l[0] < loc[0]) {
				loc, kind = l, "time"
			}
			if l := readmeNumber.FindStringIndex(w); l != nil && (loc == nil || l[0] < loc[0]) {
				loc, kind = l, "number"
			}
			if loc == nil {
				pat.WriteString(regexp.QuoteMeta(w))
				break
			}
			pat.WriteString(regexp.QuoteMeta(w[:loc[0]]))
			switch kind {
			case "id":
				pat.WriteString(`([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})`)
				names = append(names, w[loc[0]:loc[1]])
			case "string":
				pat.WriteString(`"(?:[^"\\]|\\.)*"`)
			case "time":
				pat.WriteString(`[0-9]{2}:[0-9]{2}:[0-9]{2}`)
			case "number":
				pat.WriteString(`[0-9]+`)
			}
			w = w[loc[1]:]
		}
		pat.WriteString("$")
		m := regexp.MustCompile(pat.String()).FindStringSubmatch(lines[i])
		if m == nil {
			return fmt.Errorf("line %d is\n  %s\nthe README shows\n  %s", i+1, lines[i], want[i])
		}
		for j, name := range names {
			if prev, ok := ids[name]; ok && prev != m[j+1] {
				return fmt.Errorf("line %d: %s stands for %s and %s", i+1, name, prev, m[j+1])
			}
			ids[name] = m[j+1]
		}
	}
	return nil
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func isStatus(err error, code int) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.StatusCode == code
}

func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond) // polling a process we started, not synchronising goroutines
	}
	t.Fatal("server not ready within 60s")
}

func TestMigrationsForOperators(t *testing.T) {
	t.Parallel()
	url := dbtest.EmptyURL(t)
	ctx := context.Background()

	out, _, err := runCmd(ctx, "migrate", "status", "--database-url", url)
	if exitCode(err) != 3 || !strings.Contains(out, "pending") {
		t.Fatalf("status on an empty database: exit %d, %q", exitCode(err), out)
	}
	// The server refuses to start, naming the command to run.
	_, _, err = runCmd(ctx, "server", "--database-url", url, "--listen", freeAddr(t))
	if err == nil || !strings.Contains(err.Error(), "chatd migrate up") {
		t.Fatalf("server with pending migrations: %v", err)
	}

	migrations, _ := fs.Glob(chatdsql.Migrations(), "*.sql")
	out, _, err = runCmd(ctx, "migrate", "up", "--database-url", url)
	if err != nil || strings.Count(out, "applied ") != len(migrations) || !strings.Contains(out, "applied 1 00001_init.sql") ||
		!strings.Contains(out, "trigger files applied") {
		t.Fatalf("migrate up: %v %q", err, out)
	}
	out, _, err = runCmd(ctx, "migrate", "up", "--database-url", url)
	if err != nil || !strings.Contains(out, "no migrations pending") {
		t.Fatalf("second migrate up: %v %q", err, out)
	}
	out, _, err = runCmd(ctx, "migrate", "status", "--database-url", url)
	if err != nil || !strings.Contains(out, "triggers current") {
		t.Fatalf("status after up: %v %q", err, out)
	}
	// Down all the way, one step at a time (by version: numbers may be
	// skipped), and up again.
	for i := len(migrations) - 1; i >= 0; i-- {
		version, _, _ := strings.Cut(migrations[i], "_")
		out, _, err = runCmd(ctx, "migrate", "down", "--database-url", url)
		if n, _ := strconv.Atoi(version); err != nil || !strings.Contains(out, fmt.Sprintf("reverted %d ", n)) {
			t.Fatalf("migrate down from %s: %v %q", migrations[i], err, out)
		}
	}
	if _, _, err = runCmd(ctx, "migrate", "status", "--database-url", url); exitCode(err) != 3 {
		t.Fatalf("status after down: exit %d", exitCode(err))
	}
	// Up again works after a full down (trigger functions re-created).
	if out, _, err = runCmd(ctx, "migrate", "up", "--database-url", url); err != nil {
		t.Fatalf("migrate up after down: %v %q", err, out)
	}

	// --migrate lets the server apply pending work itself: revert, then start
	// with --migrate and stop at once.
	if _, _, err = runCmd(ctx, "migrate", "down", "--database-url", url); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	addr := freeAddr(t)
	go func() {
		done <- run(sctx, []string{"server", "--database-url", url, "--listen", addr, "--migrate", "--workers", "0"}, io.Discard, io.Discard)
	}()
	waitReady(t, "http://"+addr)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, _, err = runCmd(ctx, "migrate", "status", "--database-url", url); err != nil {
		t.Fatalf("status after server --migrate: %v", err)
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "a command is required"},
		{[]string{"nope"}, 2, "unknown command"},
		{[]string{"server", "--help"}, 0, ""},
		{[]string{"migrate", "sideways", "--database-url", "postgres://x"}, 2, "unknown verb"},
		{[]string{"token", "create"}, 2, "--user is required"},
		{[]string{"server", "--experiments", "bogus"}, 1, "unknown experiment"},
		{[]string{"server", "--config", "/nonexistent.json"}, 1, "read config"},
		{[]string{"server", "--direct-database-url", "postgres://x/db"}, 1, "--direct-database-url needs --database-url"},
		{[]string{"migrate", "up", "--direct-database-url", "postgres://x/db"}, 1, "--direct-database-url needs --database-url"},
		{[]string{"server", "--oidc-issuer", "https://idp.example/"}, 1, "--jwt-audience is required"},
		{[]string{"server", "--jwks-url", "https://idp.example/keys", "--jwt-audience", "a"}, 1, "--jwks-url needs --jwt-issuer"},
		{[]string{"server", "--oidc-issuer", "https://idp.example/", "--jwks-url", "https://idp.example/keys"}, 1, "not both"},
		{[]string{"server", "--jwt-audience", "a"}, 1, "need --oidc-issuer or --jwks-url"},
		{[]string{"server", "--oidc-issuer", "idp.example", "--jwt-audience", "a"}, 1, "not an http(s) URL"},
		{[]string{"server", "--oidc-issuer", "https://idp.example/", "--jwt-audience", "a", "--jwt-user-claim", "a..b"}, 1, "--jwt-user-claim"},
	} {
		_, _, err := runCmd(ctx, tc.args...)
		if exitCode(err) != tc.code || (tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want))) {
			t.Errorf("chatd %v: exit %d err %v; want exit %d with %q", tc.args, exitCode(err), err, tc.code, tc.want)
		}
	}
}

// TestMatchReadmeOutput: the README's placeholders match ids, strings and
// numbers, one shortened id stands for one id, and anything else differs.
func TestMatchReadmeOutput(t *testing.T) {
	t.Parallel()
	const readme = "4b0c…\n{\"id\":\"4b0c…\",\"v\":\"…\",\"n\":…}\n"
	const id, other = "10b47fa4-c121-4849-89d4-430fbadd84e5", "17a8c908-f9a8-40b8-92cd-4db90107d00f"
	for got, ok := range map[string]bool{
		id + "\n{\"id\":\"" + id + "\",\"v\":\"a \\\"b\\\"\",\"n\":12}\n":    true,
		id + "\n{\"id\":\"" + other + "\",\"v\":\"a\",\"n\":12}\n":           false, // one placeholder, two ids
		id + "\n{\"id\":\"" + id + "\",\"v\":\"a\",\"n\":12,\"usage\":{}}\n": false, // a field the README lacks
		id + "\n{\"id\":\"" + id + "\",\"v\":\"a\",\"n\":12}\nextra\n":       false,
		"4b0c\n{\"id\":\"" + id + "\",\"v\":\"a\",\"n\":12}\n":               false,
		id + "\n{\"id\":\"" + id + "\",\"v\":\"a\",\"n\":\"12\"}\n":          false,
	} {
		if err := matchReadmeOutput(readme, got); (err == nil) != ok {
			t.Errorf("match(%q) = %v, want ok %v", got, err, ok)
		}
	}
}

// TestMakeBuildSaysWhatItBuilds: make build (and so make run) announces
// each build, with how long the first one takes, before it starts: on an
// empty build cache the first takes minutes and would be silent.
func TestMakeBuildSaysWhatItBuilds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "build")
	cmd.Dir = proctest.Root(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	// Not a terminal: no go build -v package list, only the announcements.
	want := "building bin/chatd (the first build takes ~5 min on 2 cores; later builds take seconds)\nbuilding bin/mockllm\n"
	if string(out) != want {
		t.Fatalf("make build printed:\n%s\nwant:\n%s", out, want)
	}
}
