// Package childproc starts child processes that must die with this one.
package childproc

import (
	"os/exec"
	"runtime"
)

// Start starts cmd, then waits for it in the background and calls exited
// with Wait's error once the child is gone. Both happen on one goroutine
// locked to its OS thread until then: the kernel sends a child's Pdeathsig
// when the thread that started it ends, not the process, and Go ends a
// thread whose goroutine exits locked to it, so a child started on a shared
// thread could be killed by some other goroutine's exit.
func Start(cmd *exec.Cmd, exited func(error)) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited(cmd.Wait())
	}()
	return <-started
}

// Run starts cmd as Start does and waits for it to exit.
func Run(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	if err := Start(cmd, func(err error) { done <- err }); err != nil {
		return err
	}
	return <-done
}
