package tools

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestWorkspaceConfinement(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "README.md"), []byte("make test\n"), 0o644))
	must(os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "sub", "a.txt"), []byte(strings.Repeat("x", MaxReadBytes+10)), 0o644))
	must(os.WriteFile(filepath.Join(dir, "bin"), []byte{0xff, 0xfe, 0x00}, 0o644))
	must(os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "link")))
	must(os.Symlink(outside, filepath.Join(dir, "linkdir")))

	ts, err := Workspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	read, list := ts[0].Run, ts[1].Run
	run := func(f func(context.Context, json.RawMessage) (string, error), args string) (string, error) {
		return f(t.Context(), json.RawMessage(args))
	}

	if out, err := run(read, `{"path":"README.md"}`); err != nil || out != "make test\n" {
		t.Fatalf("read README: %q %v", out, err)
	}
	if out, err := run(read, `{"path":"/sub/../README.md"}`); err != nil || out != "make test\n" {
		t.Fatalf("read with dots inside: %q %v", out, err)
	}
	if out, err := run(read, `{"path":"sub/a.txt"}`); err != nil || !strings.Contains(out, "[10 more bytes; call read_file with offset 65536]") {
		t.Fatalf("long file: %d bytes, %v", len(out), err)
	}
	if out, err := run(list, `{}`); err != nil || out != "README.md\nbin\nlink\nlinkdir\nsub/" {
		t.Fatalf("list: %q %v", out, err)
	}
	for _, tc := range []struct{ args, want string }{
		{`{"path":"../../../etc/passwd"}`, "does not exist"},
		{`{"path":"link"}`, "outside the workspace"},
		{`{"path":"linkdir/secret.txt"}`, "outside the workspace"},
		{`{"path":"bin"}`, "not a UTF-8 text file"},
		{`{"path":"sub"}`, "is a directory"},
		{`{"path":"nope"}`, "does not exist"},
		{`{"path":"README.md","extra":1}`, "invalid arguments"},
		{`{}`, "path is required"},
	} {
		out, err := run(read, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(out, "secret") {
			t.Errorf("read %s: %q %v, want an error containing %q", tc.args, out, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), dir) {
			t.Errorf("read %s: error reveals the host path: %v", tc.args, err)
		}
	}
	if out, err := run(list, `{"path":"linkdir"}`); err == nil {
		t.Errorf("list through a symlink out of the workspace: %q", out)
	}
}

// A FIFO (or any other non-regular file) is refused at once: opening a FIFO
// for reading used to block until a writer came, holding the worker, the
// interrupt and the drain.
func TestReadFileRefusesNonRegularFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err) // not a Unix file system
	}
	ts, err := Workspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		out string
		err error
	}
	done := make(chan answer, 1)
	go func() {
		out, err := ts[0].Run(t.Context(), json.RawMessage(`{"path":"fifo"}`))
		done <- answer{out, err}
	}()
	select {
	case a := <-done:
		if a.err == nil || !strings.Contains(a.err.Error(), "fifo is not a regular file") || strings.Contains(a.err.Error(), dir) {
			t.Fatalf("read a FIFO: %q %v", a.out, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("read_file of a FIFO blocked")
	}
}

// Errors name the path as the model gave it, never the host path the
// operating system reports for an opened file (a seek past what the file
// system allows fails with the file's full name).
func TestErrorsNameWorkspacePathsOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts, err := Workspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ts[0].Run(t.Context(), json.RawMessage(`{"path":"a.txt","offset":4611686018427387904}`))
	if err != nil && (strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "a.txt")) {
		t.Errorf("seek error %q", err)
	}
	if err == nil && out != "" {
		t.Errorf("read past the end: %q", out)
	}
	// Whatever the file system allows, an error carrying a host path is
	// reported with the workspace-relative name.
	hostErr := &fs.PathError{Op: "seek", Path: filepath.Join(dir, "a.txt"), Err: syscall.EINVAL}
	for _, e := range []error{hostErr, errors.New("read " + dir + "/a.txt: i/o error")} {
		if got := explain(e, "a.txt").Error(); strings.Contains(got, dir) || !strings.HasPrefix(got, "a.txt") {
			t.Errorf("explain(%v) = %q", e, got)
		}
	}
}
