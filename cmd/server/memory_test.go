package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/prom"
)

// TestMemoryPerChatInFlight runs the chatd binary with 300 structured
// turns waiting on a model that takes a minute, each with its client's
// long poll open, and weighs what a chat in flight costs once collections
// have run: its goroutines' stacks and its live heap, from chatd's
// /metrics beside the idle process's. Measured: 75–79 KiB of stacks and
// 52 KiB of heap; 95 and 57 before the provider call ran on a goroutine of
// its own and the provider connections' buffers went to 1 KiB.
func TestMemoryPerChatInFlight(t *testing.T) {
	t.Parallel()
	const chats = 300
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cd := startChatd(t, ctx, []string{"--latency", "60s"}, nil)
	base, debug := cd.base, cd.debug
	idle := weigh(t, base, debug)

	c := client.New(base, cd.token, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: chats}})
	var wg sync.WaitGroup
	for i := range chats {
		wg.Go(func() {
			created, err := c.CreateChat(ctx, client.CreateChatRequest{
				Content: []client.MessagePart{client.TextPart(fmt.Sprintf("Client %d: review the change and report.", i))},
				ResponseFormat: &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "review",
					Schema: json.RawMessage(`{"type":"object","properties":{"summary":{"type":"string"},"approve":{"type":"boolean"}},"required":["summary","approve"]}`)}},
			})
			if err != nil {
				return // the test below finds fewer chats in flight
			}
			_, _ = c.GetStructuredOutput(ctx, *created.Messages[0].StructuredOutputRequestID, 50*time.Second) // held open
		})
	}
	defer wg.Wait()
	defer cancel() // ends the long polls, then the server
	for n := 0.0; n < chats; {
		s := scrapeMetrics(t, base)
		n, _ = s.Get("chatd_provider_calls_in_flight", "provider", "local")
		if ctx.Err() != nil {
			t.Fatalf("%.0f of %d provider calls in flight", n, chats)
		}
		time.Sleep(50 * time.Millisecond) // polling another process's gauge
	}
	loaded := weigh(t, base, debug)
	stack := (loaded.stack - idle.stack) / chats / 1024
	heap := (loaded.heap - idle.heap) / chats / 1024
	t.Logf("per chat in flight: %.0f KiB of stacks (%.1f goroutines), %.0f KiB of live heap", stack, (loaded.goroutines-idle.goroutines)/chats, heap)
	if stack > 88 || heap > 55 {
		t.Fatalf("a chat in flight holds %.0f KiB of stacks and %.0f KiB of live heap; the budget is 88 and 55", stack, heap)
	}
}

// weight is a process's memory after a collection.
type weight struct{ stack, heap, goroutines float64 }

// weigh collects chatd's garbage (the profiler's heap profile asks for a
// collection first; two, so that stacks shrunk in the first are counted
// shrunk) and reads its memory from /metrics.
func weigh(t *testing.T, base, debug string) weight {
	t.Helper()
	for range 2 {
		res, err := http.Get("http://" + debug + "/debug/pprof/heap?gc=1")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	s := scrapeMetrics(t, base)
	var w weight
	w.stack, _ = s.Get("go_memstats_stack_inuse_bytes")
	w.heap, _ = s.Get("go_memstats_heap_alloc_bytes")
	w.goroutines, _ = s.Get("go_goroutines")
	return w
}

func scrapeMetrics(t *testing.T, base string) *prom.Scrape {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	s, err := prom.Parse(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
