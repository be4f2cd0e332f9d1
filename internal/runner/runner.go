// Package runner is the worker loop: it claims runnable chats, builds the
// prompt, streams one provider step at a time, runs tools (the structured
// output finalizer among them) and commits every step behind the chat's
// fence. Each pass re-reads the chat and decides one action from what is
// committed, so a restart, a takeover or a concurrent edit simply leads to a
// fresh decision.
package runner

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/hooks"
	"github.com/chatd/chatd/internal/metrics"
	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/provider"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/tools"
)

// Options tune the runner.
type Options struct {
	// Workers is the number of chats run concurrently.
	Workers int
	// Lease is how long a claim lasts without renewal.
	Lease time.Duration
	// MaxSteps bounds provider steps per turn (and per structured request).
	MaxSteps int
	// MaxAttempts bounds provider attempts for one history version
	// (transient errors are retried until then).
	MaxAttempts int
	// RetryBase and RetryMax shape the retry backoff.
	RetryBase, RetryMax time.Duration
	// SilenceTimeout cuts off a provider step that sends nothing for that
	// long (the step is retried as a transient failure).
	SilenceTimeout time.Duration
	// Poll is the idle re-check interval that covers lost notifications.
	Poll time.Duration
	// Tools are the server-executed tools offered to every chat.
	Tools []tools.Tool
	// ServerToolTimeout bounds one server tool call (default 30s).
	ServerToolTimeout time.Duration
	// Hooks vet candidates before a structured turn finishes (may be nil).
	Hooks *hooks.Runner
	// CompactionThreshold is the fraction of a model's context window the
	// prompt may fill before older history is summarised (default 0.7).
	CompactionThreshold float64
	// ActionTimeout is how long a turn waits for client tool results
	// before answering the calls with errors itself.
	ActionTimeout time.Duration
	// DrainTimeout bounds how long in-flight work may continue after Run's
	// context ends before it is cancelled and its chat released.
	DrainTimeout time.Duration
	Preview      Preview
	Logger       *slog.Logger
	// Metrics, when set, receives the runner's metrics (see metrics.go).
	Metrics *metrics.Registry
}

func (o *Options) defaults() {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = 25
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.RetryBase <= 0 {
		o.RetryBase = time.Second
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 30 * time.Second
	}
	if o.SilenceTimeout <= 0 {
		o.SilenceTimeout = 5 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = 5 * time.Second
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 15 * time.Second
	}
	if o.CompactionThreshold <= 0 || o.CompactionThreshold >= 1 {
		o.CompactionThreshold = 0.7
	}
	if o.ServerToolTimeout <= 0 {
		o.ServerToolTimeout = 30 * time.Second
	}
	if o.ActionTimeout <= 0 {
		o.ActionTimeout = 10 * time.Minute
	}
	if o.Preview == nil {
		o.Preview = nopPreview{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Runner runs workers.
type Runner struct {
	store  *store.Store
	models *provider.Registry
	hub    *notify.Hub
	opts   Options
	log    *slog.Logger

	m       runnerMetrics
	claimed atomic.Int64 // chats held by this runner's workers
}

// New returns a runner.
func New(st *store.Store, models *provider.Registry, hub *notify.Hub, opts Options) *Runner {
	opts.defaults()
	r := &Runner{store: st, models: models, hub: hub, opts: opts, log: opts.Logger}
	r.instrument(opts.Metrics)
	return r
}

// Run runs the workers until ctx ends, then lets in-flight actions finish
// for up to DrainTimeout, releases their chats and returns.
func (r *Runner) Run(ctx context.Context) {
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(r.opts.DrainTimeout, cancelHard)
		context.AfterFunc(hard, func() { t.Stop() })
	})
	defer stop()
	var wg sync.WaitGroup
	for i := 0; i < r.opts.Workers; i++ {
		w := &worker{r: r, id: uuid.New()}
		wg.Go(func() { w.loop(ctx, hard) })
	}
	wg.Wait()
}

type worker struct {
	r  *Runner
	id uuid.UUID
}

func (w *worker) loop(ctx, hard context.Context) {
	log := w.r.log.With(slog.String("worker_id", w.id.String()))
	for ctx.Err() == nil {
		wake := w.r.hub.WorkSignal()
		chat, err := w.r.store.Claim(hard, w.id, w.r.opts.Lease)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				log.Error("claim failed", slog.String("error", err.Error()))
			} else if n, err := w.r.store.ExpireActions(hard, 16); err != nil {
				log.Warn("expiring overdue client tool calls failed", slog.String("error", err.Error()))
			} else if n > 0 {
				continue // those chats run again now
			}
			jitter := time.Duration(rand.Int64N(int64(w.r.opts.Poll) / 4))
			select {
			case <-ctx.Done():
			case <-wake:
			case <-time.After(w.r.opts.Poll + jitter):
				// Idle: housekeeping that needs no hurry.
				if _, err := w.r.store.DeleteExpiredKeys(hard, 1000); err != nil {
					log.Warn("deleting expired idempotency keys failed", slog.String("error", err.Error()))
				}
			}
			continue
		}
		w.runChat(ctx, hard, chat.ID, log.With(slog.String("chat_id", chat.ID.String())))
	}
}

