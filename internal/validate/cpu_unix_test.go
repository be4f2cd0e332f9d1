//go:build unix

package validate

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the test process has used, all threads (the
// garbage collector's included). Unlike wall time it does not grow when
// other work on the machine competes for the cores.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
