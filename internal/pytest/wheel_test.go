package pytest

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/proctest"
	"github.com/chatd/chatd/internal/testenv"
)

// supported are the Python versions the SDK supports (pyproject.toml's
// requires-python and classifiers).
var supported = []string{"3.10", "3.11", "3.12", "3.13"}

// pyrightMu serialises pyright runs: its first run installs its npm
// package into a cache the runs share.
var pyrightMu sync.Mutex

// TestPythonWheel builds the wheel and sdist with the standard backend
// (python -m build, hatchling) from a clean copy of sdk/python, checks
// what they hold, and installs the wheel into an empty virtual
// environment of every supported interpreter found (pyenv's or on PATH),
// its dependencies from PyPI constrained by requirements-dev.txt. There,
// outside the source tree, the examples run against a live chatd with the
// real mockllm and the README's rules (examples/mockllm.json), and under
// the machine's python3 they type-check with pyright --strict against the
// installed package. Under CI=true a supported interpreter missing fails.
func TestPythonWheel(t *testing.T) {
	t.Parallel()
	py := venv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	src := filepath.Join(t.TempDir(), "python")
	copyTree(t, sdkDir, src)
	dist := t.TempDir()
	if _, err := run(ctx, src, nil, py, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", dist, "."); err != nil {
		t.Fatal(err)
	}
	wheel := checkDist(t, dist)

	mock := proctest.Mockllm(t, "--script", "examples/mockllm.json")
	env := testenv.New(t, testenv.Options{ProviderURL: mock.URL})
	chatd := []string{"CHATD_URL=" + env.API.URL, "CHATD_TOKEN=" + env.Token("alice")}
	main := minor(t, py)
	found := interpreters(t)
	for _, v := range supported {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
			defer cancel()
			interp, ok := found[v]
			if !ok {
				need(t, "Python "+v, fs.ErrNotExist)
			}
			app := t.TempDir()
			vpy := emptyVenv(ctx, t, interp, app, wheel)
			typical, err := os.ReadFile(filepath.Join(sdkDir, "examples", "typical.py"))
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(app, "typical.py"), string(typical))
			write(t, filepath.Join(app, "quickstart.py"), readmeExample(t))
			if v == main {
				strict(ctx, t, app, vpy)
			}
			out, err := run(ctx, app, chatd, vpy, "typical.py")
			t.Logf("Python %s, typical.py:\n%s", v, out)
			if err != nil {
				t.Logf("chatd's log, last lines:\n%s", lastLines(env.Logs(), 100))
				t.Fatal(err)
			}
			for _, want := range []string{"report: ", "failed: refused: ", "cancelled: interrupted",
				"refused: HTTP 400 ['response_format.json_schema.name']", "answer: mockllm: #weather",
				"async reports: [", "async answer: mockllm: #weather", "async status: "} {
				if !strings.Contains(out, want) {
					t.Errorf("typical.py under Python %s did not print %q", v, want)
				}
			}
			if out, err := run(ctx, app, chatd, vpy, "quickstart.py"); err != nil || strings.TrimSpace(out) == "" {
				t.Fatalf("quickstart.py: %v %q", err, out)
			}
		})
	}
}

// emptyVenv makes an empty virtual environment with interp in dir/venv
// (not even pip: the pinned pip of sdk/python/.venv installs into it with
// --python, which saves bootstrapping one per environment), installs the
// wheel there (its dependencies from PyPI, pinned by requirements-dev.txt),
// and returns its python. The environment is checked to import the SDK
// from the wheel, not from the source tree.
func emptyVenv(ctx context.Context, t *testing.T, interp, dir, wheel string) string {
	t.Helper()
	venv := filepath.Join(dir, "venv")
	if _, err := run(ctx, dir, nil, interp, "-m", "venv", "--without-pip", venv); err != nil {
		t.Fatal(err)
	}
	vpy := filepath.Join(venv, "bin", "python")
	if _, err := run(ctx, dir, nil, tool("pip"), "--python", vpy, "install", "-q", "-c", requirements, wheel); err != nil {
		t.Fatal(err)
	}
	out, err := run(ctx, dir, nil, vpy, "-c", "import chatd, sys; print(chatd.__file__); print(sys.prefix)")
	if err != nil || !strings.HasPrefix(out, venv) || strings.Contains(out, sdkDir) {
		t.Fatalf("chatd is not imported from the wheel in %s: %v\n%s", venv, err, out)
	}
	return vpy
}

