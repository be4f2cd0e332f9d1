package pglocal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// When set, this test binary is the child of TestKilledOwnerLeavesNoPostmaster:
// it starts a cluster, prints the postmaster's pid and waits to be killed.
const childEnv = "CHATD_PGLOCAL_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		c, err := Start(context.Background(), Options{Dir: dir, Ephemeral: true})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("pid:", c.cmd.Process.Pid)
		select {} // until SIGKILL
	}
	os.Exit(m.Run())
}

func TestKilledOwnerLeavesNoPostmaster(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "chatd-pglocal-kill-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("child: %v", err)
	}
	pidText, ok := strings.CutPrefix(strings.TrimSpace(line), "pid: ")
	if !ok {
		_ = cmd.Process.Kill()
		t.Fatalf("child said %q", line)
	}
	pid, _ := strconv.Atoi(pidText)
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("postmaster %d not running: %v", pid, err)
	}

	_ = cmd.Process.Kill() // SIGKILL: no cleanup code runs in the child
	_ = cmd.Wait()

	deadline := time.Now().Add(30 * time.Second)
	for {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			break
		}
		// A zombie is gone for our purposes: its parent (the dead child)
		// was reaped by init, which reaps it too.
		if stat, rerr := os.ReadFile(filepath.Join("/proc", pidText, "stat")); rerr == nil && strings.Contains(string(stat), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("postmaster %d survived its owner for 30s", pid)
		}
		time.Sleep(20 * time.Millisecond) // polling the OS for an exit, not synchronising goroutines
	}
}

func TestStartReusesARunningCluster(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "chatd-pglocal-reuse-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx := context.Background()
	a, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop(ctx)
	b, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if b.cmd != nil {
		t.Fatal("second Start launched another postmaster")
	}
	if err := b.EnsureDatabase(ctx, "chatd"); err != nil {
		t.Fatal(err)
	}
	_ = b.Stop(ctx) // a no-op: b did not start it
	if err := a.ping(ctx); err != nil {
		t.Fatalf("cluster stopped by a non-owner: %v", err)
	}
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("postmaster.pid after Stop: %v", err)
	}
}

func TestClusterDirFallsBackWhenUntraversable(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only root runs PostgreSQL as another account") // the fallback does not exist otherwise
	}
	private, err := os.MkdirTemp("", "chatd-private-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(private) })
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	dir, err := ClusterDir(filepath.Join(private, ".chatd"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dir, "/var/lib/chatd/") {
		t.Fatalf("cluster dir %s is inside a directory postgres cannot enter", dir)
	}
	open, err := os.MkdirTemp("", "chatd-open-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(open) })
	_ = os.Chmod(open, 0o755)
	if dir, _ := ClusterDir(filepath.Join(open, ".chatd")); dir != filepath.Join(open, ".chatd", "pg") {
		t.Fatalf("cluster dir %s, want it under the data dir", dir)
	}
}
