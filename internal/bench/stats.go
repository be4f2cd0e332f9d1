package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// percentile returns the q-quantile (0..1) of ds by the nearest-rank method:
// the smallest value with at least q of the values at or below it.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(q * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// median of xs (the mean of the middle two for an even count); 0 if empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

var tpsRE = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)

// parsePgbenchTPS reads pgbench's "tps = N (without initial connection
// time)" line.
func parsePgbenchTPS(out []byte) (float64, error) {
	m := tpsRE.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no tps line in pgbench output:\n%s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// Machine describes where the benchmark ran.
type Machine struct {
	CPU      string
	Cores    int
	MemoryGB float64
	GoOS     string
}

func readMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoOS: runtime.GOOS + "/" + runtime.GOARCH, CPU: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemoryGB = parseMemTotalGB(b)
	}
	return m
}

// parseMemTotalGB reads MemTotal (kB) from /proc/meminfo, in GiB.
func parseMemTotalGB(b []byte) float64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / (1 << 20)
		}
	}
	return 0
}

// loadAverage returns /proc/loadavg's three figures, or "n/a".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64)
}
