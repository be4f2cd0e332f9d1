package mockllm

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"
)

// How answers are paced: the waits (sleep) for Options.Latency, a step's
// delay_ms and the gaps between stream events; Options.StreamChunks
// (writeInChunks); and the Options.BeforeChunk hook (chunkHook).

// writeInChunks sends a streamed answer in n chunks, delay apart, the
// first at once: write renders the stream (with no delay of its own) into
// a recorder, whose events (one per Write) are then grouped into n nearly
// equal runs. A chunk with no event is an empty wait, so the stream lasts
// (n-1) × delay whatever the number of events the answer has.
func writeInChunks(ctx context.Context, w http.ResponseWriter, n int, delay time.Duration, write func(http.ResponseWriter)) {
	rec := &eventRecorder{w: w}
	write(rec)
	rc := http.NewResponseController(w)
	for k := range n {
		if k > 0 && !sleep(ctx, delay) {
			return
		}
		lo, hi := k*len(rec.events)/n, (k+1)*len(rec.events)/n
		if lo == hi {
			continue
		}
		if _, err := w.Write(bytes.Join(rec.events[lo:hi], nil)); err != nil || rc.Flush() != nil {
			return
		}
	}
}

// eventRecorder keeps the writes of a stream instead of sending them; the
// headers go out at once, as a real server sends them before the model
// speaks.
type eventRecorder struct {
	w      http.ResponseWriter
	events [][]byte
}

func (r *eventRecorder) Header() http.Header { return r.w.Header() }

func (r *eventRecorder) WriteHeader(code int) {
	r.w.WriteHeader(code)
	_ = http.NewResponseController(r.w).Flush()
}

func (r *eventRecorder) Write(b []byte) (int, error) {
	r.events = append(r.events, bytes.Clone(b))
	return len(b), nil
}

// Flush is a no-op: the events are sent later, in chunks.
func (r *eventRecorder) Flush() {}

// sleep waits d or until ctx is done, reporting whether to carry on.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// chunkHook runs Options.BeforeChunk before each write of a stream: every
// wire format writes one event per Write.
type chunkHook struct {
	http.ResponseWriter
	before func(n int) error
	n      int
	failed bool
}

func (c *chunkHook) Write(b []byte) (int, error) {
	if c.failed {
		return 0, errHookStopped
	}
	if err := c.before(c.n); err != nil {
		c.failed = true
		return 0, err
	}
	c.n++
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer (Flush).
func (c *chunkHook) Unwrap() http.ResponseWriter { return c.ResponseWriter }

var errHookStopped = errors.New("stream stopped by BeforeChunk")
