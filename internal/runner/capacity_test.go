package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

// aliceText marks alice's chats for the mock.
const aliceText = "alice's long work"

// TestHeadroomForAUserWithNothingRunning: alice holds more chats than the
// runner has slots, each a step that streams for a minute; bob's
// structured turn (one 100 ms step) must get its receipt within 2 s, not
// after her steps. Whatever the pool's size from 2 slots up, at least one
// slot is kept for owners with nothing running (a tenth of a larger pool).
func TestHeadroomForAUserWithNothingRunning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		slots, chats, kept int
		late               bool
	}{{10, 300, 1, false}, {4, 8, 1, false}, {2, 8, 1, false}, {2, 8, 1, true}, {4, 8, 1, true}} {
		t.Run(fmt.Sprintf("slots=%d/late=%v", tc.slots, tc.late), func(t *testing.T) {
			t.Parallel()
			headroomCase(t, tc.slots, tc.chats, tc.kept, tc.late)
		})
	}
}

// headroomCase is one pool of TestHeadroomForAUserWithNothingRunning. With
// late, the runner starts after alice's chats are waiting, so that every
// slot claims at once: the headroom's claim must still see the others'.
func headroomCase(t *testing.T, slots, chats, kept int, late bool) {
	var inFlight atomic.Int32
	full := make(chan struct{}) // alice's chats hold every slot but the headroom
	release := make(chan struct{})
	var once sync.Once
	env := testenv.New(t, testenv.Options{Runner: runner.Options{MaxRunning: slots, DrainTimeout: time.Second}, NoRunner: late,
		Mock: mockllm.Options{BeforeRespond: func(ctx context.Context, req *mockllm.Request) error {
			if !strings.Contains(firstUser(req), aliceText) {
				time.Sleep(100 * time.Millisecond) // bob's model takes 100 ms
				return nil
			}
			if inFlight.Add(1) == int32(slots-kept) {
				once.Do(func() { close(full) })
			}
			select { // a step that streams for a minute
			case <-ctx.Done():
			case <-release:
			case <-time.After(time.Minute):
			}
			return nil
		}}})
	t.Cleanup(func() { close(release) })
	alice, bob := env.Client("alice"), env.Client("bob")
	ctx := t.Context()
	for range chats {
		if _, err := alice.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart(aliceText)}}); err != nil {
			t.Fatal(err)
		}
	}
	if late {
		env.StartRunner()
	}
	select {
	case <-full:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}

	begin := time.Now()
	_, req := create(t, bob, reportSchema)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := bob.WaitStructuredOutput(wctx, req)
	took := time.Since(begin)
	switch {
	case err != nil:
		t.Fatalf("bob's receipt: %v after %s while alice's %d steps held the slots (want it within 2s)", err, took, inFlight.Load())
	case res.Status != client.OutputSucceeded:
		t.Fatalf("bob's result %+v", res)
	case took > 2*time.Second:
		t.Fatalf("bob's receipt took %s while alice's steps held the slots (want <= 2s)", took)
	}
	t.Logf("bob's receipt after %s; alice has %d steps in flight", took, inFlight.Load())
	if n := inFlight.Load(); n != int32(slots-kept) {
		t.Fatalf("%d of alice's steps in flight, want %d (every slot but the %d kept)", n, slots-kept, kept)
	}
}

// TestHeadroomUnderManyShortSteps: alice's 300 chats each take many short
// steps, so slots free up all the time but her chats queue for them; bob's
// structured turn still gets its receipt within 2 s.
func TestHeadroomUnderManyShortSteps(t *testing.T) {
	t.Parallel()
	long := &mockllm.Script{Steps: []mockllm.Step{{ToolCalls: []mockllm.ToolCall{{Name: "list_files", Arguments: `{}`}}}}, Then: mockllm.ThenRepeat}
	var calls atomic.Int32
	busy := make(chan struct{})
	var once sync.Once
	env := testenv.New(t, testenv.Options{Workspace: t.TempDir(), Runner: runner.Options{MaxRunning: 10, MaxSteps: 20, DrainTimeout: time.Second},
		Mock: mockllm.Options{Latency: 20 * time.Millisecond, Scripts: map[string]*mockllm.Script{"long": long},
			BeforeRespond: func(context.Context, *mockllm.Request) error {
				if calls.Add(1) == 200 {
					once.Do(func() { close(busy) })
				}
				return nil
			}}})
	alice, bob := env.Client("alice"), env.Client("bob")
	ctx := t.Context()
	for range 300 {
		if _, err := alice.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("[script:long] " + aliceText)}}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-busy:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	begin := time.Now()
	_, req := create(t, bob, reportSchema)
	if res := wait(t, bob, req); res.Status != client.OutputSucceeded {
		t.Fatalf("bob's result %+v", res)
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Fatalf("bob's receipt took %s behind alice's 300 chats (want <= 2s)", took)
	} else {
		t.Logf("bob's receipt after %s", took)
	}
}

