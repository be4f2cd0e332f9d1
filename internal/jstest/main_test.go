package jstest

import (
	"bytes"
	"context"
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
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// sdkDir is the TypeScript SDK, where the npm tools are installed.
var sdkDir, _ = filepath.Abs("../../sdk/typescript")

var (
	npmOnce   sync.Once
	npmErr    error
	aiNPMOnce sync.Once
	aiNPMErr  error
	buildOnce sync.Once
	buildErr  error
)

// need skips the test when a program is missing, except under CI=true,
// where it fails (.ci/run installs them).
func need(t *testing.T, programs ...string) {
	t.Helper()
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			msg := fmt.Sprintf("%s is not installed (Debian: apt-get install -y nodejs npm chromium): %v", p, err)
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// npm makes sure the SDK's pinned npm packages are installed (make test
// installs them first; this covers a bare go test).
func npm(t *testing.T) {
	t.Helper()
	need(t, "node", "npm")
	npmOnce.Do(func() { npmErr = npmCI(sdkDir) })
	if npmErr != nil {
		t.Fatal(npmErr)
	}
}

// npmAISDK makes sure the AI SDK adapter's pinned npm packages are
// installed, and the SDK it links to (file:../typescript) is built.
func npmAISDK(t *testing.T) {
	t.Helper()
	buildSDK(t)
	aiNPMOnce.Do(func() { aiNPMErr = npmCI(aiSDKDir) })
	if aiNPMErr != nil {
		t.Fatal(aiNPMErr)
	}
}

// buildSDK compiles the SDK (src and test, into dist) once per test
// binary: the SDK's tests run it, and the AI SDK adapter imports it
// (file:../typescript), so no test rewrites it while another reads it.
func buildSDK(t *testing.T) {
	t.Helper()
	npm(t)
	buildOnce.Do(func() { _, buildErr = run(context.Background(), sdkDir, nil, bin("tsc"), "-p", "tsconfig.json") })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

// npmCI runs npm ci in dir unless its install is newer than its lockfile.
func npmCI(dir string) error {
	stamp, err1 := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	lock, err2 := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err1 == nil && err2 == nil && !stamp.ModTime().Before(lock.ModTime()) {
		return nil
	}
	_, err := run(context.Background(), dir, nil, "npm", "ci", "--no-audit", "--no-fund")
	return err
}

// run runs a command and returns its combined output; an error carries it.
func run(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// bin is an installed npm program of the SDK.
func bin(name string) string { return filepath.Join(sdkDir, "node_modules", ".bin", name) }

// aiBin is an installed npm program of the AI SDK adapter.
func aiBin(name string) string { return filepath.Join(aiSDKDir, "node_modules", ".bin", name) }

// servedDocument is the document GET /api/v1/openapi.json serves, as
// `chatd openapi` prints it.
func servedDocument() []byte {
	return append(httpapi.New(httpapi.Options{}).OpenAPIDocument(), '\n')
}

// writeDocument writes the served document to a temporary file.
func writeDocument(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(path, servedDocument(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
