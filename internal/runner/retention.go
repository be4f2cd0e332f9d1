package runner

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/prom"
)

// DefaultRetentionBatch is how many chats (each with its descendants) one
// transaction of the retention sweep deletes at most.
const DefaultRetentionBatch = 500

// The sweep sizes its batches so that each transaction (which holds its
// chats' row locks and takes its share of the database) lasts about
// retentionTarget: from retentionFirst chats, halved after a batch that
// took longer than the target, doubled after one that took less than
// half, between retentionMin and Options.RetentionBatch.
const (
	retentionTarget = 50 * time.Millisecond
	retentionFirst  = 50
	retentionMin    = 5
)

// retentionMetrics are the sweep's instruments.
type retentionMetrics struct {
	deleted *prometheus.CounterVec
	oldest  prometheus.Gauge
	batch   prometheus.Observer
}

func (r *Runner) instrumentRetention(reg *prometheus.Registry) {
	r.rm.deleted = prom.Counter(reg, "chatd_retention_deleted_total",
		"Rows the retention sweep of this process deleted, by kind: chats (--retain-chats; descendants included), "+
			"messages (theirs), tombstones (chat tombstones older than --retain-tombstones).", "kind")
	r.rm.oldest = prom.Gauge(reg, "chatd_retention_oldest_chat_age_seconds",
		"How long ago the least recently changed chat at rest (waiting or error, without a parent) last changed, "+
			"after this process's latest sweep (--retain-chats on): above the retention period, another replica "+
			"sweeps, or the sweep is behind.").WithLabelValues()
	r.rm.batch = prom.Histogram(reg, "chatd_retention_batch_duration_seconds",
		"Transactions of the retention sweep, from BEGIN to COMMIT: how long a batch holds its chats' row locks.",
		prom.LatencyBuckets).WithLabelValues()
}

// retain runs the retention sweep until ctx ends: about once per idle poll
// it deletes the chats at rest for longer than RetainChats, a batch per
// transaction sized to last about retentionTarget, resting as long as each
// batch took before the next (the sweep takes at most half of its
// connection's time), and then the tombstones older than RetainTombstones. One replica sweeps at a time
// (store.ExpireChats); the others skip their round.
func (r *Runner) retain(ctx context.Context) {
	for {
		jitter := time.Duration(rand.Int64N(int64(r.opts.Poll)/4 + 1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.opts.Poll + jitter):
		}
		// Not cancelled mid-flight: shutdown waits for the batch in flight.
		sctx := context.WithoutCancel(ctx)
		if r.opts.RetainChats > 0 {
			r.expire(ctx, sctx)
		}
		if r.opts.RetainTombstones > 0 {
			r.sweepTombstones(ctx, sctx)
		}
	}
}

// expire deletes expired chats until none is left or ctx ends.
func (r *Runner) expire(ctx, sctx context.Context) {
	batch := min(retentionFirst, r.opts.RetentionBatch)
	for ctx.Err() == nil {
		start := time.Now()
		e, err := r.store.ExpireChats(sctx, r.opts.RetainChats, batch)
		took := time.Since(start)
		if err != nil {
			r.log.Warn("retention sweep failed", slog.String("error", err.Error()))
			return
		}
		r.rm.batch.Observe(took.Seconds())
		if len(e.Chats) > 0 {
			r.rm.deleted.WithLabelValues("chats").Add(float64(len(e.Chats)))
			r.rm.deleted.WithLabelValues("messages").Add(float64(e.Messages))
			r.log.Debug("expired chats", slog.Int("chats", len(e.Chats)), slog.Int64("messages", e.Messages),
				slog.Duration("took", took))
		}
		if e.Found < batch {
			break
		}
		switch {
		case took > retentionTarget:
			batch = max(batch/2, retentionMin)
		case took < retentionTarget/2:
			batch = min(batch*2, r.opts.RetentionBatch)
		}
		select {
		case <-ctx.Done():
		case <-time.After(took):
		}
	}
	if age, err := r.store.OldestChatAge(sctx); err == nil {
		r.rm.oldest.Set(age.Seconds())
	}
}

// sweepTombstones deletes old tombstones, 1,000 at a time.
func (r *Runner) sweepTombstones(ctx, sctx context.Context) {
	for ctx.Err() == nil {
		n, skipped, err := r.store.SweepTombstones(sctx, r.opts.RetainTombstones, 1000)
		if err != nil {
			r.log.Warn("tombstone sweep failed", slog.String("error", err.Error()))
			return
		}
		r.rm.deleted.WithLabelValues("tombstones").Add(float64(n))
		if skipped || n < 1000 {
			return
		}
	}
}
