package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatd/chatd/client"
)

// turn is one structured turn: finished (ok says whether it succeeded), or
// open: abandoned without a receipt at end.
type turn struct {
	start, end time.Time
	ok, open   bool
}

// load is one drive of the clients against the replicas.
type load struct {
	clients  [][]*client.Client // [replica][user]
	n        int                // clients
	window   time.Duration      // the window's length (unless maxTurns)
	maxTurns int                // when positive, the window ends after this many turns
	lead     time.Duration      // from the first client's start to the window's
	ramp     time.Duration      // client i starts i × ramp ÷ n after the first
	drain    time.Duration      // bound on the wait for the turns in flight after the window (0: none)
	wait     time.Duration      // each long poll's ?wait=
	// tolerant counts errors in errs and goes on; otherwise the first one
	// ends the drive.
	tolerant bool
	errs     *tally
	inFlight *gauge // turns started and not yet answered (nil: not counted)
}

// client is the client i runs as: user i mod users, on replica
// (i ÷ users) mod replicas, so that each user's clients are spread over
// the replicas.
func (l *load) client(i int) *client.Client {
	users := len(l.clients[0])
	return l.clients[(i/users)%len(l.clients)][i%users]
}

// errorBackoff is how long a client waits after a failed call before the
// next, so that a failing server is not answered by a storm of retries.
const errorBackoff = time.Second

// drive runs n loops of turns, the i-th starting i × ramp ÷ n after the
// first, for lead + window (or until maxTurns completed), then stops
// starting turns and lets those in flight finish, for at most drain when
// set: the rest are abandoned and returned open. It returns every turn
// and the window's bounds.
func drive(ctx context.Context, l load) ([]turn, time.Time, time.Time, error) {
	var (
		mu       sync.Mutex
		turns    []turn
		stopping atomic.Bool
		count    atomic.Int64
		full     = make(chan struct{})
		fullOnce sync.Once
		firstErr error
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	first := time.Now()
	var wg sync.WaitGroup
	for i := range l.n {
		c := l.client(i)
		delay := time.Duration(int64(l.ramp) * int64(i) / int64(l.n))
		wg.Go(func() {
			if delay > 0 && !sleepCtx(runCtx, delay) {
				return
			}
			for !stopping.Load() && runCtx.Err() == nil {
				t, err := oneTurn(runCtx, c, i, &l)
				if err != nil && l.tolerant {
					continue // counted, and waited for
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil && runCtx.Err() == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				mu.Lock()
				turns = append(turns, t)
				mu.Unlock()
				if !t.open && l.maxTurns > 0 && count.Add(1) >= int64(l.maxTurns) {
					fullOnce.Do(func() { close(full) })
				}
			}
		})
	}
	var window <-chan time.Time
	if l.maxTurns <= 0 {
		window = time.After(l.lead + l.window)
	}
	select {
	case <-window:
	case <-full:
	case <-runCtx.Done():
	}
	start, end := first.Add(l.lead), time.Now()
	if end.Before(start) {
		start = first
	}
	stopping.Store(true)
	waitBounded(&wg, l.drain, cancel)
	if firstErr != nil {
		return nil, start, end, firstErr
	}
	return turns, start, end, ctx.Err()
}

// waitBounded waits for wg; with a positive bound, it calls cancel once the
// bound passed and waits for the rest.
func waitBounded(wg *sync.WaitGroup, bound time.Duration, cancel context.CancelFunc) {
	if bound <= 0 {
		wg.Wait()
		return
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(bound):
		cancel()
		<-done
	}
}

// sleepCtx waits d unless ctx ends first; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// oneTurn creates a structured chat and long-polls its receipt. A turn
// cut off by ctx is returned open. A tolerant load counts a failed call,
// waits errorBackoff, and then polls again, or returns the error of a
// failed create (the turn never started).
func oneTurn(ctx context.Context, c *client.Client, i int, l *load) (turn, error) {
	t := turn{start: time.Now()}
	if l.inFlight != nil {
		l.inFlight.add(1)
		defer l.inFlight.add(-1)
	}
	abandoned := func() (turn, error) {
		t.end, t.open = time.Now(), true
		return t, nil
	}
	created, err := c.CreateChat(ctx, client.CreateChatRequest{
		Content: []client.MessagePart{client.TextPart(fmt.Sprintf("Client %d: review the change and report.", i))},
		ResponseFormat: &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{
			Name: "review", Schema: json.RawMessage(benchSchema)}},
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return abandoned()
	case err != nil && l.tolerant:
		l.errs.callFailed(fmt.Errorf("create: %w", err))
		sleepCtx(ctx, errorBackoff)
		return t, err
	case err != nil:
		return t, fmt.Errorf("create: %w", err)
	}
	if len(created.Messages) == 0 || created.Messages[0].StructuredOutputRequestID == nil {
		err := errors.New("create: no structured request id")
		if l.tolerant {
			l.errs.callFailed(err)
		}
		return t, err
	}
	id := *created.Messages[0].StructuredOutputRequestID
	for {
		res, err := c.GetStructuredOutput(ctx, id, l.wait)
		switch {
		case err != nil && ctx.Err() != nil:
			return abandoned()
		case err != nil && l.tolerant:
			l.errs.callFailed(fmt.Errorf("wait for %s: %w", id, err))
			sleepCtx(ctx, errorBackoff)
			continue
		case err != nil:
			return t, fmt.Errorf("wait for %s: %w", id, err)
		}
		if res.Status != client.OutputPending {
			t.end, t.ok = time.Now(), res.Status == client.OutputSucceeded
			if !t.ok && l.errs != nil {
				l.errs.receipt(res)
			}
			return t, nil
		}
	}
}
