package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// commit is set by the Makefile's build (-ldflags -X); builds without it
// fall back to the VCS stamp of the build information, if any.
var commit string

// Version describes the binary: module version, commit, Go version.
func Version() string {
	version, rev, modified := "(devel)", commit, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && rev == "":
				rev = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				modified = " (modified)"
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	return fmt.Sprintf("chatd %s commit %s%s %s %s/%s", version, rev, modified, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// PrintVersion runs `chatd version`.
func PrintVersion(w io.Writer) { fmt.Fprintln(w, Version()) }
