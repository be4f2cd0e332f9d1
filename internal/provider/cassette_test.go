package provider_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/testenv"
)

// fantasy v0.41.2's recorded Gemini traffic (providertests/testdata,
// TestGoogleCommon and TestGoogleThinking: gemini-2.5-flash, gemini-2.5-pro
// and gemini-3-pro-preview against the live API), read from the module
// cache, played through chatd's HTTP API and provider layer.

// cassette is a go-vcr recording.
type cassette struct {
	Interactions []struct {
		Request struct {
			Body string `yaml:"body"`
			URL  string `yaml:"url"`
		} `yaml:"request"`
		Response struct {
			Body string `yaml:"body"`
		} `yaml:"response"`
	} `yaml:"interactions"`
}

// fantasyTestdata is fantasy's providertests/testdata in the module cache.
func fantasyTestdata(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "charm.land/fantasy").Output()
	dir := filepath.Join(strings.TrimSpace(string(out)), "providertests", "testdata")
	if _, serr := os.Stat(dir); err != nil || serr != nil {
		t.Fatalf("fantasy's recorded traffic: %v %v (run go mod download charm.land/fantasy)", err, serr)
	}
	return dir
}

// geminiRequest is the part of a Gemini request body compared.
type geminiRequest struct {
	Contents         []map[string]any `json:"contents"`
	GenerationConfig map[string]any   `json:"generationConfig"`
	ToolConfig       map[string]any   `json:"toolConfig"`
	Tools            []struct {
		FunctionDeclarations []struct {
			Name                 string         `json:"name"`
			Description          string         `json:"description"`
			Parameters           map[string]any `json:"parameters"`
			ParametersJSONSchema map[string]any `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
}

func decodeGemini(t *testing.T, body string) geminiRequest {
	t.Helper()
	var r geminiRequest
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return r
}

// lowerTypes turns the OpenAPI subset's types into JSON Schema's.
func lowerTypes(v any) any {
	switch n := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range n {
			if s, ok := x.(string); ok && k == "type" {
				x = strings.ToLower(s)
			}
			out[k] = lowerTypes(x)
		}
		return out
	case []any:
		out := make([]any, len(n))
		for i, x := range n {
			out[i] = lowerTypes(x)
		}
		return out
	}
	return v
}

// withoutIDs drops function call and response ids (fantasy made up the
// recorded ones for models that send none).
func withoutIDs(contents []map[string]any) []map[string]any {
	b, _ := json.Marshal(contents)
	var out []map[string]any
	_ = json.Unmarshal(b, &out)
	for _, c := range out {
		parts, _ := c["parts"].([]any)
		for _, p := range parts {
			pm, _ := p.(map[string]any)
			for _, k := range []string{"functionCall", "functionResponse"} {
				if m, ok := pm[k].(map[string]any); ok {
					delete(m, "id")
				}
			}
		}
	}
	return out
}

func TestGeminiCassettes(t *testing.T) {
	t.Parallel()
	dir := fantasyTestdata(t)
	var files []string
	for _, pattern := range []string{"TestGoogleThinking/gemini*/thinking-streaming.yaml", "TestGoogleCommon/gemini*/tool_streaming.yaml",
		"TestGoogleCommon/gemini*/multi_tool_streaming.yaml"} {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		files = append(files, m...)
	}
	if len(files) != 9 {
		t.Fatalf("%d recorded exchanges: %v", len(files), files)
	}
	for _, f := range files {
		name, _ := filepath.Rel(dir, f)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			playCassette(t, f)
		})
	}
}

// playCassette plays a recorded two-request exchange: the first answer
// calls the client tools, chatd stores the step and stops; a new chatd on
// the same database takes the recorded tool results and sends the second
// request, which must carry the model content as fantasy sent it to the
// live API (thought signatures byte for byte) and the same configuration.
// The usage stored for each step is the last event's, in chatd's terms.
func playCassette(t *testing.T, path string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c cassette
	if err := yaml.Unmarshal(raw, &c); err != nil || len(c.Interactions) != 2 {
		t.Fatalf("%d interactions: %v", len(c.Interactions), err)
	}
	rec1, rec2 := decodeGemini(t, c.Interactions[0].Request.Body), decodeGemini(t, c.Interactions[1].Request.Body)
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		n := len(bodies)
		bodies = append(bodies, string(b))
		mu.Unlock()
		if n >= 2 {
			http.Error(w, `{"error":{"code":500,"message":"no more recorded answers","status":"INTERNAL"}}`, 500)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, c.Interactions[n].Response.Body)
	}))
	t.Cleanup(srv.Close)

	// The model as recorded: its name, output cap and thinking options.
	model := config.Model{Model: filepath.Base(strings.Split(c.Interactions[0].Request.URL, ":stream")[0])}
	if v, ok := rec1.GenerationConfig["maxOutputTokens"].(float64); ok {
		model.MaxOutputTokens = int64(v)
	}
	if tc, ok := rec1.GenerationConfig["thinkingConfig"].(map[string]any); ok {
		if v, ok := tc["includeThoughts"].(bool); ok {
			model.IncludeThoughts = &v
		}
		if v, ok := tc["thinkingBudget"].(float64); ok {
			b := int64(v)
			model.ThinkingBudget = &b
		}
		if v, ok := tc["thinkingLevel"].(string); ok {
			model.ThinkingLevel = strings.ToLower(v)
		}
	}
	var tools []client.DynamicTool
	for _, d := range rec1.Tools[0].FunctionDeclarations {
		schema, _ := json.Marshal(lowerTypes(d.Parameters))
		tools = append(tools, client.DynamicTool{Name: d.Name, Description: d.Description, InputSchema: schema})
	}
	results := map[string]json.RawMessage{} // tool name → the recorded result
	for _, ct := range rec2.Contents {
		for _, p := range ct["parts"].([]any) {
			if fr, ok := p.(map[string]any)["functionResponse"].(map[string]any); ok {
				results[fr["name"].(string)], _ = json.Marshal(fr["response"].(map[string]any)["result"])
			}
		}
	}
	opts := testenv.Options{Provider: config.TypeGoogle, Model: model, ProviderURL: srv.URL, APIKey: apiKey}
	before := testenv.New(t, opts)
	userText := rec1.Contents[0]["parts"].([]any)[0].(map[string]any)["text"].(string)
	created, err := before.Client("alice").CreateChat(t.Context(), client.CreateChatRequest{
		Content: []client.MessagePart{client.TextPart(userText)}, DynamicTools: tools})
	if err != nil {
		t.Fatal(err)
	}
	chat := created.Chat.ID
	waitStatus(t, before.Client("alice"), chat, client.StatusRequiresAction)
	before.Stop()

	after := testenv.Reopen(t, before, opts)
	cl := after.Client("alice")
	ch, err := cl.GetChat(t.Context(), chat)
	if err != nil {
		t.Fatal(err)
	}
	var submit []client.ToolResult
	for _, p := range ch.PendingToolCalls {
		submit = append(submit, client.ToolResult{ToolCallID: p.ToolCallID, Output: results[p.ToolName]})
	}
	if _, err := cl.SubmitToolResults(t.Context(), chat, client.ToolResultsRequest{Results: submit}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cl, chat, client.StatusWaiting)
	mu.Lock()
	got := slices.Clone(bodies)
	mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d requests", len(got))
	}
	ours1, ours2 := decodeGemini(t, got[0]), decodeGemini(t, got[1])

	// The conversation as fantasy sent it to the live API: the model
	// content replayed with its thought signatures, the results.
	if a, b := withoutIDs(ours2.Contents), withoutIDs(rec2.Contents); !jsonEqualAny(a, b) {
		ga, _ := json.Marshal(a)
		gb, _ := json.Marshal(b)
		t.Errorf("second request's contents\n got %s\nwant %s", ga, gb)
	}
	for i, r := range []struct{ ours, rec geminiRequest }{{ours1, rec1}, {ours2, rec2}} {
		if !jsonEqualAny(r.ours.GenerationConfig, r.rec.GenerationConfig) || !jsonEqualAny(r.ours.ToolConfig, r.rec.ToolConfig) {
			t.Errorf("request %d: generationConfig %v toolConfig %v, recorded %v %v", i+1, r.ours.GenerationConfig, r.ours.ToolConfig,
				r.rec.GenerationConfig, r.rec.ToolConfig)
		}
		for j, d := range r.ours.Tools[0].FunctionDeclarations {
			recorded := r.rec.Tools[0].FunctionDeclarations[j]
			if d.Parameters != nil || d.Name != recorded.Name || !jsonEqualAny(d.ParametersJSONSchema, lowerTypes(recorded.Parameters)) {
				t.Errorf("request %d: declaration %+v, recorded %+v", i+1, d, recorded)
			}
		}
	}

	// Each step's usage: the last event's figures.
	h, err := cl.ListMessages(t.Context(), chat, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	step := 0
	for _, m := range h.Messages {
		if m.Role != client.RoleAssistant {
			continue
		}
		want := lastUsage(t, c.Interactions[step].Response.Body)
		if m.Usage == nil || usageText(*m.Usage) != usageText(want) {
			t.Errorf("step %d usage %v, want %v", step+1, m.Usage, usageText(want))
		}
		step++
	}
	if step != 2 {
		t.Errorf("%d assistant steps", step)
	}
}

// lastUsage maps a recorded stream's last usageMetadata to chatd's terms:
// input without cached tokens, output with thoughts.
func lastUsage(t *testing.T, body string) client.Usage {
	t.Helper()
	var last map[string]*int64
	for ev := range strings.SplitSeq(body, "\r\n\r\n") {
		data, ok := strings.CutPrefix(strings.TrimSpace(ev), "data:")
		if !ok {
			continue
		}
		var e struct {
			UsageMetadata map[string]json.RawMessage `json:"usageMetadata"`
		}
		if json.Unmarshal([]byte(data), &e) == nil && e.UsageMetadata != nil {
			last = map[string]*int64{}
			for k, raw := range e.UsageMetadata {
				var n int64
				if json.Unmarshal(raw, &n) == nil {
					last[k] = &n
				}
			}
		}
	}
	if last == nil {
		t.Fatal("no usage recorded")
	}
	v := func(k string) int64 {
		if p := last[k]; p != nil {
			return *p
		}
		return 0
	}
	in, out, thoughts := v("promptTokenCount")-v("cachedContentTokenCount"), v("candidatesTokenCount")+v("thoughtsTokenCount"), v("thoughtsTokenCount")
	u := client.Usage{InputTokens: &in, OutputTokens: &out}
	if last["thoughtsTokenCount"] != nil {
		u.ReasoningTokens = &thoughts
	}
	if last["cachedContentTokenCount"] != nil {
		cached := v("cachedContentTokenCount")
		u.CacheReadTokens = &cached
	}
	return u
}

func usageText(u client.Usage) string { b, _ := json.Marshal(u); return string(b) }

func jsonEqualAny(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return jsonEqual(x, y)
}