// strict type-checks the examples in dir with pyright --strict against
// the environment of vpy (the installed wheel: its py.typed and inline types).
func strict(ctx context.Context, t *testing.T, dir, vpy string) {
	t.Helper()
	write(t, filepath.Join(dir, "pyrightconfig.json"),
		`{"typeCheckingMode": "strict", "pythonVersion": "3.10", "include": ["quickstart.py", "typical.py"]}`)
	pyrightMu.Lock()
	defer pyrightMu.Unlock()
	out, err := run(ctx, dir, nil, tool("pyright"), "--pythonpath", vpy)
	if err != nil || !strings.Contains(out, "0 errors") {
		t.Fatalf("pyright --strict on the examples: %v\n%s", err, out)
	}
}

// checkDist checks the wheel and the sdist in dist, and returns the wheel.
func checkDist(t *testing.T, dist string) string {
	t.Helper()
	wheels, _ := filepath.Glob(filepath.Join(dist, "chatd_client-*-py3-none-any.whl"))
	sdists, _ := filepath.Glob(filepath.Join(dist, "chatd_client-*.tar.gz"))
	if len(wheels) != 1 || len(sdists) != 1 {
		t.Fatalf("python -m build made %v %v", wheels, sdists)
	}
	zr, err := zip.OpenReader(wheels[0])
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var files []string
	var metadata string
	for _, f := range zr.File {
		files = append(files, f.Name)
		if strings.HasSuffix(f.Name, ".dist-info/METADATA") {
			rc, _ := f.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			metadata = string(b)
		}
	}
	for _, f := range []string{"chatd/__init__.py", "chatd/py.typed", "chatd/types.py", "chatd/_client.py", "chatd/_async_client.py"} {
		if !slices.Contains(files, f) {
			t.Errorf("the wheel lacks %s (it has %v)", f, files)
		}
	}
	for _, f := range files {
		if strings.HasPrefix(f, "tests/") || strings.Contains(f, "__pycache__") {
			t.Errorf("the wheel holds %s", f)
		}
	}
	for _, want := range []string{"Requires-Python: >=3.10", "Requires-Dist: httpx", "Requires-Dist: pydantic", "Name: chatd-client"} {
		if !strings.Contains(metadata, want) {
			t.Errorf("the wheel's METADATA lacks %q:\n%s", want, metadata)
		}
	}
	inSdist := tarNames(t, sdists[0])
	for _, f := range []string{"pyproject.toml", "src/chatd/types.py", "scripts/generate.py", "tests/test_streams.py", "README.md"} {
		if !slices.ContainsFunc(inSdist, func(n string) bool { return strings.HasSuffix(n, "/"+f) }) {
			t.Errorf("the sdist lacks %s", f)
		}
	}
	return wheels[0]
}

func tarNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// interpreters finds the supported Python versions: pyenv's installs
// (PYENV_ROOT, else ~/.pyenv), then python3.X on PATH, each checked by
// running it (a pyenv shim of a version not selected fails).
func interpreters(t *testing.T) map[string]string {
	t.Helper()
	root := os.Getenv("PYENV_ROOT")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".pyenv")
	}
	found := map[string]string{}
	for _, v := range supported {
		cands, _ := filepath.Glob(filepath.Join(root, "versions", v+".*", "bin", "python"+v))
		slices.Reverse(cands) // the newest patch release first
		if p, err := exec.LookPath("python" + v); err == nil {
			cands = append(cands, p)
		}
		for _, c := range cands {
			if got, err := run(t.Context(), "", nil, c, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"); err == nil && strings.TrimSpace(got) == v {
				found[v] = c
				break
			}
		}
	}
	t.Logf("Python interpreters: %v", found)
	return found
}

// minor is the X.Y version of an interpreter.
func minor(t *testing.T, py string) string {
	t.Helper()
	out, err := run(t.Context(), "", nil, py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// readmeExample is the python block after the README's readme-example marker.
func readmeExample(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sdkDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- readme-example:[^>]*-->\n```python\n(.*?)\n```").FindSubmatch(b)
	if m == nil {
		t.Fatal("sdk/python/README.md has no readme-example block")
	}
	return string(m[1]) + "\n"
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the SDK without what the tests and builds leave there.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() && (d.Name() == ".venv" || d.Name() == "dist" || d.Name() == "__pycache__" || d.Name() == ".pytest_cache") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
