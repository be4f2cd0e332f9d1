package main

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/prom"
)

// What a chat in flight costs, for the ceiling derived at start.
const (
	// descriptorsPerChat: over HTTP/1.1 a chat in flight holds its
	// client's connection (the long poll or the stream) and its provider
	// call's.
	descriptorsPerChat = 2
	// fixedDescriptors are kept for what is not a chat: the listeners,
	// the database pool beside it, log and config files, MCP servers'
	// pipes, webhook deliveries, the profiler.
	fixedDescriptors = 64
	// memoryPerChat is what a chat in flight may cost (its goroutines,
	// connection buffers and step: 150–190 KiB of resident memory with
	// the benchmark's small turns; longer prompts take more).
	memoryPerChat = 256 << 10
	// fixedMemory is the process's own before any chat.
	fixedMemory = 100 << 20
)

// resources are what runs out as chats go in flight.
type resources struct {
	// descriptors is RLIMIT_NOFILE's soft limit (Go raises it to the hard
	// limit at start).
	descriptors int
	// memory is the bytes the process may use: GOMEMLIMIT when set, else
	// the cgroup's limit, else the machine's memory (0: unknown).
	memory int64
	// dbConns is the pool's size (--db-max-conns).
	dbConns int
	// providerCalls bounds the provider calls in flight when every
	// configured provider has a max_concurrency (0: no bound).
	providerCalls int
}

// ceiling is what this process keeps in flight, and why.
type ceiling struct {
	// running is --max-running, resolved: the running slots.
	running int
	// bound is what set running: "descriptors", "memory" or "flag".
	bound string
	// conns is how many client connections the API serves at once; a
	// request on one past it is answered 503 with Retry-After, so that
	// accepting never runs out of descriptors.
	conns int
	// byDescriptors and byMemory are the two bounds derived.
	byDescriptors, byMemory int
	// descriptors is what they were derived from (RLIMIT_NOFILE).
	descriptors int
}

// deriveCeiling resolves --max-running (flag; negative: derive it) from
// res. Running chats are bounded by what runs out first: descriptors (a
// client and a provider connection each, beyond a fixed reserve and a
// sixteenth kept as margin for connections being refused or closed) or
// memory. The client connections then get what the running chats' provider
// connections leave.
func deriveCeiling(flag int, res resources) ceiling {
	if res.descriptors <= 0 { // unknown: not a bound
		res.descriptors = math.MaxInt32
	}
	free := max(0, res.descriptors-fixedDescriptors-res.dbConns-res.descriptors/16)
	c := ceiling{byDescriptors: free / descriptorsPerChat, byMemory: math.MaxInt32, descriptors: res.descriptors}
	if res.providerCalls > 0 && res.providerCalls < free/descriptorsPerChat {
		// Calls past the providers' limits wait without a connection.
		c.byDescriptors = free - res.providerCalls
	}
	if res.memory > 0 {
		c.byMemory = int(max(0, res.memory-fixedMemory) / memoryPerChat)
	}
	switch {
	case flag >= 0:
		c.running, c.bound = flag, "flag"
	case c.byMemory < c.byDescriptors:
		c.running, c.bound = c.byMemory, "memory"
	default:
		c.running, c.bound = c.byDescriptors, "descriptors"
	}
	c.running = min(c.running, maxMaxRunning)
	providerConns := c.running
	if res.providerCalls > 0 {
		providerConns = min(providerConns, res.providerCalls)
	}
	c.conns = max(free-providerConns, minConns)
	return c
}

// minConns is the fewest client connections served, whatever
// --max-running takes.
const minConns = 64

// readResources reads the limits of this process and the config's
// provider limits.
func readResources(dbConns int, cfg *config.Config) resources {
	res := resources{dbConns: dbConns, memory: memoryLimit()}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		res.descriptors = int(min(lim.Cur, math.MaxInt32))
	}
	for _, p := range cfg.Providers {
		if p.MaxConcurrency <= 0 { // this provider's calls are not bounded
			res.providerCalls = 0
			break
		}
		res.providerCalls += p.MaxConcurrency
	}
	return res
}

// memoryLimit is GOMEMLIMIT when set, else the cgroup's memory limit, else
// the machine's memory; 0 when none can be read.
func memoryLimit() int64 {
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		return l
	}
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64); err == nil && n > 0 && n < 1<<50 {
			return n
		}
	}
	return memTotal()
}

// memTotal is /proc/meminfo's MemTotal in bytes (0: unknown).
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// warn logs how the ceiling was derived (debug) and warns when
// --max-running is more than the descriptors hold.
func (c ceiling) warn(logger *slog.Logger, res resources) {
	logger.Debug("in-flight ceiling", slog.Int("max_running", c.running), slog.String("bound", c.bound),
		slog.Int("max_connections", c.conns), slog.Int("descriptors", res.descriptors),
		slog.Int("running_by_descriptors", c.byDescriptors), slog.Int("running_by_memory", c.byMemory),
		slog.Int64("memory_bytes", res.memory), slog.Int("provider_calls", res.providerCalls))
	if c.bound == "flag" && c.running > c.byDescriptors {
		logger.Warn(fmt.Sprintf("--max-running %d is more than the %d chats in flight the file descriptors hold (%d, two per chat); "+
			"raise the limit (ulimit -n), or calls may fail to connect", c.running, c.byDescriptors, res.descriptors),
			slog.Int("max_running", c.running), slog.Int("descriptors", res.descriptors))
	}
}

// instrument publishes the ceiling: chatd_max_running{bound}.
func (c ceiling) instrument(reg *prometheus.Registry) {
	prom.Gauge(reg, "chatd_max_running", "The running slots of this process (--max-running, resolved at start); "+
		"bound says what set it: descriptors, memory or flag.", "bound").WithLabelValues(c.bound).Set(float64(c.running))
	prom.Gauge(reg, "chatd_http_max_connections", "Client connections the API serves at once; "+
		"a request on one past it is answered 503 with Retry-After.").WithLabelValues().Set(float64(c.conns))
}
