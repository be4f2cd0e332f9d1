package provider

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/prom"
)

// maxRateLimitedWait bounds how long one call waits out a provider's 429s
// before the 429 reaches the caller (which then retries it as transient,
// counting a provider attempt).
const maxRateLimitedWait = 2 * time.Minute

// limiter keeps one provider's calls within its limits: at most max calls
// in flight (config max_concurrency; 0: no bound), at most rpm started per
// minute (requests_per_minute; 0: no bound), and after a 429 no call starts
// before the time its Retry-After names, for every chat (a shared backoff).
// Calls beyond wait in the order they came; a waiting call holds nothing but
// its goroutine. A call lasts until its response body is read to its end,
// closed, or its request's context ends (fantasy reads a stream to its end
// without closing it).
type limiter struct {
	base     http.RoundTripper
	slots    chan struct{} // nil: no bound on calls in flight
	interval time.Duration // 1 min ÷ rpm; 0: no bound on the rate
	now      func() time.Time

	mu        sync.Mutex
	next      time.Time // the earliest start of the next call (rate and backoff)
	notBefore time.Time // a 429's Retry-After

	inFlight, waiting prometheus.Gauge
	limited           prometheus.Counter
}

// limiterMetrics are the per-provider instruments (no-ops without a
// registry).
type limiterMetrics struct {
	inFlight, waiting *prometheus.GaugeVec
	limited           *prometheus.CounterVec
}

func newLimiterMetrics(reg *prometheus.Registry) limiterMetrics {
	return limiterMetrics{
		inFlight: prom.Gauge(reg, "chatd_provider_calls_in_flight",
			"Provider HTTP calls under way (until their response ends), by provider.", "provider"),
		waiting: prom.Gauge(reg, "chatd_provider_calls_waiting",
			"Provider HTTP calls waiting for the provider's limits (max_concurrency, requests_per_minute, a 429's Retry-After), by provider.", "provider"),
		limited: prom.Counter(reg, "chatd_provider_rate_limited_total",
			"429 answers from the provider, by provider; each delays every call to it until its Retry-After.", "provider"),
	}
}

func newLimiter(base http.RoundTripper, name string, maxConcurrency, rpm int, m limiterMetrics) *limiter {
	l := &limiter{base: base, now: time.Now,
		inFlight: m.inFlight.WithLabelValues(name), waiting: m.waiting.WithLabelValues(name), limited: m.limited.WithLabelValues(name)}
	if maxConcurrency > 0 {
		l.slots = make(chan struct{}, maxConcurrency)
	}
	if rpm > 0 {
		l.interval = time.Minute / time.Duration(rpm)
	}
	return l
}

func (l *limiter) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	release := sync.OnceFunc(l.release)
	deadline := l.now().Add(maxRateLimitedWait)
	for {
		if err := l.waitTurn(ctx); err != nil {
			release()
			return nil, err
		}
		resp, err := l.base.RoundTrip(req)
		if err != nil {
			release()
			return nil, err
		}
		if resp.StatusCode != http.StatusTooManyRequests {
			stop := context.AfterFunc(ctx, release)
			resp.Body = &releasingBody{ReadCloser: resp.Body, release: func() {
				stop()
				release()
			}}
			return resp, nil
		}
		l.limited.Inc()
		until := l.backOff(resp.Header.Get("Retry-After"))
		if req.GetBody == nil || until.After(deadline) {
			resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
			return resp, nil // the caller's retry takes it from here
		}
		body, gerr := req.GetBody()
		if gerr != nil { // cannot send it again: the caller's retry will
			resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
			return resp, nil //nolint:nilerr // the 429 is the answer
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // keep the connection
		_ = resp.Body.Close()
		req = req.Clone(ctx)
		req.Body = body
	}
}

// acquire takes a place among the calls in flight, in arrival order.
func (l *limiter) acquire(ctx context.Context) error {
	if l.slots != nil {
		select {
		case l.slots <- struct{}{}:
		default:
			l.waiting.Inc()
			select {
			case l.slots <- struct{}{}:
				l.waiting.Dec()
			case <-ctx.Done():
				l.waiting.Dec()
				return ctx.Err()
			}
		}
	}
	l.inFlight.Inc()
	return nil
}

func (l *limiter) release() {
	l.inFlight.Dec()
	if l.slots != nil {
		<-l.slots
	}
}

// waitTurn waits until the call may start: its place in the rate, and no
// earlier than a 429's Retry-After.
func (l *limiter) waitTurn(ctx context.Context) error {
	if l.interval == 0 && l.slots == nil {
		l.mu.Lock()
		nb := l.notBefore
		l.mu.Unlock()
		if !nb.After(l.now()) {
			return nil
		}
	}
	l.mu.Lock()
	now := l.now()
	start := maxTime(now, l.next, l.notBefore)
	if l.interval > 0 {
		l.next = start.Add(l.interval)
	}
	l.mu.Unlock()
	wait := start.Sub(now)
	if wait <= 0 {
		return nil
	}
	l.waiting.Inc()
	defer l.waiting.Dec()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backOff records a 429's Retry-After (seconds or an HTTP date; 1 s when
// absent or unreadable) for every call, and returns when calls may go on.
func (l *limiter) backOff(retryAfter string) time.Time {
	now := l.now()
	d := time.Second
	if s, err := strconv.Atoi(retryAfter); err == nil && s >= 0 {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(retryAfter); err == nil {
		d = t.Sub(now)
	}
	d = min(max(d, 0), maxRateLimitedWait)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notBefore = maxTime(l.notBefore, now.Add(d))
	return l.notBefore
}

func maxTime(a time.Time, bs ...time.Time) time.Time {
	for _, b := range bs {
		if b.After(a) {
			a = b
		}
	}
	return a
}

// releasingBody ends the call when the response is read to its end or
// closed.
type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.release()
	}
	return n, err
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}
