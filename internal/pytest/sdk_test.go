package pytest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mockllm"
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
// (CHATD_URL, CHATD_TOKEN).
func TestPythonSDK(t *testing.T) {
	t.Parallel()
	py := venv(t)
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{StepFor: step}})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out, err := run(ctx, sdkDir, []string{"CHATD_URL=" + env.API.URL, "CHATD_TOKEN=" + env.Token("alice")},
		py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "console_output_style=classic", "tests")
	t.Logf("pytest:\n%s", out)
	if err != nil {
		t.Logf("chatd's log, last lines:\n%s", lastLines(env.Logs(), 300))
		t.Fatal(err)
	}
}
