// Package pglocal runs a PostgreSQL cluster from the locally installed server
// binaries, for `chatd server` without a database URL and for tests.
//
// The postmaster is a direct child of this process, listening only on a unix
// socket in a directory of its own, so clusters never fight over TCP ports.
// PostgreSQL refuses to run as root; when we are root the cluster runs as the
// `postgres` account (or `nobody`), and its files live where that account can
// enter. The child gets SIGQUIT if this process dies, so a killed test run or
// server does not leave a postmaster behind.
package pglocal

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/childproc"
)

// ErrNoBinaries says the PostgreSQL server binaries are not installed.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, postgres) not found: " +
	"install them (Debian/Ubuntu: apt-get install -y postgresql; Fedora: dnf install -y postgresql-server; " +
	"macOS: brew install postgresql@15), or set CHATD_PG_BINDIR to their directory, " +
	"or give chatd a database with --database-url")

// Options configure a cluster.
type Options struct {
	// Dir holds the cluster: data/ and the socket. Created if missing.
	Dir string
	// Ephemeral tunes the cluster for throwaway use (no fsync) and makes Stop
	// remove Dir.
	Ephemeral bool
	// Settings are extra `-c name=value` server settings.
	Settings map[string]string
	Logger   *slog.Logger
}

// Cluster is a running (or reused) local PostgreSQL cluster.
type Cluster struct {
	dir       string
	socketDir string
	port      int
	cmd       *exec.Cmd
	exited    chan struct{}
	ephemeral bool
	logger    *slog.Logger
}

const port = 5432

