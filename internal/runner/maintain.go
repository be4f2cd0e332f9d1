package runner

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"
)

// maintain is the runner's housekeeping, apart from the workers (River's
// rescuer and cleaner are the model): it answers client tool calls whose
// deadline passed, so that their turns go on (a chat it resumes wakes a
// worker like any other), and deletes expired idempotency keys. Every
// replica runs it; the statements skip rows another replica holds.
func (r *Runner) maintain(ctx context.Context) {
	keys := time.Now()
	for {
		// The overdue scan runs about once per idle poll, whatever the
		// number of workers; keys are deleted about once a minute.
		jitter := time.Duration(rand.Int64N(int64(r.opts.Poll)/4 + 1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.opts.Poll + jitter):
		}
		// Not cancelled mid-flight (a cancelled query costs the
		// connection); shutdown waits for the statement in flight.
		mctx := context.WithoutCancel(ctx)
		for {
			n, err := r.store.ExpireActions(mctx, 16)
			if err != nil {
				r.log.Warn("expiring overdue client tool calls failed", slog.String("error", err.Error()))
			}
			if n < 16 || ctx.Err() != nil {
				break
			}
		}
		if time.Since(keys) >= time.Minute {
			keys = time.Now()
			if _, err := r.store.DeleteExpiredKeys(mctx, 1000); err != nil {
				r.log.Warn("deleting expired idempotency keys failed", slog.String("error", err.Error()))
			}
		}
	}
}
