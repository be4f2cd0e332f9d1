package jstest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jwtauth"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/oidctest"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/testenv"
)

// partialsValue is what the model writes for "partials-test", slowly.
const partialsValue = `{"title":"A title long enough to arrive in several pieces, with \"quotes\" and ünïcödé",` +
	`"items":[{"name":"first","tags":["a","b"]},{"name":"second item of the list","tags":[]},{"name":"third","tags":["c","d","e"]}]}`

// partialsStep answers a chat whose first message contains "partials-test":
// the model calls the client tool "ready" (the test opens its stream while
// the chat waits for the result), then writes partialsValue through the
// finalizer in many fragments, 20 ms apart. One whose first message
// contains "partials-late" gets partialsValue at once, 150 ms a fragment
// (about 5 s): the test follows it once the model is writing.
func partialsStep(r *mockllm.Request) (mockllm.Step, bool) {
	asked, late := false, false
	for _, m := range r.Messages {
		asked = asked || m.Role == "user" && strings.Contains(m.Content, "partials-test")
		late = late || m.Role == "user" && strings.Contains(m.Content, "partials-late")
	}
	if late {
		return mockllm.Step{Value: json.RawMessage(partialsValue), ChunkDelayMS: 150}, true
	}
	if !asked {
		return mockllm.Step{}, false
	}
	if r.Messages[len(r.Messages)-1].Role == "tool" {
		return mockllm.Step{Value: json.RawMessage(partialsValue), ChunkDelayMS: 20}, true
	}
	return mockllm.Step{ToolCalls: []mockllm.ToolCall{{Name: "ready", Arguments: `{}`}}}, true
}

// TestSDK runs the SDK's own tests (node's test runner, sdk/typescript/test)
// against a live chatd with a mock model: a message containing
// "provider-fail" gets a provider error the runner does not retry, one
// containing "hold-me" is not answered until chatd gives up the call,
// "partials-test" and "partials-late" are answered as partialsStep says; a structured request
// whose message contains "invalid-always" is answered with invalid values
// every time, one with "invalid-once" the first time.
func TestSDK(t *testing.T) {
	t.Parallel()
	buildSDK(t)
	idp, verifier := startIdP(t)
	env := testenv.New(t, testenv.Options{JWT: verifier, Mock: mockllm.Options{StepFor: func(r *mockllm.Request) (mockllm.Step, bool) {
		if st, ok := partialsStep(r); ok {
			return st, true
		}
		last := r.Messages[len(r.Messages)-1]
		first := ""
		for _, m := range r.Messages {
			if m.Role == "user" {
				first = m.Content
				break
			}
		}
		switch {
		case strings.Contains(first, "invalid-always"):
			return mockllm.Step{Invalid: true}, true
		case last.Role == "user" && strings.Contains(last.Content, "invalid-once"):
			return mockllm.Step{Invalid: true}, true
		case last.Role != "user":
			return mockllm.Step{}, false
		case strings.Contains(last.Content, "provider-fail"):
			return mockllm.Step{Error: &mockllm.ErrorSpec{Status: 400, Message: "bad request"}}, true
		case strings.Contains(last.Content, "hold-me"):
			return mockllm.Step{Hold: true}, true
		}
		return mockllm.Step{}, false
	}}})
	buildSDK(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	jwtA, jwtB := login(t, idp, oidctest.User), login(t, idp, oidctest.User2)
	admin, _, err := env.Store.CreateScopedToken(ctx, store.TokenSpec{User: "sdk-admin", Scopes: []client.Scope{client.ScopeAdmin}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(ctx, sdkDir, []string{"CHATD_URL=" + env.API.URL, "CHATD_TOKEN=" + env.Token("alice"),
		"CHATD_JWT_A=" + jwtA, "CHATD_JWT_B=" + jwtB, "CHATD_SUBJECT_A=id1", "CHATD_ADMIN_TOKEN=" + admin},
		"node", "--test", "--test-force-exit", "--test-reporter=spec", "dist/test/")
	t.Logf("node --test:\n%s", out)
	if err != nil {
		// A test that hangs is cut by the timeout: what the server did
		// meanwhile says where.
		t.Logf("chatd's log, last lines:\n%s", lastLines(env.Logs(), 300))
		t.Fatal(err)
	}
}

// startIdP starts the real OpenID provider (internal/oidctest) and a
// verifier of its ID tokens for chatd; redirects are more redirect URIs
// of its client.
func startIdP(t *testing.T, redirects ...string) (*oidctest.Provider, *jwtauth.Verifier) {
	t.Helper()
	p := oidctest.Start(t, redirects...)
	v, err := jwtauth.New(jwtauth.Options{Issuer: p.Issuer, Discovery: true, Audience: oidctest.ClientID})
	if err != nil {
		t.Fatal(err)
	}
	return p, v
}

// login signs user in at the provider and returns the ID token.
func login(t *testing.T, p *oidctest.Provider, user string) string {
	t.Helper()
	tok, err := p.Login(t.Context(), user, oidctest.Password)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