// FindBinaries returns the directory holding initdb and postgres.
func FindBinaries() (string, error) {
	var candidates []string
	if d := os.Getenv("CHATD_PG_BINDIR"); d != "" {
		candidates = append(candidates, d)
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(found, func(i, j int) bool { return pgMajor(found[i]) > pgMajor(found[j]) })
	candidates = append(candidates, found...)
	candidates = append(candidates, "/usr/local/pgsql/bin", "/opt/homebrew/bin", "/usr/local/bin")
	if p, err := exec.LookPath("postgres"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	for _, d := range candidates {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// runAs is the account the cluster runs as: ourselves, or an unprivileged
// account when we are root.
type runAs struct {
	cred     *syscall.Credential
	uid, gid int
	name     string
}

func clusterAccount() (runAs, error) {
	if os.Geteuid() != 0 {
		return runAs{uid: os.Geteuid(), gid: os.Getegid()}, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return runAs{
			cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true},
			uid:  uid, gid: gid, name: name,
		}, nil
	}
	return runAs{}, errors.New("running as root and neither the postgres nor the nobody account exists to run PostgreSQL")
}

// traversable reports whether every ancestor of dir can be entered by the
// account (PostgreSQL must reach its data directory as that account).
func traversable(dir string, acct runAs) bool {
	if acct.cred == nil {
		return true
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if errors.Is(err, os.ErrNotExist) {
			if d == filepath.Dir(d) {
				return true
			}
			continue // created below with mode 0755
		}
		if err != nil {
			return false
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return false
		}
		mode := st.Mode().Perm()
		switch {
		case int(sys.Uid) == acct.uid:
			if mode&0o100 == 0 {
				return false
			}
		case int(sys.Gid) == acct.gid:
			if mode&0o010 == 0 {
				return false
			}
		default:
			if mode&0o001 == 0 {
				return false
			}
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// ClusterDir returns where the cluster for the chatd data directory dataDir
// lives: dataDir/pg, or, when the account running PostgreSQL cannot enter
// dataDir (for example a checkout under /root), a directory under
// /var/lib/chatd named after dataDir's absolute path.
func ClusterDir(dataDir string) (string, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", err
	}
	acct, err := clusterAccount()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(abs, "pg")
	if traversable(dir, acct) {
		return dir, nil
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join("/var/lib/chatd", "pg-"+hex.EncodeToString(sum[:6])), nil
}

// Exists says whether a cluster was created in dir (by an earlier Start).
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION"))
	return err == nil
}

// Start starts the cluster in opts.Dir, creating it on first use. If a
// postmaster from an earlier Start is already serving that directory (for
// example `chatd server` while `chatd token create` runs), Start reuses it and
// Stop leaves it running.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	binDir, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	acct, err := clusterAccount()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := makeClusterDir(dir, acct); err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, socketDir: socketDir(dir), port: port, ephemeral: opts.Ephemeral, logger: logger}
	if c.socketDir != dir {
		if err := os.MkdirAll(c.socketDir, 0o700); err != nil {
			return nil, err
		}
		if acct.cred != nil {
			_ = os.Chown(c.socketDir, acct.uid, acct.gid)
		}
	}
	if c.ping(ctx) == nil {
		logger.Info("reusing running local postgres", slog.String("dir", dir))
		return c, nil
	}
	dataDir := filepath.Join(dir, "data")
	if err := initCluster(ctx, binDir, dataDir, acct, opts.Ephemeral, logger); err != nil {
		return nil, err
	}
	logPath, err := c.launch(binDir, c.serverArgs(dataDir, opts), acct)
	if err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx, logPath); err != nil {
		return nil, err
	}
	logger.Info("local postgres started", slog.String("dir", dataDir), slog.Int("pid", c.cmd.Process.Pid),
		slog.String("psql", fmt.Sprintf("psql 'host=%s port=%d user=postgres dbname=chatd'", c.socketDir, port)))
	return c, nil
}

// makeClusterDir creates dir for the account that runs PostgreSQL, which
// must be able to enter every directory above it.
func makeClusterDir(dir string, acct runAs) error {
	if !traversable(dir, acct) {
		return fmt.Errorf("the %s account cannot enter %s; PostgreSQL must run there as %s, so choose a directory outside any directory it cannot enter",
			acct.name, filepath.Dir(dir), acct.name)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("create cluster directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create cluster directory: %w", err)
	}
	if acct.cred != nil {
		if err := os.Chown(dir, acct.uid, acct.gid); err != nil {
			return fmt.Errorf("hand %s to %s: %w", dir, acct.name, err)
		}
	}
	return nil
}

// initCluster runs initdb in dataDir unless a cluster is already there.
func initCluster(ctx context.Context, binDir, dataDir string, acct runAs, ephemeral bool, logger *slog.Logger) error {
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	args := []string{"-D", dataDir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale"}
	if ephemeral {
		args = append(args, "--no-sync")
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), args...)
	cmd.Dir = filepath.Dir(dataDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: acct.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb %s: %w: %s", dataDir, err, strings.TrimSpace(string(out)))
	}
	logger.Info("created local postgres cluster", slog.String("dir", dataDir),
		slog.Duration("took", time.Since(start)))
	return nil
}

// serverArgs is the postmaster's command line: the socket-only listener,
// the ephemeral cluster's durability trade, then the caller's settings, in
// a stable order.
func (c *Cluster) serverArgs(dataDir string, opts Options) []string {
	settings := map[string]string{
		"listen_addresses":        "",
		"unix_socket_directories": c.socketDir,
		"port":                    strconv.Itoa(port),
	}
	if opts.Ephemeral {
		settings["fsync"] = "off"
		settings["synchronous_commit"] = "off"
		settings["full_page_writes"] = "off"
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	args := []string{"-D", dataDir}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-c", k+"="+settings[k])
	}
	return args
}

// launch starts the postmaster with its output appended to postgres.log,
// whose path it returns.
func (c *Cluster) launch(binDir string, args []string, acct runAs) (string, error) {
	logPath := filepath.Join(c.dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", err
	}
	if acct.cred != nil {
		_ = os.Chown(logPath, acct.uid, acct.gid)
	}
	c.cmd = exec.Command(filepath.Join(binDir, "postgres"), args...)
	c.cmd.Dir = c.dir
	c.cmd.Stdout = logFile
	c.cmd.Stderr = logFile
	c.cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: acct.cred,
		Pdeathsig:  syscall.SIGQUIT,
		Setpgid:    true,
	}
	c.exited = make(chan struct{})
	err = childproc.Start(c.cmd, func(error) {
		logFile.Close()
		close(c.exited)
	})
	if err != nil {
		logFile.Close()
		return "", fmt.Errorf("start postgres: %w", err)
	}
	return logPath, nil
}

// waitReady polls until the postmaster accepts connections, it exits, or
// a minute passes.
func (c *Cluster) waitReady(ctx context.Context, logPath string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := c.ping(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			_ = c.Stop(context.Background())
			return fmt.Errorf("postgres did not accept connections within 60s (log: %s): %w", logPath, err)
		}
		select {
		case <-c.exited:
			return fmt.Errorf("postgres exited during start-up: %s", tail(logPath, 20))
		case <-ctx.Done():
			_ = c.Stop(context.Background())
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// socketDir keeps the socket path under the kernel's 107-byte limit.
func socketDir(dir string) string {
	if len(dir)+len("/.s.PGSQL.5432") < 100 {
		return dir
	}
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(os.TempDir(), "chatd-pg-"+hex.EncodeToString(sum[:6]))
}

func (c *Cluster) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// URL returns a connection URL for database name on this cluster.
func (c *Cluster) URL(name string) string {
	q := url.Values{}
	q.Set("host", c.socketDir)
	q.Set("port", strconv.Itoa(c.port))
	q.Set("sslmode", "disable")
	return "postgres://postgres@/" + url.PathEscape(name) + "?" + q.Encode()
}

// Dir is the cluster directory.
func (c *Cluster) Dir() string { return c.dir }

// EnsureDatabase creates database name if it does not exist.
func (c *Cluster) EnsureDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// Stop shuts the postmaster down (fast shutdown: sessions are disconnected,
// committed work is safe) if this Cluster started it. An ephemeral cluster's
// directory is removed.
func (c *Cluster) Stop(ctx context.Context) error {
	if c.cmd == nil {
		return nil
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
	case <-ctx.Done():
		_ = c.cmd.Process.Signal(syscall.SIGQUIT)
		<-c.exited
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Signal(syscall.SIGQUIT)
		<-c.exited
	}
	c.logger.Info("local postgres stopped", slog.String("dir", c.dir))
	if c.ephemeral {
		if err := os.RemoveAll(c.dir); err != nil {
			return err
		}
		if c.socketDir != c.dir {
			_ = os.RemoveAll(c.socketDir)
		}
	}
	return nil
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// Socket returns the directory of the cluster's unix socket and its port:
// one host of a multi-host URL (host=dir1,dir2&port=p1,p2).
func (c *Cluster) Socket() (dir string, port int) { return c.socketDir, c.port }

// Standby makes a streaming standby of c in opts.Dir (pg_basebackup, WAL
// streamed during the copy) that connects to c as application name app
// (what synchronous_standby_names names), and starts it. c must accept
// replication connections from the local socket (initdb's default here).
func (c *Cluster) Standby(ctx context.Context, app string, opts Options) (*Cluster, error) {
	binDir, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	acct, err := clusterAccount()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create standby directory: %w", err)
	}
	if acct.cred != nil {
		if err := os.Chown(dir, acct.uid, acct.gid); err != nil {
			return nil, fmt.Errorf("hand %s to %s: %w", dir, acct.name, err)
		}
	}
	conninfo := fmt.Sprintf("host=%s port=%d user=postgres application_name=%s", c.socketDir, c.port, app)
	dataDir := filepath.Join(dir, "data")
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "pg_basebackup"), "-D", dataDir, "-d", conninfo,
		"-R", "-X", "stream", "-c", "fast", "--no-sync")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: acct.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pg_basebackup from %s: %w: %s", c.dir, err, strings.TrimSpace(string(out)))
	}
	// -R wrote a primary_conninfo; this one, later in the file, wins and
	// names the standby for synchronous_standby_names.
	auto, err := os.OpenFile(filepath.Join(dataDir, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = fmt.Fprintf(auto, "primary_conninfo = '%s'\n", conninfo)
	if cerr := auto.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return Start(ctx, opts)
}

// Promote ends a standby's recovery (pg_promote) and returns once it
// accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var done bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&done); err != nil {
		return err
	}
	if !done {
		return errors.New("pg_promote: the standby did not finish its promotion within 60 s")
	}
	return nil
}

// Kill ends the postmaster and every process of it at once with SIGKILL,
// as when its machine dies: nothing is flushed or handed over. Only a
// cluster this Cluster started can be killed.
func (c *Cluster) Kill() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.exited
	c.logger.Info("local postgres killed", slog.String("dir", c.dir))
}
