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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/handoff"
	"github.com/chatd/chatd/internal/hooks"
	"github.com/chatd/chatd/internal/mcp"
	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/provider"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/testsignal"
	"github.com/chatd/chatd/internal/tools"
)

// Defaults of Options; the server's flags take theirs from here.
const (
	// DefaultMaxRunning is high: a chat waiting on its model costs a
	// goroutine and some buffers, so a process keeps thousands in flight
	// (the server derives its own from its descriptors and memory).
	DefaultMaxRunning        = 2000
	DefaultLease             = 30 * time.Second
	DefaultMaxSteps          = 25
	DefaultMaxAttempts       = 5
	DefaultSilenceTimeout    = 5 * time.Minute
	DefaultDrainTimeout      = 15 * time.Second
	DefaultServerToolTimeout = 30 * time.Second
	DefaultActionTimeout     = 10 * time.Minute
)

// Options tune the runner.
type Options struct {
	// MaxRunning is how many chats run at once (default DefaultMaxRunning).
	// A running chat costs a goroutine and its buffers; it holds a
	// database connection only while it runs a statement.
	MaxRunning int
	// MaxRunningPerUser, when positive, caps one user's running chats
	// across every replica (checked by each claim); hand-offs at admission
	// are then off.
	MaxRunningPerUser int
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
	// MCP are the operator's MCP servers; a chat is offered the tools of
	// those it may use (mcp.Manager.Tools). May be nil.
	MCP *mcp.Manager
	// Slots, when set, are the process's running slots, shared with its
	// API, which hands over the chats it admits (internal/handoff); nil:
	// the runner's own, and no hand-offs.
	Slots *handoff.Slots[store.Turn]
	// Spawn, when set, offers spawn_agent to chats that opted in.
	Spawn *SpawnOptions
	// ServerToolTimeout bounds one server tool call.
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
	// RetainChats, when positive, deletes chats at rest for longer
	// (retention.go); RetentionBatch chats per transaction at most
	// (default DefaultRetentionBatch).
	RetainChats    time.Duration
	RetentionBatch int
	// RetainTombstones, when positive, deletes the tombstones of chats
	// deleted longer ago; 0 keeps them.
	RetainTombstones time.Duration
	Preview          Preview
	Logger           *slog.Logger
	// Metrics, when set, receives the runner's metrics (see metrics.go).
	Metrics *prometheus.Registry
	// TestSignals are points tests hold; nil in production.
	TestSignals *TestSignals
}

// TestSignals are the points of a worker's pass that a test can hold
// (internal/testsignal) to race an interrupt, an edit or a restart against
// it deterministically. Production leaves them zero.
type TestSignals struct {
	// FinalizerFragment holds a step once it has relayed a fragment of a
	// finalizer call's arguments; the step's end (an interrupt cuts it)
	// lets it go.
	FinalizerFragment testsignal.Barrier
	// BeforePublish holds a commit that writes a succeeded receipt, its
	// value validated (and vetted by the stop hooks), before it is applied.
	BeforePublish testsignal.Barrier
	// AfterPublish holds the worker once such a commit returned.
	AfterPublish testsignal.Barrier
}

