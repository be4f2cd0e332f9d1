package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/chatd/chatd/internal/dbtest"
)

// The console is served only with --console, beside the API on the same
// listener.
func TestConsoleFlag(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		t.Run(map[bool]string{false: "off", true: "on"}[on], func(t *testing.T) {
			t.Parallel()
			args := []string{"server", "--listen", freeAddr(t), "--database-url", dbtest.NewURL(t), "--max-running", "0"}
			if on {
				args = append(args, "--console")
			}
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() {
				if err := run(ctx, args, io.Discard, io.Discard); err != nil {
					t.Errorf("server: %v", err)
				}
			})
			defer func() { stop(); wg.Wait() }()
			base := "http://" + args[2]
			waitReady(t, base)
			get := func(path string) (int, string, string) {
				resp, err := http.Get(base + path)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
			}
			code, typ, body := get("/console/")
			if on && (code != 200 || !strings.HasPrefix(typ, "text/html") || !strings.Contains(body, "chatd console")) {
				t.Fatalf("--console: GET /console/ = %d %s\n%s", code, typ, body)
			}
			if !on && (code != 404 || !strings.HasPrefix(typ, "application/json")) {
				t.Fatalf("no --console: GET /console/ = %d %s", code, typ)
			}
			// The root: the console with --console, nothing without.
			noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := noRedirect.Get(base + "/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if on && (resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/console/") || !on && resp.StatusCode != 404 {
				t.Fatalf("--console %v: GET / = %d, Location %q", on, resp.StatusCode, resp.Header.Get("Location"))
			}
			if code, _, _ := get("/readyz"); code != 200 {
				t.Fatalf("GET /readyz = %d", code)
			}
		})
	}
}
