// Package docs_test runs the curl examples of docs/api.md against a whole
// chatd (internal/testenv) and checks the HTTP statuses they get.
//
// An example is a ```sh block preceded by a marker line:
//
//	<!-- example: NAME status=CODE[,CODE...] [contains=TEXT] -->
//
// Each example runs on its own in `bash -euo pipefail` with CHATD (the base
// URL) and TOKEN set, in an empty directory, and with curl replaced by a
// shell function that records the status of every request. status lists the
// statuses of the example's last requests, in order (one code: the final
// request); contains, if given, must occur in the example's output (TEXT is
// everything up to the next blank, or a single-quoted text with blanks).
// Every ```sh block of the document must be an example.
//
// The model is the real mockllm binary started exactly as `make mockllm`
// starts it, with the rules of examples/mockllm.json: a user message with
// "#hold" keeps its provider call waiting (a chat kept busy), and one with
// "#weather" is answered with a call of the client tool get_weather.
package docs_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/proctest"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

func TestMain(m *testing.M) {
	code := dbtest.Run(m)
	proctest.Cleanup()
	os.Exit(code)
}

type example struct {
	name     string
	line     int
	statuses []string
	contains string
	script   string
}

var (
	markerRE = regexp.MustCompile(`^<!-- example: (\S+)((?: \w+=(?:'[^']*'|[^'\s]\S*))*) -->$`)
	attrRE   = regexp.MustCompile(`(\w+)=('[^']*'|\S+)`)
)

// parseExamples reads the examples of a Markdown document.
func parseExamples(doc string) ([]example, error) {
	var out []example
	var pending *example
	var block *strings.Builder
	otherFence := false // inside a fenced block of another language
	sc := bufio.NewScanner(strings.NewReader(doc))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case otherFence:
			otherFence = line != "```"
		case block != nil:
			if line == "```" {
				pending.script = block.String()
				out = append(out, *pending)
				pending, block = nil, nil
				continue
			}
			block.WriteString(line + "\n")
		case strings.HasPrefix(line, "<!-- example:"):
			m := markerRE.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("line %d: malformed example marker %q", n, line)
			}
			ex := &example{name: m[1], line: n}
			for _, attr := range attrRE.FindAllStringSubmatch(m[2], -1) {
				k, v := attr[1], attr[2]
				if len(v) >= 2 && strings.HasPrefix(v, "'") {
					v = v[1 : len(v)-1]
				}
				switch k {
				case "status":
					ex.statuses = strings.Split(v, ",")
				case "contains":
					ex.contains = v
				default:
					return nil, fmt.Errorf("line %d: unknown attribute %q", n, k)
				}
			}
			if len(ex.statuses) == 0 {
				return nil, fmt.Errorf("line %d: example %s has no status", n, ex.name)
			}
			pending = ex
		case line == "```sh":
			if pending == nil {
				return nil, fmt.Errorf("line %d: a sh block without an example marker (every sh block runs)", n)
			}
			block = &strings.Builder{}
		case pending != nil && strings.TrimSpace(line) != "":
			return nil, fmt.Errorf("line %d: the example marker of %s must be followed by a sh block", n, pending.name)
		case strings.HasPrefix(line, "```"):
			otherFence = true
		}
	}
	if pending != nil {
		return nil, fmt.Errorf("example %s: unterminated", pending.name)
	}
	return out, sc.Err()
}

// prelude replaces curl: the body goes to stdout as usual, the status to
// the log. Examples must not use -o or -w themselves.
const prelude = `curl() {
  local body code rc=0
  body=$(mktemp)
  code=$(command curl -sS -o "$body" -w '%{http_code}' "$@") || rc=$?
  # 28 is curl's --max-time: how the stream examples stop reading.
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 28 ]; then
    cat "$body"; rm -f "$body"; return 1
  fi
  cat "$body"; rm -f "$body"
  printf '%s\n' "$code" >> "$CHATD_STATUS_LOG"
}
`