func (o *Options) defaults() {
	if o.MaxRunning <= 0 {
		o.MaxRunning = DefaultMaxRunning
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = DefaultMaxSteps
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.RetryBase <= 0 {
		o.RetryBase = time.Second
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 30 * time.Second
	}
	if o.SilenceTimeout <= 0 {
		o.SilenceTimeout = DefaultSilenceTimeout
	}
	if o.Poll <= 0 {
		o.Poll = 5 * time.Second
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.CompactionThreshold <= 0 || o.CompactionThreshold >= 1 {
		o.CompactionThreshold = 0.7
	}
	if o.ServerToolTimeout <= 0 {
		o.ServerToolTimeout = DefaultServerToolTimeout
	}
	if o.ActionTimeout <= 0 {
		o.ActionTimeout = DefaultActionTimeout
	}
	if o.RetentionBatch <= 0 {
		o.RetentionBatch = DefaultRetentionBatch
	}
	if o.Preview == nil {
		o.Preview = nopPreview{}
	}
	if o.Spawn != nil {
		sp := *o.Spawn
		sp.defaults()
		o.Spawn = &sp
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.TestSignals == nil {
		o.TestSignals = &TestSignals{}
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
	rm      retentionMetrics
	slots   *handoff.Slots[store.Turn]
	claimed atomic.Int64 // chats held by this runner right now
	// claimMu: a claim for the slot of the headroom runs alone, after this
	// process's other claims committed, so that its count of the owner's
	// running chats sees them (concurrent statements would not).
	claimMu sync.RWMutex
	leases  leases        // their claims, renewed together
	chain   chan struct{} // a scan found work: look for more
	owed    atomic.Bool   // a wake-up found no slot: look when one is released
}

// New returns a runner.
func New(st *store.Store, models *provider.Registry, hub *notify.Hub, opts Options) *Runner {
	opts.defaults()
	r := &Runner{store: st, models: models, hub: hub, opts: opts, log: opts.Logger, chain: make(chan struct{}, 1), slots: opts.Slots}
	if r.slots == nil {
		r.slots = handoff.New[store.Turn]()
	}
	r.instrument(opts.Metrics)
	return r
}

// Run runs chats, as many at once as Options.MaxRunning, and the
// maintenance loop until ctx ends, then lets in-flight actions finish for
// up to DrainTimeout, releases their chats and returns.
func (r *Runner) Run(ctx context.Context) {
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(r.opts.DrainTimeout, cancelHard)
		context.AfterFunc(hard, func() { t.Stop() })
	})
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { r.maintain(ctx) })
	renewCtx, stopRenewing := context.WithCancel(hard)
	wg.Go(func() { r.renewLeases(renewCtx) })
	if r.opts.RetainChats > 0 || r.opts.RetainTombstones > 0 {
		wg.Go(func() { r.retain(ctx) })
	}
	r.slots.Open(handoff.Limits{Max: r.opts.MaxRunning, Headroom: handoff.Headroom(r.opts.MaxRunning), Lease: r.opts.Lease,
		NoHandOff: r.opts.MaxRunningPerUser > 0},
		func(sl *handoff.Slot, turn store.Turn) {
			r.m.claimWait.Observe(0)
			r.serve(ctx, hard, sl, &turn, uuid.Nil)
		})
	r.chainOne() // whatever was left runnable before this process started
	r.dispatch(ctx, hard)
	<-r.slots.Close() // every chat run has ended: drained, or cut off and released
	stopRenewing()
	wg.Wait()
}

// chainOne wakes the dispatcher to look for work.
func (r *Runner) chainOne() {
	select {
	case r.chain <- struct{}{}:
	default:
	}
}

// dispatch waits for a free slot, then for a wake-up, and runs what the
// wake-up calls for in that slot, until ctx ends. A wake-up names the chat
// that became runnable (notify.Hub.Work: one per notification, whatever the
// number of free slots); without a name (a reconnect, the idle poll, a
// chain) the slot claims the next runnable chat and, when it found one,
// chains another look. Wake-ups wait in the hub's backlog while every slot
// is taken, so a busy process reads them as slots free up.
//
// The API also takes slots for the chats it admits (handoff.Slots.Reserve).
func (r *Runner) dispatch(ctx, hard context.Context) {
	poll := time.NewTimer(r.opts.Poll)
	defer poll.Stop()
	for r.slots.Wait(ctx.Done()) {
		var chatID uuid.UUID
		select {
		case <-ctx.Done():
			return
		case chatID = <-r.hub.Work():
		case <-r.chain:
		case <-poll.C:
		}
		poll.Reset(r.opts.Poll + time.Duration(rand.Int64N(int64(r.opts.Poll)/4+1)))
		sl, ok := r.slots.Take()
		if !ok { // a hand-off took the last one: look when one is released
			r.owed.Store(true)
			continue
		}
		go r.serve(ctx, hard, sl, nil, chatID)
	}
}

// serve runs chats in one slot: turn, when handed over, else what claiming
// chatID (uuid.Nil: the next runnable chat) gets. A chat handed back for
// another user's (fairness) is followed by a fair claim in the same slot.
func (r *Runner) serve(ctx, hard context.Context, sl *handoff.Slot, turn *store.Turn, chatID uuid.UUID) {
	defer r.release(sl)
	for {
		if turn == nil {
			claim, err := r.claim(hard, chatID, sl)
			if err != nil {
				r.log.Error("claim failed", slog.String("error", err.Error()))
				return
			}
			if claim.Turn.Chat.ID == uuid.Nil {
				if sl.Headroom && chatID != uuid.Nil {
					r.owed.Store(true) // maybe its owner has turns running: a released slot looks again
				}
				return
			}
			if chatID == uuid.Nil {
				r.chainOne() // found one: look for more
			}
			turn = &claim.Turn
		}
		if !r.runChat(ctx, hard, turn) || ctx.Err() != nil {
			return
		}
		turn, chatID = nil, uuid.Nil
	}
}

// release gives a slot back; a wake-up that found no slot is answered now
// by a look for the next runnable chat.
func (r *Runner) release(sl *handoff.Slot) {
	sl.Release()
	if r.owed.Swap(false) {
		r.chainOne()
	}
}

// claim claims chatID (or, for uuid.Nil, the next runnable chat) within
// the slot's limits. A claim that skipped a row another transaction held
// (a stream's read, a commit) is tried again shortly, a few times, rather
// than left to the idle poll.
func (r *Runner) claim(ctx context.Context, chatID uuid.UUID, sl *handoff.Slot) (store.Claim, error) {
	p := store.ClaimParams{Worker: uuid.New(), Chat: chatID, Lease: r.opts.Lease, CountAttempt: true,
		OwnerBelow: int32(r.opts.MaxRunningPerUser)}
	// Whether this slot is the headroom is decided now, not when it was
	// taken (slots taken together would all think themselves ordinary),
	// and while holding claimMu: a headroom claim waits for the ordinary
	// claims that decided before it, so its count sees them.
	r.claimMu.RLock()
	if r.slots.OthersContended() {
		r.claimMu.RUnlock()
		r.claimMu.Lock()
		defer r.claimMu.Unlock()
		p.OwnerBelow = 1 // an owner with nothing running
	} else {
		defer r.claimMu.RUnlock()
	}
	for try := 1; ; try++ {
		c, err := r.store.ClaimTurn(ctx, p)
		if err != nil || !c.Skipped || try == 4 {
			if err == nil && c.Turn.Chat.ID != uuid.Nil {
				r.m.claimWait.Observe(c.Waited.Seconds())
			}
			return c, err
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(time.Duration(try) * 5 * time.Millisecond):
		}
	}
}

// errLeaseLost cancels a chat's work when the heartbeat finds another owner;
// errChatGone when it finds the chat deleted.
var (
	errLeaseLost = errors.New("lease lost")
	errChatGone  = errors.New("chat deleted")
)

// stopped reports whether the chat's work was cancelled, saying so when
// the chat was deleted.
func stopped(ctx, chatCtx context.Context, log *slog.Logger) bool {
	if ctx.Err() == nil && chatCtx.Err() == nil {
		return false
	}
	if errors.Is(context.Cause(chatCtx), errChatGone) {
		log.Debug("chat deleted: its turn stops")
	}
	return true
}

// releaseIfStopping: when the runner stops (drained or cut off), it hands
// the chat back at once rather than leaving it to the lease. The release is
// guarded by worker_id, so it is a no-op for a chat this worker no longer
// owns.
func (r *Runner) releaseIfStopping(ctx context.Context, chatID, claimID uuid.UUID, log *slog.Logger) {
	if ctx.Err() == nil {
		return
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	if err := r.store.Release(rctx, chatID, claimID); err != nil {
		log.Warn("release failed", slog.String("error", err.Error()))
	}
}

// reload reads the chat's turn again. ok is false when the turn stops
// (the runner or the chat's work ended, or the chat was deleted); a nil
// turn with ok means the read failed and is to be tried again.
func (r *Runner) reload(ctx, chatCtx context.Context, chatID uuid.UUID, log *slog.Logger) (turn *store.Turn, ok bool) {
	loaded, err := r.store.LoadTurn(chatCtx, chatID)
	if err == nil {
		return &loaded, true
	}
	if stopped(ctx, chatCtx, log) {
		return nil, false
	}
	if errors.Is(err, store.ErrNotFound) {
		log.Debug("chat deleted: its turn stops")
		return nil, false
	}
	log.Error("reading the chat failed", slog.String("error", err.Error()))
	return nil, sleep(chatCtx, r.opts.RetryBase)
}

// runChat drives a claimed chat until it is no longer ours to run. It
// reports whether it handed the chat back for another user's (fairness: see
// ChatAnotherOwnerWaits).
func (r *Runner) runChat(ctx, hard context.Context, turn *store.Turn) (yielded bool) {
	r.claimed.Add(1)
	defer r.claimed.Add(-1)
	chatID, claimID := turn.Chat.ID, turn.Chat.WorkerID.UUID
	log := r.log.With(slog.String("worker_id", claimID.String()), slog.String("chat_id", chatID.String()))
	chatCtx, cancel := context.WithCancelCause(hard)
	defer cancel(nil)
	sub := r.hub.Subscribe(chatID)
	defer sub.Close()
	defer r.releaseIfStopping(ctx, chatID, claimID, log)
	defer r.leases.hold(chatID, claimID, cancel, log)()

	t := &turnRunner{deps: deps{store: r.store, models: r.models, opts: &r.opts, m: &r.m, log: log, worker: claimID}, sub: sub,
		busy: r.slots.Contended}
	if turn.Chat.Status == client.StatusRunning {
		t.counted = counted{ok: true, history: turn.Chat.HistoryVersion, attempt: turn.Chat.GenerationAttempt}
	}
	spans := &turnSpan{worker: claimID, base: log}
	defer spans.end()
	misses := 0
	for read := true; ; read = false {
		if stopped(ctx, chatCtx, log) {
			return false // draining (released above, for another replica), the lease is lost, or the chat deleted
		}
		if !read {
			// Decide again from what is committed now.
			loaded, ok := r.reload(ctx, chatCtx, chatID, log)
			if !ok {
				return false
			}
			if loaded == nil {
				continue
			}
			turn = loaded
		}
		t.yield = false
		done, err := t.pass(spans.enter(chatCtx, turn, t), turn)
		if !errors.Is(err, store.ErrFenceMiss) {
			misses = 0
		}
		switch {
		case errors.Is(err, store.ErrFenceMiss):
			// Something moved under us: decide again from what is committed.
			// Misses in a row without any progress mean a bug; do not spin.
			if misses++; misses > 3 {
				log.Warn("repeated fence misses", slog.Int("misses", misses))
				if !sleep(chatCtx, r.opts.RetryBase*time.Duration(min(misses, 100))) {
					return
				}
			}
		case err != nil:
			if chatCtx.Err() != nil {
				return
			}
			log.Error("chat pass failed", slog.String("error", err.Error()))
			if !sleep(chatCtx, r.opts.RetryBase) {
				return
			}
		case done:
			return
		case t.yield:
			// Another user's chat waits for a worker: hand this one back
			// (it stays runnable, and wakes a worker like any other).
			if err := r.store.Release(context.WithoutCancel(chatCtx), chatID, claimID); err != nil {
				log.Warn("release failed", slog.String("error", err.Error()))
			}
			r.m.yields.WithLabelValues().Inc()
			return true
		}
	}
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// backoff returns the delay before attempt n (1-based), at least floor.
func (o *Options) backoff(n int32, floor time.Duration) time.Duration {
	d := o.RetryBase << min(n-1, 16)
	if d > o.RetryMax {
		d = o.RetryMax
	}
	d += time.Duration(rand.Int64N(int64(d)/4 + 1))
	return max(d, floor)
}
