// Package oidctest starts a real OpenID provider for tests: zitadel/oidc's
// example provider (tools/oidcprovider, a module of its own built here
// with the go command), and signs its users in through its login form and
// the authorization code flow to get the RS256 ID tokens it issues.
package oidctest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/childproc"
)

// Users of the example provider (its user store), and their password.
const (
	User     = "test-user@127.0.0.1" // subject id1
	User2    = "test-user2"          // subject id2
	Password = "verysecure"
	// ClientID is the provider's client for chatd, and so the audience of
	// its ID tokens.
	ClientID = "chatd-web"
	// RedirectURI is where the login sends the code: nothing listens, the
	// test reads the code from the redirect.
	RedirectURI = "http://127.0.0.1/callback"
)

// Provider is a running provider.
type Provider struct {
	// Issuer is its issuer URL (with the trailing slash its tokens carry).
	Issuer string
}

var build = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "chatd-oidcprovider-")
	if err != nil {
		return "", err
	}
	src, err := toolDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "oidcprovider")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building tools/oidcprovider: %w\n%s", err, out)
	}
	return bin, nil
})

// toolDir finds tools/oidcprovider above the working directory.
func toolDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "oidcprovider", "go.mod")); err == nil {
			return filepath.Join(dir, "tools", "oidcprovider"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no tools/oidcprovider above the working directory")
		}
		dir = parent
	}
}

// Start builds (once per test binary) and starts a provider that the
// test's end stops. redirects are more redirect URIs for its client.
func Start(t testing.TB, redirects ...string) *Provider {
	t.Helper()
	bin, err := build()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-redirect", strings.Join(append([]string{RedirectURI}, redirects...), ","))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	exited := make(chan struct{})
	if err := childproc.Start(cmd, func(error) { close(exited) }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the provider did not say its issuer: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return &Provider{Issuer: strings.TrimSpace(line)}
}

// Rotate makes the provider sign with a new key from now on (published
// beside the old ones) and returns its key id.
func (p *Provider) Rotate(t testing.TB) string {
	t.Helper()
	resp, err := http.Post(p.Issuer+"test/rotate", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("rotate: %d %s", resp.StatusCode, b)
	}
	return strings.TrimSpace(string(b))
}

// Login signs user in as a browser would (the authorization request, the
// login form, the callback) and exchanges the code for tokens: it returns
// the ID token.
func (p *Provider) Login(ctx context.Context, user, password string) (string, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), RedirectURI) {
				return http.ErrUseLastResponse // the code: nobody listens there
			}
			return nil
		}}
	q := url.Values{"client_id": {ClientID}, "redirect_uri": {RedirectURI}, "response_type": {"code"},
		"scope": {"openid profile"}, "state": {"s"}, "nonce": {"n"}}
	resp, err := get(ctx, c, p.Issuer+"auth?"+q.Encode())
	if err != nil {
		return "", err
	}
	id := resp.Request.URL.Query().Get("authRequestID")
	if id == "" {
		return "", fmt.Errorf("the authorization request did not reach the login form: %s", resp.Request.URL)
	}
	form := url.Values{"id": {id}, "username": {user}, "password": {password}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.Issuer+"login/username", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err = c.Do(req); err != nil {
		return "", err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	code := loc.Query().Get("code")
	if err != nil || resp.StatusCode != http.StatusFound || code == "" {
		return "", fmt.Errorf("the login did not redirect with a code: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	return p.exchange(ctx, code)
}

func get(ctx context.Context, c *http.Client, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// exchange trades the code for the ID token at the token endpoint.
func (p *Provider) exchange(ctx context.Context, code string) (string, error) {
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {RedirectURI}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.Issuer+"oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(ClientID, "secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		IDToken string `json:"id_token"`
		Error   string `json:"error_description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.IDToken == "" {
		return "", fmt.Errorf("the token endpoint: %d %s %v", resp.StatusCode, out.Error, err)
	}
	return out.IDToken, nil
}
