package provider

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"charm.land/fantasy"
)

// TestConcurrentCallsReuseConnections: up to Options.Calls calls at once
// (64 here), round after round, open as many connections to the provider as
// run at once and no more. Over http.DefaultTransport (2 idle connections per
// host) each round after the first closed and dialed all but two again.
func TestConcurrentCallsReuseConnections(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile("testdata/usage/openai-chat_o4-mini.sse")
	if err != nil {
		t.Fatal(err)
	}
	const calls, rounds = 8, 3
	var dialed atomic.Int64
	var arrived sync.WaitGroup // every call of a round is in before any is answered
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		all := make(chan struct{})
		go func() { arrived.Wait(); close(all) }()
		select {
		case <-all:
		case <-time.After(10 * time.Second): // a call that failed before it was sent
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		_, _ = w.Write(body)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	r := registry(t, `{"providers":[{"name":"p","type":"openai-chat","base_url":"`+srv.URL+`/v1"}],
		"models":[{"id":"m","provider":"p","model":"o4-mini"}]}`, nil)
	m, err := r.Model(t.Context(), "m")
	if err != nil {
		t.Fatal(err)
	}
	for range rounds {
		arrived.Add(calls)
		var wg sync.WaitGroup
		for range calls {
			wg.Go(func() {
				stream, err := m.LM.Stream(t.Context(), fantasy.Call{Prompt: fantasy.Prompt{fantasy.NewUserMessage("hi")}})
				if err != nil {
					t.Error(err)
					return
				}
				for part := range stream {
					if part.Type == fantasy.StreamPartTypeError {
						t.Error(part.Error)
					}
				}
			})
		}
		wg.Wait()
	}
	if got := dialed.Load(); got != calls {
		t.Errorf("%d rounds of %d calls at once dialed %d connections, want %d", rounds, calls, got, calls)
	}
}
