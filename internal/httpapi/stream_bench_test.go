package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testenv"
)

// openStreams opens n streams on chat and waits for each one's initial
// status event.
func openStreams(b *testing.B, c *client.Client, chat uuid.UUID, n int) []*client.Stream {
	b.Helper()
	streams := make([]*client.Stream, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range streams {
		streams[i] = c.Stream(context.Background(), chat, 0)
		wg.Go(func() {
			for {
				ev, err := streams[i].Next()
				if err != nil {
					errs <- err
					return
				}
				if ev.Type == client.EventStatus {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return streams
}

// BenchmarkReceiptDelivery measures how long a committed receipt takes to
// reach every open stream of its chat: one op is a queued structured
// request deleted in the store (its cancelled receipt committed) and
// delivered to all streams. p50/p99 are over all deliveries.
func BenchmarkReceiptDelivery(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			env := testenv.New(b, testenv.Options{NoRunner: true})
			c := env.Client("alice")
			ctx := context.Background()
			chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("busy")}) // stays running: no workers
			if err != nil {
				b.Fatal(err)
			}
			streams := openStreams(b, c, chat.Chat.ID, n)
			defer func() {
				for _, s := range streams {
					s.Close()
				}
			}()
			owner := ownerOf(b, env, chat.Chat.ID)
			var lat []time.Duration
			var mu sync.Mutex
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sent, err := c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: text("q"), ResponseFormat: schemaFormat()})
				if err != nil {
					b.Fatal(err)
				}
				req := *sent.QueuedMessage.StructuredOutputRequestID
				var wg sync.WaitGroup
				start := make(chan time.Time)
				for _, s := range streams {
					wg.Go(func() {
						t0 := <-start
						for {
							ev, err := s.Next()
							if err != nil {
								b.Error(err)
								return
							}
							if isReceipt(req)(ev) {
								d := time.Since(t0)
								mu.Lock()
								lat = append(lat, d)
								mu.Unlock()
								return
							}
						}
					})
				}
				t0 := time.Now()
				if _, _, err := env.Store.DeleteQueued(ctx, owner, chat.Chat.ID, sent.QueuedMessage.ID); err != nil {
					b.Fatal(err)
				}
				for range streams {
					start <- t0
				}
				wg.Wait()
			}
			b.StopTimer()
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
			}
		})
	}
}

func ownerOf(b *testing.B, env *testenv.Env, chat uuid.UUID) uuid.UUID {
	var owner uuid.UUID
	if err := env.Pool.QueryRow(context.Background(), `SELECT owner_id FROM chats WHERE id = $1`, chat).Scan(&owner); err != nil {
		b.Fatal(err)
	}
	return owner
}

// BenchmarkIdleStreamMemory reports the heap and goroutines one idle stream
// costs (server handler and client reader, both in this process).
func BenchmarkIdleStreamMemory(b *testing.B) {
	const n = 1000
	env := testenv.New(b, testenv.Options{NoRunner: true})
	c := env.Client("alice")
	chat, err := c.CreateChat(context.Background(), client.CreateChatRequest{Content: text("idle")})
	if err != nil {
		b.Fatal(err)
	}
	var before, after runtime.MemStats
	for i := 0; i < b.N; i++ {
		runtime.GC()
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		streams := openStreams(b, c, chat.Chat.ID, n)
		runtime.GC()
		runtime.ReadMemStats(&after)
		g1 := runtime.NumGoroutine()
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/n, "heap_B/stream")
		b.ReportMetric(float64(g1-g0)/n, "goroutines/stream")
		for _, s := range streams {
			s.Close()
		}
		if env.Server.Streams() > n {
			b.Fatalf("%d streams open", env.Server.Streams())
		}
	}
	_ = http.StatusOK
}
