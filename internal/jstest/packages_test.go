package jstest

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/testenv"
)

// TestPackages installs the TypeScript packages as a user would: `npm ci
// && npm pack` in a copy of sdk/ (no node_modules, no dist), then both
// tarballs into an empty project, which imports them as ES modules and
// from CommonJS (require of ES modules, Node 20.19+), type-checks its code
// with tsc --strict (module nodenext), and runs each README's example
// against a live chatd.
func TestPackages(t *testing.T) {
	t.Parallel()
	need(t, "node", "npm")
	npmAISDK(t) // the npm cache then holds every pinned package
	sdk := t.TempDir()
	copySDK(t, filepath.Join(sdk, "sdk"))
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	client := pack(ctx, t, filepath.Join(sdk, "sdk", "typescript"))
	adapter := pack(ctx, t, filepath.Join(sdk, "sdk", "ai-sdk"))

	// The tarballs hold the build, and the adapter needs the client by version.
	for _, tgz := range []string{client, adapter} {
		files, manifest := tarball(t, tgz)
		for _, f := range []string{"package/dist/src/index.js", "package/dist/src/index.d.ts", "package/README.md"} {
			if !slices.Contains(files, f) {
				t.Errorf("%s lacks %s (it has %v)", filepath.Base(tgz), f, files)
			}
		}
		for name, spec := range manifest.Dependencies {
			if strings.HasPrefix(spec, "file:") || strings.HasPrefix(spec, "link:") {
				t.Errorf("%s depends on %s by path (%s)", filepath.Base(tgz), name, spec)
			}
		}
	}
	if _, manifest := tarball(t, adapter); manifest.Dependencies["@chatd/client"] != "0.1.0" {
		t.Errorf("@chatd/ai-sdk depends on @chatd/client %q, want the version 0.1.0", manifest.Dependencies["@chatd/client"])
	}

	// An empty project installs them, with the versions the adapter pins.
	var pins struct{ DevDependencies map[string]string }
	readJSON(t, filepath.Join(aiSDKDir, "package.json"), &pins)
	app := t.TempDir()
	write(t, filepath.Join(app, "package.json"), `{"name": "consumer", "private": true, "type": "commonjs"}`)
	install := []string{"install", "--no-audit", "--no-fund", "--prefer-offline", client, adapter}
	for _, p := range []string{"ai", "zod", "typescript", "@types/node"} {
		install = append(install, p+"@"+pins.DevDependencies[p])
	}
	if _, err := run(ctx, app, nil, "npm", install...); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(app, "client.mts"), readmeExample(t, filepath.Join(sdkDir, "README.md")))
	write(t, filepath.Join(app, "adapter.mts"), readmeExample(t, filepath.Join(aiSDKDir, "README.md")))
	write(t, filepath.Join(app, "required.cts"), requiredCTS)
	write(t, filepath.Join(app, "tsconfig.json"), `{"compilerOptions": {"module": "nodenext", "target": "es2022", "strict": true,
		"outDir": "out", "types": ["node"]}, "files": ["client.mts", "adapter.mts", "required.cts"]}`)
	if _, err := run(ctx, app, nil, filepath.Join(app, "node_modules", ".bin", "tsc"), "-p", "tsconfig.json"); err != nil {
		t.Fatal(err)
	}
	if out, err := run(ctx, app, nil, "node", "out/required.cjs"); err != nil || !strings.Contains(out, "required: v4 function function") {
		t.Fatalf("CommonJS consumer: %v\n%s", err, out)
	}

	env := testenv.New(t, testenv.Options{})
	chatd := []string{"CHATD_URL=" + env.API.URL, "CHATD_TOKEN=" + env.Token("alice")}
	for _, example := range []string{"out/client.mjs", "out/adapter.mjs"} {
		out, err := run(ctx, app, chatd, "node", example)
		if err != nil {
			t.Fatalf("%s: %v", example, err)
		}
		t.Logf("%s printed:\n%s", example, out)
		if strings.TrimSpace(out) == "" || strings.Contains(out, "failed") {
			t.Fatalf("%s printed %q", example, out)
		}
	}
}

// requiredCTS uses both packages from CommonJS (tsc compiles the imports
// to require calls).
const requiredCTS = `import { createChatd, createChatdTransport, ChatdTurnError } from "@chatd/ai-sdk";
import { ChatdClient } from "@chatd/client";
import { responseFormat } from "@chatd/client/zod";
const model = createChatd({ baseURL: "http://127.0.0.1:8080", token: "t" })("local/mock");
const transport = createChatdTransport({ baseURL: "http://127.0.0.1:8080", token: "t" });
new ChatdClient({ baseUrl: "http://127.0.0.1:8080", token: "t" });
console.log("required:", model.specificationVersion, typeof transport.sendMessages, typeof ChatdTurnError.isInstance, typeof responseFormat);
`

// copySDK copies sdk/ without what npm installs or builds.
func copySDK(t *testing.T, to string) {
	t.Helper()
	from := filepath.Dir(sdkDir)
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "dist") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if !d.Type().IsRegular() || strings.HasSuffix(d.Name(), ".tgz") {
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

// pack runs npm ci and npm pack in dir and returns the tarball's path.
func pack(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	if _, err := run(ctx, dir, nil, "npm", "ci", "--no-audit", "--no-fund", "--prefer-offline"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(ctx, dir, nil, "npm", "pack"); err != nil {
		t.Fatal(err)
	}
	tgz, err := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if err != nil || len(tgz) != 1 {
		t.Fatalf("npm pack made %v in %s (%v)", tgz, dir, err)
	}
	return tgz[0]
}

type manifest struct{ Dependencies map[string]string }

// tarball lists a package tarball's files and reads its package.json.
func tarball(t *testing.T, path string) ([]string, manifest) {
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
	var files []string
	var m manifest
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, m
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, h.Name)
		if h.Name == "package/package.json" {
			if err := json.NewDecoder(tr).Decode(&m); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// readmeExample is the ts block after a README's readme-example marker.
func readmeExample(t *testing.T, readme string) string {
	t.Helper()
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- readme-example:[^>]*-->\n```ts\n(.*?)\n```").FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no readme-example block", readme)
	}
	return string(m[1]) + "\n"
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