// errLeaseLost cancels a chat's work when the heartbeat finds another owner.
var errLeaseLost = errors.New("lease lost")

// runChat drives one claimed chat until it is no longer ours to run.
func (w *worker) runChat(ctx, hard context.Context, chatID uuid.UUID, log *slog.Logger) {
	w.r.claimed.Add(1)
	defer w.r.claimed.Add(-1)
	chatCtx, cancel := context.WithCancelCause(hard)
	defer cancel(nil)
	sub := w.r.hub.Subscribe(chatID)
	defer sub.Close()
	// Stopping (drained or cut off): hand the chat back at once rather than
	// leaving it to the lease. The release is guarded by worker_id, so it is
	// a no-op for a chat this worker no longer owns.
	defer func() {
		if ctx.Err() == nil {
			return
		}
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		if err := w.r.store.Release(rctx, chatID, w.id); err != nil {
			log.Warn("release failed", slog.String("error", err.Error()))
		}
	}()

	go func() {
		t := time.NewTicker(w.r.opts.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-chatCtx.Done():
				return
			case <-t.C:
				// Not cancelled with the chat's work: a renewal in flight
				// when the turn ends completes (a cancelled query costs the
				// connection). The bound only matters when the database hangs.
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(chatCtx), w.r.opts.Lease/3)
				err := w.r.store.RenewLease(rctx, chatID, w.id, w.r.opts.Lease)
				rcancel()
				if errors.Is(err, store.ErrFenceMiss) {
					cancel(errLeaseLost)
					return
				}
				if err != nil && chatCtx.Err() == nil {
					log.Warn("lease renewal failed", slog.String("error", err.Error()))
				}
			}
		}
	}()

	t := &turnRunner{w: w, sub: sub, log: log}
	misses := 0
	for {
		if ctx.Err() != nil {
			return // draining: released above, for another replica
		}
		if chatCtx.Err() != nil {
			return
		}
		done, err := t.pass(chatCtx, chatID)
		if !errors.Is(err, store.ErrFenceMiss) {
			misses = 0
		}
		switch {
		case errors.Is(err, store.ErrFenceMiss):
			// Something moved under us: decide again from what is committed.
			// Misses in a row without any progress mean a bug; do not spin.
			if misses++; misses > 3 {
				log.Warn("repeated fence misses", slog.Int("misses", misses))
				select {
				case <-chatCtx.Done():
					return
				case <-time.After(w.r.opts.RetryBase * time.Duration(min(misses, 100))):
				}
			}
			continue
		case err != nil:
			if chatCtx.Err() != nil {
				return
			}
			log.Error("chat pass failed", slog.String("error", err.Error()))
			select {
			case <-chatCtx.Done():
				return
			case <-time.After(w.r.opts.RetryBase):
			}
		case done:
			return
		}
	}
}

// backoff returns the delay before attempt n (1-based), at least floor.
func (r *Runner) backoff(n int32, floor time.Duration) time.Duration {
	d := r.opts.RetryBase << min(n-1, 16)
	if d > r.opts.RetryMax {
		d = r.opts.RetryMax
	}
	d += time.Duration(rand.Int64N(int64(d)/4 + 1))
	return max(d, floor)
}
