package httpapi_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

// BenchmarkLateJoin measures what a stream that joins a running step
// waits for its catch-up: one op opens a stream while the worker is 30
// fragments into a finalizer call (held there), and times, from the
// request, its first status event (what every stream waits: the first
// read) and its first message_part (the catch-up), on the worker's
// replica (the relay answers in process) and on another (over the
// notification channel); catchup_after_status is the difference.
func BenchmarkLateJoin(b *testing.B) {
	for _, where := range []string{"worker", "other"} {
		b.Run("replica="+where, func(b *testing.B) {
			api := testenv.New(b, testenv.Options{NoRunner: true, MaxStreamsPerUser: -1})
			hold, at := make(chan struct{}), make(chan struct{})
			worker := testenv.Reopen(b, api, testenv.Options{NoRunner: true, MaxStreamsPerUser: -1, Mock: mockllm.Options{
				Script: &mockllm.Script{Steps: []mockllm.Step{{Value: thirtyItems()}}},
				BeforeChunk: func(ctx context.Context, _ *mockllm.Request, n int) error {
					if n != 30 {
						return nil
					}
					close(at)
					select {
					case <-hold:
					case <-ctx.Done():
					}
					return nil
				}}})
			defer close(hold)
			worker.StartRunner()
			ctx := context.Background()
			c := worker.Client("alice")
			chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("thirty items"), ResponseFormat: &client.ResponseFormat{
				Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(partialSchema)}}})
			if err != nil {
				b.Fatal(err)
			}
			<-at
			env := worker
			if where == "other" {
				env = api
			}
			c = env.Client("alice")
			var status, part, gap []time.Duration
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				s := c.Stream(ctx, chat.Chat.ID, 0)
				var st time.Duration
				for {
					ev, err := s.Next()
					if err != nil {
						b.Fatal(err)
					}
					if ev.Type == client.EventStatus && st == 0 {
						st = time.Since(start)
					}
					if ev.Part != nil { // the call's start, then its arguments so far
						p := time.Since(start)
						if next, err := s.Next(); err != nil || ev.Part.Seq != 1 || next.Part == nil || next.Part.FromSeq != 2 || next.Part.Seq < 30 {
							b.Fatalf("fragment %d, then %+v (%v): not the catch-up", ev.Part.Seq, next.Part, err)
						}
						status, part, gap = append(status, st), append(part, p), append(gap, p-st)
						break
					}
				}
				s.Close()
			}
			b.StopTimer()
			reportLatency(b, status, "status_")
			reportLatency(b, part, "catchup_")
			reportLatency(b, gap, "catchup_after_status_")
		})
	}
}
