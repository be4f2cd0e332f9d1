package crashtest

import (
	"context"
	"fmt"
	"net"
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
	"github.com/chatd/chatd/internal/pglocal"
)

// pafCluster is a pg_auto_failover formation of the test's own: a
// monitor and two Postgres nodes, each a `pg_autoctl ... --run` process
// (the keeper, which runs its postgres) in a process group of its own, on
// loopback ports, as the postgres account when root.
type pafCluster struct {
	t     *testing.T
	dir   string
	env   []string
	cred  *syscall.Credential
	ports [3]int // the monitor's, node 1's, node 2's
	procs [3]*exec.Cmd
	gone  [3]chan struct{}
}

// pgAutoctl is Debian's pg_auto_failover command (postgresql-15-auto-failover).
const pgAutoctl = "/usr/bin/pg_autoctl"

// startAutoFailover starts the monitor, then node 1 (the primary, with
// the chatd database), then node 2, which pg_auto_failover makes a
// synchronous standby; it returns once node 2 is secondary. The
// monitor's timeouts are cut to seconds so that a failover takes a few
// seconds rather than its defaults' half minute.
func startAutoFailover(t *testing.T) *pafCluster {
	t.Helper()
	if _, err := os.Stat(pgAutoctl); err != nil {
		t.Fatalf("pg_auto_failover is not installed (apt-get install -y postgresql-15-auto-failover; make failover-deps): %v", err)
	}
	bin, err := pglocal.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	c := &pafCluster{t: t, dir: failoverDir(t)}
	c.env = append(childEnv(), "PATH="+bin+":/usr/bin:/bin", "XDG_CONFIG_HOME="+filepath.Join(c.dir, "config"),
		"XDG_DATA_HOME="+filepath.Join(c.dir, "data"), "PG_CONFIG="+filepath.Join(bin, "pg_config"))
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		if err := os.Chown(c.dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.env = append(c.env, "HOME="+c.dir)
	}
	for i := range c.ports {
		c.ports[i] = freePort(t)
	}
	t.Cleanup(c.stop)
	began := time.Now()
	c.start(0, "monitor", "--pgdata", filepath.Join(c.dir, "monitor"), "--pgport", strconv.Itoa(c.ports[0]),
		"--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--auth", "trust", "--no-ssl")
	poll(t, 60*time.Second, "the pg_auto_failover monitor", func() bool { return c.monitorQuery("SELECT 1") == "1" })
	c.tuneMonitor()
	for node := 1; node <= 2; node++ {
		c.start(node, "postgres", "--pgdata", filepath.Join(c.dir, fmt.Sprintf("node%d", node)), "--pgport", strconv.Itoa(c.ports[node]),
			"--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--auth", "trust", "--no-ssl", "--dbname", "chatd",
			"--name", fmt.Sprintf("node%d", node), "--monitor", c.monitorURL())
		want := map[int]string{1: "single", 2: "secondary"}[node]
		poll(t, 2*time.Minute, fmt.Sprintf("node %d to be %s", node, want), func() bool { return c.state(node) == want })
		t.Logf("pg_auto_failover: node %d %s after %s", node, want, time.Since(began).Round(time.Millisecond))
		if node == 2 {
			poll(t, time.Minute, "node 1 to wait for node 2 (synchronous_standby_names)", func() bool {
				return queryText(c.nodeURL(1), "SELECT current_setting('synchronous_standby_names') <> ''") == "true"
			})
		}
		if node == 1 {
			// The standby's pg_basebackup waits for a checkpoint, spread
			// over minutes by default: make it immediate.
			for _, sql := range []string{"ALTER SYSTEM SET checkpoint_completion_target = 0", "SELECT pg_reload_conf()"} {
				if err := execSQL(c.nodeURL(1), sql); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return c
}

// tuneMonitor cuts the monitor's timeouts from tens of seconds to
// seconds: it declares a silent node unhealthy after 3 s and promotes
// after 3 s more.
func (c *pafCluster) tuneMonitor() {
	c.t.Helper()
	for _, set := range []string{"primary_demote_timeout = 3000", "node_considered_unhealthy_timeout = 3000",
		"health_check_period = 1000", "health_check_retry_delay = 500", "health_check_timeout = 1000"} {
		if err := execSQL(c.monitorSuperuser(), "ALTER SYSTEM SET pgautofailover."+set); err != nil {
			c.t.Fatal(err)
		}
	}
	c.monitorQuery("SELECT pg_reload_conf()")
}

// freePort returns a loopback TCP port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (c *pafCluster) monitorURL() string {
	return fmt.Sprintf("postgres://autoctl_node@127.0.0.1:%d/pg_auto_failover?sslmode=disable", c.ports[0])
}

// url is the multi-host URL pg_auto_failover's `show uri` gives, for the
// chatd database.
func (c *pafCluster) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/chatd?sslmode=disable&target_session_attrs=read-write",
		c.ports[1], c.ports[2])
}

