package store

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/dbgen"
)

// runnableRecount is how long an owner's count of runnable chats lets
// this process's admissions of that owner skip the check.
const runnableRecount = time.Second

// runnableCounts remember, per owner, what the last limit check of this
// process counted, so that the admissions of an owner far below the limit
// skip it: the check counts the owner's runnable chats over an index in
// which every turn's end leaves an entry for the vacuum, once per
// admission. An owner is checked again after runnableRecount, or once the
// count and the admissions since could reach half the limit. The limit
// stays what it was, a bound on work, not an exact quota (concurrent
// admissions already pass it by those in flight): past half of it, every
// admission is checked.
type runnableCounts struct {
	mu sync.Mutex
	m  map[uuid.UUID]runnableCount
}

type runnableCount struct {
	n, since int // counted, admitted since without a check
	at       time.Time
}

// skip reports whether an admission of owner under max may go unchecked,
// and counts it if so.
func (rc *runnableCounts) skip(owner uuid.UUID, max int, now time.Time) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	c, ok := rc.m[owner]
	if !ok || now.Sub(c.at) >= runnableRecount || 2*(c.n+c.since+1) > max {
		return false
	}
	c.since++
	rc.m[owner] = c
	return true
}

// counted records a check's count (n < 0: the check failed).
func (rc *runnableCounts) counted(owner uuid.UUID, n int, now time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.m == nil {
		rc.m = map[uuid.UUID]runnableCount{}
	}
	if n < 0 {
		delete(rc.m, owner)
		return
	}
	if len(rc.m) >= 4096 { // forget the owners not counted lately
		for o, c := range rc.m {
			if now.Sub(c.at) >= runnableRecount {
				delete(rc.m, o)
			}
		}
	}
	rc.m[owner] = runnableCount{n: n, at: now}
}

// queueRunnableWithin queues the check that an admission which made a chat
// runnable leaves its owner within max runnable chats (none when max is 0,
// or when this process counted the owner far below it just now): after
// the writes, in the same batch, so it counts them.
func (s *Store) queueRunnableWithin(ctx context.Context, pl *pipeline, owner uuid.UUID, max int) {
	if max <= 0 || s.runnable.skip(owner, max, time.Now()) {
		return
	}
	pipeOne(pl, func(db dbgen.DBTX) (int32, error) {
		return s.q.ChatRunnableCountWithin(ctx, db, dbgen.ChatRunnableCountWithinParams{OwnerID: owner, Max: int32(max)})
	}, func(n int32, err error) error {
		if err != nil {
			n = -1
		}
		s.runnable.counted(owner, int(n), time.Now())
		return err
	})
}
