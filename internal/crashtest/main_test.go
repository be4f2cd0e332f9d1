package crashtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/dbtest"
)

func TestMain(m *testing.M) {
	code := dbtest.Run(m)
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// chatdBinary builds cmd/server once per test binary (with -race when the
// tests run with it) and returns its path.
func chatdBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			buildErr = err
			return
		}
		if binDir, err = os.MkdirTemp("", "chatd-crashtest-bin-"); err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(binDir, "chatd")
		args := []string{"build", "-buildvcs=false", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "./cmd/server")
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go %v: %w\n%s", args, err, out)
			return
		}
		fmt.Fprintf(os.Stderr, "crashtest: built %s (race=%v) in %s\n", binPath, raceEnabled, time.Since(start).Round(time.Millisecond))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}
