package jstest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

// aiSDKDir is the AI SDK adapter (@chatd/ai-sdk).
var aiSDKDir, _ = filepath.Abs("../../sdk/ai-sdk")

// aiSDKStep answers the adapter's tests by markers in the conversation:
//
//   - "[invalid-always]" in the first user message: invalid values only;
//   - "[invalid-once]" in the latest user message: one invalid value, then
//     the unscripted (valid) one;
//   - "[hold]" in the latest user message: no answer until chatd gives up
//     the call (an interrupt);
//   - "[weather]" on a chat that offers get_weather: one call of it; its
//     result comes back as the value {"forecast": <result>} (structured) or
//     the text "forecast: <result>";
//   - "[prose-repair]" in the latest user message: prose and an invalid
//     value, then prose and the value {"title":"repaired","count":2},
//     written slowly;
//   - "[reasoning]": reasoning, then the unscripted answer, written slowly;
//   - "[server-tool]": a call of the workspace's read_file, then the
//     unscripted answer;
//   - "[slow]": the unscripted answer, written slowly;
//   - "[provider-fail]": a provider error chatd does not retry (400).
func aiSDKStep(r *mockllm.Request) (mockllm.Step, bool) {
	last := r.Messages[len(r.Messages)-1]
	first := ""
	for _, m := range r.Messages {
		if m.Role == "user" {
			first = m.Content
			break
		}
	}
	structured := r.Tool(mockllm.FinalizerTool) != nil
	user := last.Role == "user"
	has := func(marker string) bool { return user && strings.Contains(last.Content, marker) }
	switch {
	case strings.Contains(first, "[invalid-always]"):
		return mockllm.Step{Invalid: true}, true
	case has("[invalid-once]"):
		return mockllm.Step{Invalid: true}, true
	case has("[hold]"):
		return mockllm.Step{Hold: true}, true
	case has("[weather]") && r.Tool("get_weather") != nil:
		return mockllm.Step{ToolCalls: []mockllm.ToolCall{{Name: "get_weather", Arguments: `{"city":"Florence"}`}}, ChunkDelayMS: 5}, true
	case answers(r, "get_weather"):
		forecast, _ := json.Marshal(last.Content)
		if structured {
			return mockllm.Step{Value: json.RawMessage(`{"forecast":` + string(forecast) + `}`)}, true
		}
		return mockllm.Step{Text: "forecast: " + last.Content}, true
	case has("[prose-repair]"):
		return mockllm.Step{Text: "Let me think about the title first.", Invalid: true, ChunkDelayMS: 5}, true
	case strings.Contains(lastUser(r), "[prose-repair]") && answers(r, mockllm.FinalizerTool):
		return mockllm.Step{Text: "Fixed it.", Value: json.RawMessage(`{"title":"repaired","count":2}`), ChunkDelayMS: 5}, true
	case has("[reasoning]"):
		return mockllm.Step{Reasoning: "Thinking it over, step by step.", ChunkDelayMS: 5}, true
	case has("[server-tool]"):
		return mockllm.Step{ToolCalls: []mockllm.ToolCall{{Name: "read_file", Arguments: `{"path":"notes.txt"}`}}}, true
	case has("[slow]"):
		return mockllm.Step{ChunkDelayMS: 40}, true
	case has("[provider-fail]"):
		return mockllm.Step{Error: &mockllm.ErrorSpec{Status: 400, Message: "bad request"}}, true
	}
	return mockllm.Step{}, false
}

// lastUser is the text of the request's latest user message.
func lastUser(r *mockllm.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// answers reports whether the request's last message is the result of a
// call of the named tool.
func answers(r *mockllm.Request, tool string) bool {
	last := r.Messages[len(r.Messages)-1]
	if last.Role != "tool" {
		return false
	}
	for i := len(r.Messages) - 2; i >= 0; i-- {
		for _, c := range r.Messages[i].ToolCalls {
			if c.ID == last.ToolCallID {
				return c.Name == tool
			}
		}
	}
	return false
}

// TestAISDK runs the AI SDK adapter's tests (sdk/ai-sdk/test, node's test
// runner, the real `ai` package) against a live chatd with a mock model
// (aiSDKStep) and a workspace with notes.txt. CHATD_TESTKIT names a server
// of this test that answers what the database holds (testkit).
func TestAISDK(t *testing.T) {
	t.Parallel()
	npmAISDK(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("The notes say: ship it.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := testenv.New(t, testenv.Options{Workspace: ws, Mock: mockllm.Options{StepFor: aiSDKStep}})
	kit := httptest.NewServer(testkit(env))
	defer kit.Close()
	if _, err := run(t.Context(), aiSDKDir, nil, aiBin("tsc"), "-p", "tsconfig.json"); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(aiSDKDir, "dist", "test", "*.test.js"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no compiled tests in %s/dist/test (%v)", aiSDKDir, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	args := append([]string{"--test", "--test-force-exit", "--test-timeout=60000", "--test-reporter=spec"}, files...)
	out, err := run(ctx, aiSDKDir, []string{"CHATD_URL=" + env.API.URL, "CHATD_TOKEN=" + env.Token("alice"), "CHATD_TESTKIT=" + kit.URL}, "node", args...)
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Logf("chatd's log, last lines:\n%s", lastLines(env.Logs(), 300))
		t.Fatal(err)
	}
}

// testkit answers the node tests' questions about the database:
// GET /chats?marker=M lists the chats with a user message containing M, in
// order of creation, each with its user messages' texts (in order) and how
// many structured requests it holds: what a test counts to show that a
// call made one chat, or one request, and no more.
func testkit(env *testenv.Env) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /chats", func(w http.ResponseWriter, r *http.Request) {
		marker := r.URL.Query().Get("marker")
		rows, err := env.Pool.Query(r.Context(), `
			SELECT c.id::text,
			       (SELECT coalesce(jsonb_agg(x.t ORDER BY m.id), '[]'::jsonb)
			          FROM chat_messages m,
			               LATERAL (SELECT coalesce(string_agg(p->>'text', '' ORDER BY n), '') AS t
			                          FROM jsonb_array_elements(m.content) WITH ORDINALITY AS e(p, n)
			                         WHERE p->>'type' = 'text') x
			         WHERE m.chat_id = c.id AND m.role = 'user' AND m.kind = 'message'
			           AND m.visibility <> 'model' AND NOT m.deleted),
			       (SELECT count(*) FROM structured_requests s WHERE s.chat_id = c.id)
			  FROM chats c
			 WHERE EXISTS (SELECT 1 FROM chat_messages m
			                WHERE m.chat_id = c.id AND m.role = 'user' AND strpos(m.content::text, $1) > 0)
			 ORDER BY c.created_at, c.id`, marker)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		type chat struct {
			ID       string          `json:"id"`
			Users    json.RawMessage `json:"users"`
			Requests int64           `json:"requests"`
		}
		chats := []chat{}
		for rows.Next() {
			var c chat
			if err := rows.Scan(&c.ID, &c.Users, &c.Requests); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			chats = append(chats, c)
		}
		if err := rows.Err(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"chats": chats})
	})
	return mux
}