// tools finds bash and curl; without them the test skips, except under CI
// where it fails.
func tools(t *testing.T) (string, string) {
	t.Helper()
	bash, err1 := exec.LookPath("bash")
	curl, err2 := exec.LookPath("curl")
	if err1 != nil || err2 != nil {
		msg := fmt.Sprintf("the API examples need bash and curl: %v %v", err1, err2)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bash, curl
}

func TestAPIExamples(t *testing.T) {
	bash, curl := tools(t)
	doc, err := os.ReadFile("api.md")
	if err != nil {
		t.Fatal(err)
	}
	examples, err := parseExamples(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(examples) < 25 {
		t.Fatalf("only %d examples in api.md", len(examples))
	}
	seen := map[string]bool{}
	for _, ex := range examples {
		if seen[ex.name] {
			t.Fatalf("two examples are named %s", ex.name)
		}
		seen[ex.name] = true
	}

	// The README's `make mockllm`: bin/mockllm --script examples/mockllm.json.
	mock := proctest.Mockllm(t, "--script", "examples/mockllm.json")
	env := testenv.New(t, testenv.Options{
		ProviderURL: mock.URL,
		// Held turns keep their worker busy until the test ends.
		Runner: runner.Options{MaxRunning: 64},
	})
	t.Cleanup(mock.Stop) // first: stopping mockllm answers the held turns
	token := env.Token("alice")

	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel() // every example makes chats of its own
			dir := t.TempDir()
			log := filepath.Join(dir, ".statuses")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // generous: a loaded machine
			defer cancel()
			cmd := exec.CommandContext(ctx, bash, "-euo", "pipefail", "-c", prelude+ex.script)
			cmd.Dir = dir
			cmd.Env = []string{"PATH=" + filepath.Dir(curl) + ":" + os.Getenv("PATH"), "HOME=" + dir, "LC_ALL=C",
				"CHATD=" + env.API.URL, "TOKEN=" + token, "CHATD_STATUS_LOG=" + log}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("api.md:%d: %v\nstdout:\n%s\nstderr:\n%s", ex.line, err, stdout.String(), stderr.String())
			}
			t.Logf("api.md:%d output:\n%s", ex.line, stdout.String())
			raw, _ := os.ReadFile(log)
			got := strings.Fields(string(raw))
			if len(got) < len(ex.statuses) || strings.Join(got[len(got)-len(ex.statuses):], ",") != strings.Join(ex.statuses, ",") {
				t.Fatalf("api.md:%d: statuses %v, want the last to be %v\nstdout:\n%s\nstderr:\n%s",
					ex.line, got, ex.statuses, stdout.String(), stderr.String())
			}
			if ex.contains != "" && !strings.Contains(stdout.String(), ex.contains) {
				t.Fatalf("api.md:%d: output lacks %s:\n%s", ex.line, ex.contains, stdout.String())
			}
		})
	}
}

// TestParseExamples checks the format's rules, so a broken marker cannot
// silently drop an example.
func TestParseExamples(t *testing.T) {
	good := "text\n<!-- example: a status=200 contains=\"x\":1 -->\n```sh\ncurl x\n```\n<!-- example: b status=201,202 contains='a \"b\" c' -->\n\n```sh\ny\n```\n```text\n<!-- example: not one -->\n```\n"
	exs, err := parseExamples(good)
	if err != nil || len(exs) != 2 || exs[0].contains != `"x":1` || exs[0].script != "curl x\n" ||
		strings.Join(exs[1].statuses, ",") != "201,202" || exs[1].line != 6 || exs[1].contains != `a "b" c` {
		t.Fatalf("%+v %v", exs, err)
	}
	for _, bad := range []string{
		"```sh\ncurl x\n```\n",                                  // no marker
		"<!-- example: a -->\n```sh\nx\n```\n",                  // no status
		"<!-- example: a status=200 -->\ntext\n```sh\nx\n```\n", // marker not before the block
		"<!-- example: a status=200 colour=red -->\n```sh\nx\n```\n",
		"<!-- example: a status=200 -->\n```sh\nx\n",
		"<!-- example: a status=200 contains='x -->\n```sh\nx\n```\n", // unterminated quote
	} {
		if _, err := parseExamples(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestReadmeListsEveryDoc: every document of docs/ is linked from the
// README's documentation table.
func TestReadmeListsEveryDoc(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob("*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("%v %v", docs, err)
	}
	for _, d := range docs {
		if !strings.Contains(string(readme), "](docs/"+d+")") {
			t.Errorf("README.md does not link docs/%s", d)
		}
	}
}
