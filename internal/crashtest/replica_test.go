package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mockllm"
)

// TestStreamAcrossProcesses: two server processes on one database. A
// stream on process A (which runs no workers) receives every message of a
// turn that process B runs — a tool call and its result, an invalid value
// and its feedback, the valid value, its acknowledgement and the receipt —
// in id order, each exactly once, the same as a REST read afterwards.
func TestStreamAcrossProcesses(t *testing.T) {
	t.Parallel()
	db := dbtest.NewURL(t)
	streaming := make(chan struct{})
	mock := mockllm.New(mockllm.Options{
		ChunkDelay: 2 * time.Millisecond,
		// The turn starts once the stream on A is open.
		BeforeRespond: func(ctx context.Context, _ *mockllm.Request) error {
			select {
			case <-streaming:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		StepFor: readRepairAnswer(`{"title":"make test","count":1,"tags":["ci"]}`),
	})
	mockSrv := httptest.NewServer(mock)
	t.Cleanup(mockSrv.Close)
	ws := workspace(t)
	a := startServer(t, serverOpts{Name: "a", DB: db, Config: writeConfig(t, mockSrv.URL, ws, "a"), Workers: 0})
	token := newToken(t, db, "alice")
	startServer(t, serverOpts{Name: "b", DB: db, Config: writeConfig(t, mockSrv.URL, ws, "b"), Workers: 1})

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ca := a.client(token)
	created, err := ca.CreateChat(ctx, client.CreateChatRequest{Content: text("[c1 m1] Report."), ResponseFormat: structured()})
	if err != nil {
		t.Fatal(err)
	}
	req := *created.Messages[0].StructuredOutputRequestID
	stream := ca.Stream(ctx, created.Chat.ID, 0)
	defer stream.Close()

	var got []client.ChatMessage
	receipt, idle := false, false
	for !(receipt && idle) {
		ev, err := stream.Next()
		if err != nil {
			t.Fatalf("stream: %v after %d messages", err, len(got))
		}
		switch ev.Type {
		case client.EventMessage:
			if n := len(got); n > 0 && ev.Message.ID <= got[n-1].ID {
				t.Fatalf("message %d after %d: out of order or repeated", ev.Message.ID, got[n-1].ID)
			}
			got = append(got, *ev.Message)
			if len(got) == 1 {
				close(streaming)
			}
			if so := ev.Message.StructuredOutput; so != nil {
				if so.RequestID != req || so.Status != client.OutputSucceeded {
					t.Fatalf("receipt %+v", so)
				}
				receipt = true
			}
		case client.EventStatus:
			idle = receipt && ev.Chat.Status == client.StatusWaiting
		case client.EventError:
			t.Fatalf("stream error event %+v", ev.Error)
		}
	}
	if !receipt || got[len(got)-1].StructuredOutput == nil {
		t.Fatal("the receipt is not the last message")
	}

	rest, err := ca.ListMessages(ctx, created.Chat.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest.Messages) != len(got) {
		t.Fatalf("stream delivered %d messages, REST lists %d", len(got), len(rest.Messages))
	}
	for i := range got {
		x, _ := json.Marshal(got[i])
		y, _ := json.Marshal(rest.Messages[i])
		if !bytes.Equal(x, y) {
			t.Fatalf("message %d differs:\nstream %s\nREST   %s", i, x, y)
		}
	}
	// user, tool call, tool result, invalid value, feedback, valid value,
	// acknowledgement, receipt.
	if len(got) != 8 {
		t.Fatalf("%d messages, want 8", len(got))
	}
	if stream.Reconnects != 0 {
		t.Logf("the stream reconnected %d times", stream.Reconnects)
	}
}

// readRepairAnswer scripts a turn: a step that reads notes.txt, an invalid
// value (one repair), then value.
func readRepairAnswer(value string) func(*mockllm.Request) (mockllm.Step, bool) {
	return func(r *mockllm.Request) (mockllm.Step, bool) {
		steps := 0
		for _, m := range r.Messages {
			if m.Role == "assistant" {
				steps++
			}
		}
		switch steps {
		case 0:
			return mockllm.Step{Text: "Let me look.", ToolCalls: []mockllm.ToolCall{{Name: "read_file", Arguments: `{"path":"notes.txt"}`}}}, true
		case 1:
			return mockllm.Step{Invalid: true}, true
		}
		return mockllm.Step{Value: json.RawMessage(value)}, true
	}
}
