package provider_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/testenv"
)

// recorded serves recorded provider answers in order, one file of
// testdata/reasoning per request, and keeps the request bodies.
type recorded struct {
	t     *testing.T
	files []string

	mu     sync.Mutex
	bodies [][]byte
}

func (r *recorded) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	n := len(r.bodies)
	r.bodies = append(r.bodies, body)
	r.mu.Unlock()
	if n >= len(r.files) {
		http.Error(w, `{"error":{"message":"no more recorded answers","type":"server_error"}}`, http.StatusInternalServerError)
		return
	}
	data, err := os.ReadFile(filepath.Join("testdata", "reasoning", r.files[n]))
	if err != nil {
		r.t.Error(err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func (r *recorded) requests() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

// waitStatus polls the chat's committed status through the API.
func waitStatus(t *testing.T, c *client.Client, chat uuid.UUID, want client.ChatStatus) {
	t.Helper()
	for {
		ch, err := c.GetChat(t.Context(), chat)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Status == want {
			return
		}
		if ch.Status == client.StatusError {
			t.Fatalf("chat failed: %+v", ch)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("chat stays %s, want %s", ch.Status, want)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// reasoningAcrossRestart plays a recorded two-step exchange through the
// HTTP API: the first answer reasons and calls the client tool weather,
// chatd stores the step and stops; a new chatd on the same database takes
// the tool result and sends the second request, built from storage alone.
// It returns the two request bodies.
func reasoningAcrossRestart(t *testing.T, typ string, model config.Model, files ...string) [][]byte {
	t.Helper()
	rec := &recorded{t: t, files: files}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	opts := testenv.Options{Provider: typ, Model: model, ProviderURL: srv.URL, APIKey: apiKey}
	before := testenv.New(t, opts)
	res, err := before.Client("alice").CreateChat(t.Context(), client.CreateChatRequest{
		Content: []client.MessagePart{client.TextPart("What's the weather in Florence, Italy?")},
		DynamicTools: []client.DynamicTool{{Name: "weather", Description: "Get weather information for a location",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string","description":"the city"}},"required":["location"]}`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	chat := res.Chat.ID
	waitStatus(t, before.Client("alice"), chat, client.StatusRequiresAction)
	h, err := before.Client("alice").ListMessages(t.Context(), chat, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var callID string
	for _, m := range h.Messages {
		for _, p := range m.Content {
			if p.Type == "tool-call" && p.ToolName == "weather" {
				callID = p.ToolCallID
			}
		}
	}
	if callID == "" {
		t.Fatalf("no weather call in %+v", h.Messages)
	}
	before.Stop()

	after := testenv.Reopen(t, before, opts)
	c := after.Client("alice")
	if _, err := c.SubmitToolResults(t.Context(), chat, client.ToolResultsRequest{Results: []client.ToolResult{
		{ToolCallID: callID, Output: json.RawMessage(`"40 C"`)}}}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, chat, client.StatusWaiting)
	bodies := rec.requests()
	if len(bodies) != 2 {
		t.Fatalf("%d provider requests", len(bodies))
	}
	return bodies
}

// TestReasoningDetailsAcrossRestart: an OpenRouter-style answer (shaped
// after fantasy's recorded OpenRouter traffic for Anthropic thinking:
// delta.reasoning beside reasoning_details fragments, the signature alone
// last, then the tool call, then "reasoning": null with the finish reason)
// comes back on the next request as the assistant message's
// reasoning_details, one merged entry with the whole text and the
// signature, after a round trip through PostgreSQL and a restart.
func TestReasoningDetailsAcrossRestart(t *testing.T) {
	t.Parallel()
	bodies := reasoningAcrossRestart(t, config.TypeOpenAICompatible,
		config.Model{Model: "anthropic/claude-haiku-4.5", ReasoningEffort: "medium"},
		"openrouter-anthropic-1.sse", "openrouter-anthropic-2.sse")
	const text = `The user wants the weather in Florence, Italy. I will call the weather tool with \"Florence, Italy\".`
	const sig = "EqMDCkgIDRABGAIqQChatdFixtureSignatureOnlyForTestsXq1vV0Ez9kQm3Yb8T2pLw4nRcA7sHfGdJ6uKiO0lZyXxMeNbVtCsDaFgHhJjKkLlQ=="
	want := `[{"format":"anthropic-claude-v1","index":0,"signature":"` + sig + `","text":"` + text + `","type":"reasoning.text"}]`
	var req struct {
		Messages []struct {
			Role             string          `json:"role"`
			ReasoningContent *string         `json:"reasoning_content"`
			ReasoningDetails json.RawMessage `json:"reasoning_details"`
			ToolCalls        []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(bodies[1], &req); err != nil {
		t.Fatal(err)
	}
	n := len(req.Messages)
	call := req.Messages[n-2]
	if call.Role != "assistant" || len(call.ToolCalls) != 1 || call.ToolCalls[0].ID != "toolu_01FixtureWeatherCall0001" {
		t.Fatalf("assistant message %+v", call)
	}
	if !jsonEqual(call.ReasoningDetails, []byte(want)) {
		t.Errorf("reasoning_details %s, want %s", call.ReasoningDetails, want)
	}
	if call.ReasoningContent == nil || *call.ReasoningContent != strings.ReplaceAll(text, `\"`, `"`) {
		t.Errorf("reasoning_content %v", call.ReasoningContent)
	}
	if bytes.Contains(bodies[0], []byte("reasoning_details")) {
		t.Errorf("first request carries reasoning_details: %s", bodies[0])
	}
}

// TestResponsesReasoningAcrossRestart: the first request asks for
// include ["reasoning.encrypted_content"] (store is false); the answer
// (shaped after fantasy's recorded gpt-5 traffic: the output_item.added
// placeholder, the summary, output_item.done with the encrypted content,
// the function call, response.completed) is stored, and after a restart
// the second request sends the reasoning item back, with the encrypted
// content of output_item.done and the summary, right before the call.
func TestResponsesReasoningAcrossRestart(t *testing.T) {
	t.Parallel()
	bodies := reasoningAcrossRestart(t, config.TypeOpenAI,
		config.Model{Model: "gpt-5", ReasoningEffort: "low", ReasoningSummary: "detailed"},
		"responses-1.sse", "responses-2.sse")
	if !bytes.Contains(bodies[0], []byte(`"include":["reasoning.encrypted_content"]`)) || !bytes.Contains(bodies[0], []byte(`"store":false`)) {
		t.Errorf("first request: %s", bodies[0])
	}
	const item = `{"type":"reasoning","id":"rs_0c1fixture5e8b2a41d07f3c9e6b1a0d4f2e8c7b5a39",` +
		`"summary":[{"type":"summary_text","text":"**Checking the weather**\n\nI need the weather in Florence, so I will call the weather tool."}],` +
		`"encrypted_content":"gAAAAABqFixtureDoneEncryptedReasoningContentQwErTy9876543210zyxwvuTSRQPO_-=="}`
	var req struct {
		Input []json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(bodies[1], &req); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(req.Input, func(raw json.RawMessage) bool { return string(raw) == item })
	if i < 0 || i+1 >= len(req.Input) {
		t.Fatalf("second request without the reasoning item %s:\n%s", item, bodies[1])
	}
	var next struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
	}
	if json.Unmarshal(req.Input[i+1], &next) != nil || next.Type != "function_call" || next.CallID != "call_FixtureWeather7Kq2Lm9Np" {
		t.Errorf("the reasoning item is followed by %s", req.Input[i+1])
	}
	if bytes.Count(bodies[1], []byte(`"type":"reasoning"`)) != 1 {
		t.Errorf("reasoning items: %s", bodies[1])
	}
}
