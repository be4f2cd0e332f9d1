package webhooks

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPostsInFlightReuseConnections: Concurrency POSTs at once to one
// endpoint, round after round, keep Concurrency connections open and dial
// no more. Over http.DefaultTransport each round after the first dialed all
// but 2 again.
func TestPostsInFlightReuseConnections(t *testing.T) {
	t.Parallel()
	const posts, rounds = 8, 3
	var dialed atomic.Int64
	var round sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		round.Done()
		all := make(chan struct{}) // all of the round's POSTs are in flight at once
		go func() { round.Wait(); close(all) }()
		select {
		case <-all:
		case <-time.After(10 * time.Second): // a POST that failed before it was sent
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	d, err := New(nil, nil, Options{Concurrency: posts})
	if err != nil {
		t.Fatal(err)
	}
	for range rounds {
		round.Add(posts)
		var wg sync.WaitGroup
		for range posts {
			wg.Go(func() {
				res, err := d.client.Post(srv.URL, "application/json", strings.NewReader(`{}`))
				if err != nil {
					t.Error(err)
					return
				}
				res.Body.Close()
			})
		}
		wg.Wait()
	}
	if got := dialed.Load(); got != posts {
		t.Errorf("%d rounds of %d POSTs at once dialed %d connections, want %d", rounds, posts, got, posts)
	}
}
