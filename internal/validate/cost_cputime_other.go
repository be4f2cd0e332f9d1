//go:build !linux

package validate

import "time"

// threadCPU runs f and returns its wall time (no per-thread CPU clock
// here: an over-charge on a loaded machine).
func threadCPU(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}
