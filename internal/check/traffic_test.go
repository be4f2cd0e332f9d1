package check_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/check"
	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

// TestSilentAfterTraffic runs the turns the API offers — success, exhausted
// repairs, a plain chat, a queue with a deletion, an interruption and an
// edit — through a whole in-process chatd, then expects no violation.
func TestSilentAfterTraffic(t *testing.T) {
	t.Parallel()
	held := make(chan struct{})
	entered := make(chan struct{}, 8)
	opts := mockllm.Options{
		// A turn whose input says [hold] waits in the provider until the
		// test is done queueing and interrupting behind it.
		BeforeRespond: func(ctx context.Context, r *mockllm.Request) error {
			for i := len(r.Messages) - 1; i >= 0; i-- {
				if m := r.Messages[i]; m.Role == "user" {
					if strings.Contains(m.Content, "[hold]") {
						entered <- struct{}{}
						select {
						case <-held:
						case <-ctx.Done():
						}
					}
					break
				}
			}
			return nil
		},
		// A chat that started with [invalid] never gets a valid value.
		StepFor: func(r *mockllm.Request) (mockllm.Step, bool) {
			for _, m := range r.Messages {
				if m.Role == "user" && strings.Contains(m.Content, "[invalid]") {
					return mockllm.Step{Invalid: true}, true
				}
			}
			return mockllm.Step{}, false
		},
	}
	// Every receipt is owed to a webhook endpoint (webhook_outbox).
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer hook.Close()
	env := testenv.New(t, testenv.Options{Mock: opts,
		Webhooks: []config.Webhook{{Name: "ops", URL: hook.URL, Secret: "a-plain-secret-of-32-characters!"}}})
	c := env.Client("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	format := &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "a", Schema: json.RawMessage(schema)}}
	text := func(s string) []client.MessagePart { return []client.MessagePart{client.TextPart(s)} }
	var chats []uuid.UUID
	create := func(s string, f *client.ResponseFormat) client.CreateChatResponse {
		t.Helper()
		res, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text(s), ResponseFormat: f})
		if err != nil {
			t.Fatal(err)
		}
		chats = append(chats, res.Chat.ID)
		return res
	}
	create("fine", format)
	create("[invalid] never valid", format)
	create("just talk", nil)

	held1 := create("[hold] long one", format)
	<-entered
	q1, err := c.SendMessage(ctx, held1.Chat.ID, client.SendMessageRequest{Content: text("queued one"), ResponseFormat: format})
	if err != nil || !q1.Queued {
		t.Fatalf("queue: %v %+v", err, q1)
	}
	q2, err := c.SendMessage(ctx, held1.Chat.ID, client.SendMessageRequest{Content: text("queued two"), ResponseFormat: format})
	if err != nil || !q2.Queued {
		t.Fatalf("queue: %v %+v", err, q2)
	}
	if _, err := c.DeleteQueued(ctx, held1.Chat.ID, q1.QueuedMessage.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Interrupt(ctx, held1.Chat.ID); err != nil {
		t.Fatal(err)
	}
	edited := create("[hold] to be edited", format)
	<-entered
	if _, err := c.EditMessage(ctx, edited.Chat.ID, edited.Messages[0].ID, client.EditMessageRequest{Content: text("edited, fine")}); err != nil {
		t.Fatal(err)
	}
	close(held)

	for _, id := range chats {
		for {
			ch, err := c.GetChat(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if ch.Status == client.StatusWaiting || ch.Status == client.StatusError {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("chat %s still %s", id, ch.Status)
			}
			time.Sleep(10 * time.Millisecond) // polling the API for a state
		}
	}
	rep, err := check.Run(ctx, env.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() {
		t.Fatalf("violations after ordinary traffic:\n%s", dump(rep))
	}
	// The traffic produced every kind of outcome.
	rows, err := env.Pool.Query(ctx, `SELECT DISTINCT status || coalesce('/' || error_code, '') FROM structured_requests ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		got = append(got, s)
	}
	want := "cancelled/interrupted cancelled/queue_deleted cancelled/superseded failed/validation_exhausted succeeded"
	if strings.Join(got, " ") != want {
		t.Fatalf("outcomes %v, want %s", got, want)
	}
	var owed, finished int
	if err := env.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_deliveries), (SELECT count(*) FROM structured_requests WHERE status <> 'pending')`).
		Scan(&owed, &finished); err != nil || owed != finished || owed == 0 {
		t.Fatalf("%d webhook deliveries for %d finished requests (%v)", owed, finished, err)
	}
}
