package pytest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/proctest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Run(m, proctest.Cleanup)) }

// sdkDir is the Python SDK; venvDir its virtual environment of pinned tools.
var (
	sdkDir, _    = filepath.Abs("../../sdk/python")
	venvDir      = filepath.Join(sdkDir, ".venv")
	venvOnce     sync.Once
	venvErr      error
	requirements = filepath.Join(sdkDir, "requirements-dev.txt")
)

// need fails the test when a program is missing under CI=true (.ci/run
// installs it: make py-deps), and skips it elsewhere.
func need(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s (make py-deps installs it; Debian: apt-get install -y python3 python3-venv): %v", what, err)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// python3 is the interpreter that makes the virtual environments.
func python3(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err == nil {
		_, err = run(t.Context(), "", nil, p, "-c", "import venv, ensurepip")
	}
	need(t, "python3 with venv", err)
	return p
}

// venv makes sure sdk/python/.venv holds the pinned tools: it is remade
// when requirements-dev.txt changed since it was made (the stamp is the
// file's SHA-256, as make py-deps writes it).
func venv(t *testing.T) string {
	t.Helper()
	py := python3(t)
	venvOnce.Do(func() { venvErr = makeVenv(py) })
	if venvErr != nil {
		t.Fatal(venvErr)
	}
	return filepath.Join(venvDir, "bin", "python")
}

func makeVenv(py string) error {
	req, err := os.ReadFile(requirements)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(req)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(venvDir, ".chatd-req-sha256")
	if got, err := os.ReadFile(stamp); err == nil && string(got) == want {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := os.RemoveAll(venvDir); err != nil {
		return err
	}
	if _, err := run(ctx, "", nil, py, "-m", "venv", venvDir); err != nil {
		return err
	}
	pip := filepath.Join(venvDir, "bin", "pip")
	if _, err := run(ctx, "", nil, pip, "install", "-q", "--disable-pip-version-check", "-r", requirements); err != nil {
		return err
	}
	return os.WriteFile(stamp, []byte(want), 0o644)
}

// tool is a program of the virtual environment.
func tool(name string) string { return filepath.Join(venvDir, "bin", name) }

// run runs a command and returns its combined output; an error carries it.
func run(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "PYTHONDONTWRITEBYTECODE=1", "PIP_DISABLE_PIP_VERSION_CHECK=1")
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// servedDocument is the document GET /api/v1/openapi.json serves, as
// `chatd openapi` prints it.
func servedDocument() []byte {
	return append(httpapi.New(httpapi.Options{}).OpenAPIDocument(), '\n')
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
