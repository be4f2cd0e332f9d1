package main

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/chatd/chatd/internal/config"
)

// isTerminal reports whether w is a terminal (not a file, a pipe or
// /dev/null): the start-up banner is for a person, the logs for machines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var termErr error
	if err := rc.Control(func(fd uintptr) { _, termErr = unix.IoctlGetTermios(int(fd), unix.TCGETS) }); err != nil {
		return false
	}
	return termErr == nil
}

// banner is what a person starting the server needs next.
type banner struct {
	base    string // http://host:port
	self    string // the command as started, e.g. bin/chatd
	dbFlag  string // the flag the token command needs to find the server's database ("" when the default)
	console bool
	cfg     *config.Config
}

// write prints the banner: the URL, how to get a token, the console, and
// the models whose provider is a local address (mockllm in the example).
func (b banner) write(w io.Writer) {
	var s strings.Builder
	fmt.Fprintf(&s, "\nchatd is ready at %s\n", b.base)
	fmt.Fprintf(&s, "  token:    %s token create --user alice%s\n", b.self, b.dbFlag)
	if b.console {
		fmt.Fprintf(&s, "  console:  %s/console/ (sign in with the token)\n", b.base)
	} else {
		fmt.Fprintf(&s, "  console:  off (start with --console to serve it)\n")
	}
	if len(b.cfg.Models) == 0 {
		fmt.Fprintf(&s, "  models:   none: start with --config FILE (examples/chatd.json) to offer some\n")
	}
	// Models by the local address their provider calls, in config order.
	var hosts []string
	models := map[string][]string{}
	for _, m := range b.cfg.Models {
		for _, p := range b.cfg.Providers {
			if host := localHost(p.BaseURL); p.Name == m.Provider && host != "" {
				if models[host] == nil {
					hosts = append(hosts, host)
				}
				models[host] = append(models[host], m.ID)
			}
		}
	}
	for _, host := range hosts {
		fmt.Fprintf(&s, "  models:   %s call %s: start that server first (the example's mock: make mockllm)\n", strings.Join(models[host], ", "), host)
	}
	s.WriteString("  stop:     Ctrl-C. The logs follow.\n\n")
	_, _ = io.WriteString(w, s.String())
}

// localHost is u's host:port when u names a loopback host, else "".
func localHost(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(p.Hostname()); p.Hostname() == "localhost" || ip != nil && ip.IsLoopback() {
		return p.Host
	}
	return ""
}
