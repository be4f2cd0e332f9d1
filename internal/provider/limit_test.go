package provider

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLimiterRate: with requests_per_minute 600 (one per 100 ms) five calls
// at once start at least 100 ms apart.
func TestLimiterRate(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var starts []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
	}))
	defer srv.Close()
	l := newLimiter(http.DefaultTransport, "p", 0, 600, newLimiterMetrics(nil))
	c := &http.Client{Transport: l}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL, nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	if len(starts) != 5 {
		t.Fatalf("%d calls", len(starts))
	}
	if span := starts[4].Sub(starts[0]); span < 350*time.Millisecond {
		t.Fatalf("5 calls at 600/min spanned %s, want >= 400 ms (less scheduling slack)", span)
	}
}

// TestLimiterBackOff reads Retry-After as seconds or a date, 1 s when
// unreadable, and never moves the shared backoff earlier.
func TestLimiterBackOff(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		header string
		want   time.Duration
	}{
		{"3", 3 * time.Second},
		{"", time.Second},
		{"soon", time.Second},
		{now.Add(7 * time.Second).Format(http.TimeFormat), 7 * time.Second},
		{"100000", maxRateLimitedWait},
	} {
		l := newLimiter(nil, "p", 0, 0, newLimiterMetrics(nil))
		l.now = func() time.Time { return now }
		if got := l.backOff(c.header).Sub(now); got != c.want {
			t.Errorf("Retry-After %q: %s, want %s", c.header, got, c.want)
		}
	}
	l := newLimiter(nil, "p", 0, 0, newLimiterMetrics(nil))
	l.now = func() time.Time { return now }
	l.backOff("10")
	if got := l.backOff("1").Sub(now); got != 10*time.Second {
		t.Errorf("a shorter Retry-After moved the backoff to %s", got)
	}
}

// TestLimiterRetriesA429: a 429 is waited out and the call sent again,
// body included; the caller sees the 200.
func TestLimiterRetriesA429(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 16)
		n, _ := r.Body.Read(b)
		mu.Lock()
		bodies = append(bodies, string(b[:n]))
		first := len(bodies) == 1
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	l := newLimiter(http.DefaultTransport, "p", 1, 0, newLimiterMetrics(nil))
	req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL, strings.NewReader("hello"))
	resp, err := (&http.Client{Transport: l}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(bodies) != 2 || bodies[1] != "hello" {
		t.Fatalf("status %d, bodies %q", resp.StatusCode, bodies)
	}
	select {
	case l.slots <- struct{}{}: // the slot was released
	default:
		t.Fatal("the call's slot was not released")
	}
}
