package childproc_test

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"

	"github.com/chatd/chatd/internal/childproc"
)

// TestChildOutlivesLockedThreadExits starts a child with a Pdeathsig, then
// ends many goroutines locked to their threads (each takes its thread
// down): the child must not get the signal, since the thread that started
// it lives until it exits.
func TestChildOutlivesLockedThreadExits(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	exited := make(chan error, 1)
	if err := childproc.Start(cmd, func(err error) { exited <- err }); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread() // exits locked: its thread ends
		}()
		<-done
	}
	select {
	case err := <-exited:
		t.Fatalf("the child exited while its starter lived: %v", err)
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err == nil {
		t.Fatal("sleep exited cleanly after SIGTERM; want the signal's error")
	}
}

func TestRunReportsExit(t *testing.T) {
	t.Parallel()
	if err := childproc.Run(exec.Command("true")); err != nil {
		t.Fatal(err)
	}
	if err := childproc.Run(exec.Command("false")); err == nil {
		t.Fatal("false exited cleanly")
	}
	if err := childproc.Run(exec.Command("/nonexistent/binary")); err == nil {
		t.Fatal("a missing binary started")
	}
}