// nodeURL is one node's chatd database.
func (c *pafCluster) nodeURL(node int) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/chatd?sslmode=disable", c.ports[node])
}

// start runs `pg_autoctl create <what> ... --run` as process i.
func (c *pafCluster) start(i int, what string, args ...string) {
	c.t.Helper()
	logPath := filepath.Join(c.dir, fmt.Sprintf("pg_autoctl-%d.log", i))
	log, err := os.Create(logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(pgAutoctl, append(append([]string{"create", what}, args...), "--run")...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = c.dir, c.env, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	gone := make(chan struct{})
	if err := childproc.Start(cmd, func(error) { log.Close(); close(gone) }); err != nil {
		c.t.Fatalf("pg_autoctl create %s: %v", what, err)
	}
	c.procs[i], c.gone[i] = cmd, gone
	c.t.Cleanup(func() {
		if c.t.Failed() {
			c.t.Logf("pg_autoctl %d (%s), last lines:\n%s", i, what, tailFile(logPath, 30))
		}
	})
}

// kill SIGKILLs process i's group: the keeper and its postgres die at
// once, as when their machine does.
func (c *pafCluster) kill(i int) {
	if p := c.procs[i]; p != nil && p.Process != nil {
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
		<-c.gone[i]
	}
}

// stop ends the nodes, then the monitor: SIGTERM (pg_autoctl stops its
// postgres), SIGKILL after 20 s.
func (c *pafCluster) stop() {
	for _, i := range []int{2, 1, 0} {
		p := c.procs[i]
		if p == nil || p.Process == nil {
			continue
		}
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		select {
		case <-c.gone[i]:
		case <-time.After(20 * time.Second):
			c.kill(i)
		}
	}
}

func (c *pafCluster) monitorSuperuser() string {
	return strings.Replace(c.monitorURL(), "autoctl_node@", "postgres@", 1)
}

// monitorQuery runs one query on the monitor as the superuser and
// returns its value as text ("" on any failure: callers poll).
func (c *pafCluster) monitorQuery(sql string) string { return queryText(c.monitorSuperuser(), sql) }

// state is what the monitor last heard node (1 or 2) report.
func (c *pafCluster) state(node int) string {
	return c.monitorQuery(fmt.Sprintf("SELECT reportedstate FROM pgautofailover.node WHERE nodename = 'node%d'", node))
}

// writable says whether node accepts writes now.
func (c *pafCluster) writable(node int) bool {
	return queryText(c.nodeURL(node), "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'") == "true"
}

// queryText runs sql on url and returns its one value as text, or "".
func queryText(url, sql string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return ""
	}
	defer conn.Close(context.Background())
	var out *string
	if err := conn.QueryRow(ctx, "SELECT ("+sql+")::text").Scan(&out); err != nil || out == nil {
		return ""
	}
	return *out
}

// execSQL runs one command on url.
func execSQL(url, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// TestFailoverAutomatic: the same load and checks as
// TestFailoverSynchronousStandby, on a pg_auto_failover formation (a
// monitor, a primary and a synchronous standby, Debian's
// postgresql-15-auto-failover) whose primary node, keeper and postgres,
// is SIGKILLed: the monitor notices and promotes the standby by itself,
// and the replicas find it on the URL pg_auto_failover gives (both hosts,
// target_session_attrs=read-write).
func TestFailoverAutomatic(t *testing.T) {
	t.Parallel()
	paf := startAutoFailover(t)
	began := time.Now()
	rig := startRig(t, paf.url())
	t.Logf("replicas up after %s", time.Since(began).Round(time.Millisecond))
	promoted := rig.failover(failoverTurns/3, func() { paf.kill(1) }, func() time.Time {
		poll(t, 2*time.Minute, "pg_auto_failover to promote node 2", func() bool { return paf.writable(2) })
		return time.Now()
	})
	t.Logf("node 2 is %s", paf.state(2))
	repeated := rig.audit(paf.nodeURL(2), promoted)
	t.Logf("%d turns called the model again after their step committed: %v", len(repeated), repeated)
}
