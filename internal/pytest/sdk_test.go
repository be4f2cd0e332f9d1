package pytest

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

// docValue is what the model writes for "[slow-doc]", a fragment at a time.
const docValue = `{"title":"A title long enough to arrive in several pieces, with \"quotes\" and ünïcödé",` +
	`"items":[{"name":"first","tags":["a","b"]},{"name":"second item of the list","tags":[]},{"name":"third","tags":["c","d","e"]}]}`

// step answers the SDK's tests by markers in the conversation:
//
//   - "[invalid-always]" in the first user message: invalid values only;
//   - "[invalid-once]" in the latest user message: one invalid value, then
//     the unscripted (valid) one;
//   - "[hold]" in the latest user message: no answer until chatd gives up
//     the call (an interrupt);
//   - "[provider-fail]" in the latest user message: a provider error chatd
//     does not retry (400);
//   - "[slow-doc]": a call of the client tool "ready" (the test's stream is
//     open once it answers), then docValue through the finalizer, 40 ms a
//     fragment;
//   - "[weather]" on a chat that offers get_weather: one call of it;
//     "[two-tools]": get_weather and get_time in one step; after their
//     results, the unscripted answer.
func step(r *mockllm.Request) (mockllm.Step, bool) {
	last := r.Messages[len(r.Messages)-1]
	first := ""
	for _, m := range r.Messages {
		if m.Role == "user" {
			first = m.Content
			break
		}
	}
	user := last.Role == "user"
	has := func(marker string) bool { return user && strings.Contains(last.Content, marker) }
	switch {
	case strings.Contains(first, "[invalid-always]"):
		return mockllm.Step{Invalid: true}, true
	case has("[invalid-once]"):
		return mockllm.Step{Invalid: true}, true
	case has("[hold]"):
		return mockllm.Step{Hold: true}, true
	case has("[provider-fail]"):
		return mockllm.Step{Error: &mockllm.ErrorSpec{Status: 400, Message: "bad request"}}, true
	case strings.Contains(first, "[slow-doc]") && user:
		return mockllm.Step{ToolCalls: []mockllm.ToolCall{{Name: "ready", Arguments: `{}`}}}, true
	case strings.Contains(first, "[slow-doc]") && last.Role == "tool":
		return mockllm.Step{Value: json.RawMessage(docValue), ChunkDelayMS: 40}, true
	case has("[weather]") && r.Tool("get_weather") != nil:
		return mockllm.Step{ToolCalls: []mockllm.ToolCall{{Name: "get_weather", Arguments: `{"city":"Florence"}`}}}, true
	case has("[two-tools]"):
		return mockllm.Step{ToolCalls: []mockllm.ToolCall{
			{Name: "get_weather", Arguments: `{"city":"Rome"}`},
			{Name: "get_time", Arguments: `{"zone":{"name":"Europe/Rome"}}`},
		}}, true
	}
	return mockllm.Step{}, false
}

// TestPythonSDK runs the SDK's pytest suite (sdk/python/tests) against one
// live chatd with a mock model answering as step says; the suite shares it
// (CHATD_URL, CHATD_TOKEN), with an admin token (CHATD_ADMIN_TOKEN) and
// the ID tokens of two users of the app's identity provider, a real one
// whose JWTs chatd accepts (startIdP).
func TestPythonSDK(t *testing.T) {
	t.Parallel()
	py := venv(t)
	idp, verifier := startIdP(t)
	env := testenv.New(t, testenv.Options{JWT: verifier, Mock: mockllm.Options{StepFor: step}})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	admin, _, err := env.Store.CreateScopedToken(ctx, store.TokenSpec{User: "py-admin", Scopes: []client.Scope{client.ScopeAdmin}})
	if err != nil {
		t.Fatal(err)
	}
	vars := append([]string{"CHATD_URL=" + env.API.URL, "CHATD_TOKEN=" + env.Token("alice"), "CHATD_ADMIN_TOKEN=" + admin}, idp...)
	out, err := run(ctx, sdkDir, vars,
		py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "console_output_style=classic", "tests")
	t.Logf("pytest:\n%s", out)
	if err != nil {
		t.Logf("chatd's log, last lines:\n%s", lastLines(env.Logs(), 300))
		t.Fatal(err)
	}
}

// startIdP starts the real OpenID provider (internal/oidctest) and a
// verifier of its ID tokens for chatd, and signs its two users in: the
// suite gets their ID tokens (CHATD_JWT_A, CHATD_JWT_B) and subjects
// (CHATD_SUBJECT_A, CHATD_SUBJECT_B).
func startIdP(t *testing.T) ([]string, *jwtauth.Verifier) {
	t.Helper()
	p := oidctest.Start(t)
	v, err := jwtauth.New(jwtauth.Options{Issuer: p.Issuer, Discovery: true, Audience: oidctest.ClientID})
	if err != nil {
		t.Fatal(err)
	}
	var vars []string
	for _, u := range []struct{ name, suffix, subject string }{{oidctest.User, "A", "id1"}, {oidctest.User2, "B", "id2"}} {
		tok, err := p.Login(t.Context(), u.name, oidctest.Password)
		if err != nil {
			t.Fatal(err)
		}
		vars = append(vars, "CHATD_JWT_"+u.suffix+"="+tok, "CHATD_SUBJECT_"+u.suffix+"="+u.subject)
	}
	return vars, v
}