// countingTransport is the connection to the mock provider, counting the
// calls in flight (from the request until its response ends) and
// answering 429 when refuse says so.
type countingTransport struct {
	base            http.RoundTripper
	mu              sync.Mutex
	inFlight, peak  int
	refused, served int
	servedInBackoff int
	refuse          func(now time.Time) bool
	firstRefusal    time.Time
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	now := time.Now()
	c.mu.Lock()
	if c.refuse != nil && c.refuse(now) {
		c.refused++
		if c.firstRefusal.IsZero() {
			c.firstRefusal = now
		}
		c.mu.Unlock()
		return &http.Response{StatusCode: http.StatusTooManyRequests, Status: "429 Too Many Requests", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Retry-After": {"1"}, "Content-Type": {"application/json"}}, Request: req,
			Body: io.NopCloser(strings.NewReader(`{"error":{"message":"rate limited","type":"rate_limit_error"}}`))}, nil
	}
	if !c.firstRefusal.IsZero() && now.Sub(c.firstRefusal) > 100*time.Millisecond && now.Sub(c.firstRefusal) < 900*time.Millisecond {
		c.servedInBackoff++
	}
	c.served++
	c.inFlight++
	c.peak = max(c.peak, c.inFlight)
	c.mu.Unlock()
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		c.done()
		return nil, err
	}
	// A call ends when its response is read to its end (fantasy does not
	// close a stream), closed, or its request is cancelled.
	done := sync.OnceFunc(c.done)
	context.AfterFunc(req.Context(), done)
	resp.Body = &doneBody{ReadCloser: resp.Body, done: done}
	return resp, nil
}

func (c *countingTransport) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight--
}

type doneBody struct {
	io.ReadCloser
	done func()
}

func (b *doneBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done()
	}
	return n, err
}

func (b *doneBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

// TestProviderMaxConcurrency: with max_concurrency 3, 50 structured chats
// at once never have more than 3 calls in flight at the provider, and every
// receipt succeeds.
func TestProviderMaxConcurrency(t *testing.T) {
	t.Parallel()
	ct := &countingTransport{base: http.DefaultTransport}
	env := testenv.New(t, testenv.Options{ProviderTransport: ct, MaxConcurrency: 3, Runner: runner.Options{MaxRunning: 64},
		Mock: mockllm.Options{Latency: 30 * time.Millisecond}})
	c := env.Client("alice")
	var reqs []uuid.UUID
	for range 50 {
		_, req := create(t, c, reportSchema)
		reqs = append(reqs, req)
	}
	for _, req := range reqs {
		if res := wait(t, c, req); res.Status != client.OutputSucceeded {
			t.Fatalf("request %s: %+v", req, res)
		}
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.peak > 3 || ct.peak < 3 || ct.served < 50 {
		t.Fatalf("peak %d calls in flight at the provider (want 3, the limit), %d served", ct.peak, ct.served)
	}
}

// TestProviderRateLimitShared: the provider answers 429 with Retry-After: 1
// to everything for a second after its first 429, while chats keep
// arriving; the 429 delays every chat's call (a shared backoff: hardly any
// call is sent during it), and no request fails.
func TestProviderRateLimitShared(t *testing.T) {
	t.Parallel()
	ct := &countingTransport{base: http.DefaultTransport}
	var begin atomic.Pointer[time.Time]
	ct.refuse = func(now time.Time) bool {
		if b := begin.Load(); b != nil && now.Sub(*b) < time.Second {
			return true
		}
		if b := begin.Load(); b == nil {
			begin.Store(&now)
			return true
		}
		return false
	}
	env := testenv.New(t, testenv.Options{ProviderTransport: ct, Runner: runner.Options{MaxRunning: 64}})
	c := env.Client("alice")
	var reqs []uuid.UUID
	for range 20 { // arriving over the second the provider refuses
		_, req := create(t, c, reportSchema)
		reqs = append(reqs, req)
		time.Sleep(50 * time.Millisecond)
	}
	for _, req := range reqs {
		if res := wait(t, c, req); res.Status != client.OutputSucceeded {
			t.Fatalf("request %s: %+v", req, res)
		}
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.refused > 3 || ct.servedInBackoff > 0 {
		t.Fatalf("%d calls answered 429 and %d sent during the backoff: each chat met the limit on its own", ct.refused, ct.servedInBackoff)
	}
	t.Logf("%d calls answered 429, %d served", ct.refused, ct.served)
}

// TestWaitingForClientToolsHoldsNothing: 50 chats waiting for client tool
// results hold no slot, hence no goroutine of the runner: it released them.
// (The process's goroutine count is no measure here: the package's other
// tests run beside this one.)
func TestWaitingForClientToolsHoldsNothing(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Runner: runner.Options{MaxRunning: 64, ActionTimeout: time.Hour},
		Mock: mockllm.Options{StepFor: func(req *mockllm.Request) (mockllm.Step, bool) {
			return mockllm.Step{ToolCalls: []mockllm.ToolCall{{Name: "ask", Arguments: `{"q":"which command?"}`}}}, true
		}}})
	c := env.Client("alice")
	ctx := t.Context()
	const n = 50
	for range n {
		createWith(t, c, []client.DynamicTool{{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)}})
	}
	for waiting := 0; waiting < n; {
		if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM chats WHERE status = 'requires_action'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d chats wait for the client", waiting, n)
		case <-time.After(10 * time.Millisecond):
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for env.Slots.Used() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // the last commits release their slots
	}
	if used := env.Slots.Used(); used != 0 {
		t.Fatalf("%d slots held by chats waiting for the client", used)
	}
}
