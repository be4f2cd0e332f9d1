package pgbouncertest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/childproc"
)

// pgBouncer is a PgBouncer process in transaction pooling mode in front of
// one database.
type pgBouncer struct {
	// URL reaches the database through PgBouncer (its unix socket).
	URL     string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// pgbouncerBinary finds PgBouncer (Debian installs it in /usr/sbin). When it
// is missing the test is skipped, except under CI=true, where it fails:
// make test installs it.
func pgbouncerBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer"
	}
	msg := "pgbouncer is not installed (Debian: apt-get install -y pgbouncer; make test installs it)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// startPgBouncer runs PgBouncer in transaction pooling mode, with at most
// poolSize server connections, in front of the database at target (a URL on
// a local cluster's unix socket), listening on a unix socket of its own.
// PgBouncer refuses to run as root: then it runs as postgres, like the
// cluster. It is stopped when the test ends.
func startPgBouncer(t *testing.T, target string, poolSize int) *pgBouncer {
	t.Helper()
	bin := pgbouncerBinary(t)
	tu, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	q := tu.Query()
	dbname := strings.TrimPrefix(tu.Path, "/")
	dir, err := os.MkdirTemp("", "chatd-pgb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("PgBouncer refuses to run as root, and there is no postgres account to run it as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	const port = 6432 // only names the socket: .s.PGSQL.6432 in dir
	ini := fmt.Sprintf(`[databases]
chatd = host=%s port=%s dbname=%s user=%s
[pgbouncer]
listen_addr =
listen_port = %d
unix_socket_dir = %s
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 500
server_check_delay = 0
logfile = %s
pidfile = %s
`, q.Get("host"), q.Get("port"), dbname, tu.User.Username(), port, dir,
		filepath.Join(dir, "users.txt"), poolSize, filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	files := map[string]string{"pgbouncer.ini": ini, "users.txt": fmt.Sprintf("%q \"\"\n", tu.User.Username())}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := &pgBouncer{logPath: filepath.Join(dir, "pgbouncer.log"), exited: make(chan struct{})}
	b.cmd = exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	b.cmd.Dir = dir
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := childproc.Start(b.cmd, func(error) { close(b.exited) }); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	t.Cleanup(func() {
		_ = b.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-b.exited:
		case <-time.After(10 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.exited
		}
	})
	u := url.URL{Scheme: "postgres", User: url.User(tu.User.Username()), Path: "/chatd",
		RawQuery: url.Values{"host": {dir}, "port": {strconv.Itoa(port)}, "sslmode": {"disable"}}.Encode()}
	b.URL = u.String()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, b.URL)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return b
		}
		select {
		case <-b.exited:
			t.Fatalf("pgbouncer exited at start-up: %v\n%s", b.cmd.ProcessState, b.log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer did not accept connections within 20s: %v\n%s", err, b.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// log is PgBouncer's log so far.
func (b *pgBouncer) log() string {
	out, _ := os.ReadFile(b.logPath)
	return string(out)
}
