package validate

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU runs f on one OS thread and returns the CPU time that thread
// spent on it: unlike wall time, what the machine's other work takes does
// not count (the work budget is CPU time, cost.go).
func threadCPU(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var a, b unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &a) != nil {
		start := time.Now()
		f()
		return time.Since(start)
	}
	f()
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &b) != nil {
		return 0
	}
	return time.Duration(b.Nano() - a.Nano())
}
