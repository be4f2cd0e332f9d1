package tools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	run := func(f func(json.RawMessage) (string, error), args string) (string, error) {
		return f(json.RawMessage(args))
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
