package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat times: USER_HZ, 100 on every
// Linux configuration Go supports.
const clockTick = 10 * time.Millisecond

// procStat reads a process's parent and its CPU times from /proc/<pid>/stat:
// its own (utime+stime) and that of its waited-for children (cutime+cstime).
func procStat(pid int) (ppid int, own, children time.Duration, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	return parseStat(string(b))
}

func parseStat(s string) (ppid int, own, children time.Duration, err error) {
	// The command name is in parentheses and may contain anything; the
	// fields after the last ')' start with state (field 3).
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, 0, fmt.Errorf("malformed stat %q", s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0, 0, 0, fmt.Errorf("short stat %q", s)
	}
	num := func(k int) int64 { n, _ := strconv.ParseInt(f[k], 10, 64); return n } // f[0] is field 3
	ppid = int(num(1))
	own = time.Duration(num(11)+num(12)) * clockTick      // utime, stime: fields 14, 15
	children = time.Duration(num(13)+num(14)) * clockTick // cutime, cstime: fields 16, 17
	return ppid, own, children, nil
}

// processCPU is a process's own CPU time, 0 if it cannot be read.
func processCPU(pid int) time.Duration {
	_, own, _, err := procStat(pid)
	if err != nil {
		return 0
	}
	return own
}

// clusterCPU is the CPU time of a PostgreSQL cluster: the postmaster, its
// live children (backends, background processes) and the children it has
// reaped (backends that exited), 0 if it cannot be read.
func clusterCPU(postmaster int) time.Duration {
	_, own, reaped, err := procStat(postmaster)
	if err != nil {
		return 0
	}
	total := own + reaped
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if ppid, own, _, err := procStat(pid); err == nil && ppid == postmaster {
			total += own
		}
	}
	return total
}

// postmasterPID reads the first line of the cluster's postmaster.pid.
func postmasterPID(clusterDir string) int {
	b, err := os.ReadFile(filepath.Join(clusterDir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// selfCPU is this process's CPU time (the benchmark's clients).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuSample is the CPU time of every participant at one moment.
type cpuSample struct{ chatd, postgres, mock, clients time.Duration }

func sampleCPU(chatdPIDs []int, mockPID, postmaster int) cpuSample {
	s := cpuSample{postgres: clusterCPU(postmaster), mock: processCPU(mockPID), clients: selfCPU()}
	for _, pid := range chatdPIDs {
		s.chatd += processCPU(pid)
	}
	return s
}
