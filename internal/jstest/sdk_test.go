package jstest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

// TestSDK runs the SDK's own tests (node's test runner, sdk/typescript/test)
// against a live chatd with a mock model: a message containing
// "provider-fail" gets a provider error the runner does not retry, one
// containing "hold-me" is not answered until chatd gives up the call.
func TestSDK(t *testing.T) {
	t.Parallel()
	npm(t)
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{StepFor: func(r *mockllm.Request) (mockllm.Step, bool) {
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role != "user":
			return mockllm.Step{}, false
		case strings.Contains(last.Content, "provider-fail"):
			return mockllm.Step{Error: &mockllm.ErrorSpec{Status: 400, Message: "bad request"}}, true
		case strings.Contains(last.Content, "hold-me"):
			return mockllm.Step{Hold: true}, true
		}
		return mockllm.Step{}, false
	}}})
	if _, err := run(t.Context(), sdkDir, nil, bin("tsc"), "-p", "tsconfig.json"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	out, err := run(ctx, sdkDir, []string{"CHATD_URL=" + env.API.URL, "CHATD_TOKEN=" + env.Token("alice")},
		"node", "--test", "--test-force-exit", "--test-reporter=spec", "dist/test/")
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
}
