package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbgen"
)

// Committed reports what a commit wrote.
type Committed struct {
	Chat     Chat
	Messages []Message // in insertion order, receipts and promoted input included
	Request  *Request
	Promoted bool
	// Yield: the worker should hand the chat back and claim again (Fair).
	Yield bool
}

// Apply runs c in one transaction: lock behind the fence (ErrFenceMiss if it
// fails), insert the messages, record progress, write receipts and finish
// their requests, then end the turn (promoting the queue head). Its
// statements go out in as few round trips as their dependencies allow: the
// plain finalizer commit is BEGIN, the lock, the fence, the messages, the
// progress, the receipt, the finish and the end of the turn, then COMMIT.
func (s *Store) Apply(ctx context.Context, c Commit) (Committed, error) {
	return s.apply(ctx, c, batched)
}

// apply plans c and runs the plan with exec.
func (s *Store) apply(ctx context.Context, c Commit, exec executor) (Committed, error) {
	a := newApplying(ctx, s, c)
	p := a.plan()
	// The first batch goes with BEGIN (lazyTx); the fence's answer, read
	// before anything sent with it, decides whether anything commits.
	err := s.txFrom(ctx, "worker_commit", func(*pipeline) {}, func(tx pgx.Tx) error { return exec(ctx, tx, p) })
	if err != nil {
		return Committed{}, err
	}
	a.out.Chat = chatFrom(a.chat)
	s.finishedCommitted(a.done)
	if s.tell != nil {
		s.tell.TellChanged(a.out.Chat.ID, a.out.Chat.OwnerID, a.out.Chat.SnapshotVersion)
	}
	return a.out, nil
}

// applying is one commit being applied: what its statements read, for
// those built from it, and the answer.
type applying struct {
	s   *Store
	ctx context.Context
	c   Commit
	out Committed
	// locked is the chat as the fence found it; chat, as the commit
	// leaves it.
	locked, chat dbgen.Chat
	// queued: the end of the turn found input queued; head is the queue
	// head it promotes.
	queued   bool
	head     *dbgen.ChatQueuedMessage
	finishes []*finishing // one per outcome
	done     []finished
}

func newApplying(ctx context.Context, s *Store, c Commit) *applying {
	a := &applying{s: s, ctx: ctx, c: c}
	for i, o := range c.outcomes {
		f := &finishing{s: s, ctx: ctx, chatID: c.Fence.ChatID, o: o, done: &a.done, got: a.gotFinish}
		if i == 0 && a.receiptSums() {
			f.summed, f.o.Usage = true, nil // the receipt's INSERT sums it
		}
		a.finishes = append(a.finishes, f)
	}
	return a
}

// plan is the commit's statements, in order.
func (a *applying) plan() *plan {
	var p plan
	fence := a.lock(&p)
	a.compact(&p)
	p.add(noNeed, a.insertMessages)
	a.spawn(&p)
	a.finishRequests(&p, a.recordProgress(&p))
	end := a.endTurn(&p, a.askFair(&p))
	a.promote(&p, end)
	a.handOver(&p, fence)
	return &p
}

// lock locks a spawned child's awaiting parent, then the chat, then checks
// the fence; it returns the fence's statement.
func (a *applying) lock(p *plan) int {
	s, ctx, c := a.s, a.ctx, a.c
	if c.spawnParent.Valid && c.ending() {
		p.add(noNeed, func(pl *pipeline) error {
			pipeOne(pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatLockByID(ctx, db, c.spawnParent.UUID) },
				func(_ dbgen.Chat, err error) error {
					if errors.Is(err, pgx.ErrNoRows) {
						return nil
					}
					return err
				})
			return nil
		})
	}
	// The chat's lock first, whatever the fence says: the writes sent with
	// the fence run before its answer is judged, and take their locks as
	// every commit does, the chat first.
	p.add(noNeed, func(pl *pipeline) error {
		pipeOne(pl, func(db dbgen.DBTX) (uuid.UUID, error) { return s.q.ChatLock(ctx, db, c.Fence.ChatID) },
			func(_ uuid.UUID, err error) error {
				if errors.Is(err, pgx.ErrNoRows) {
					return ErrFenceMiss // the chat is gone
				}
				return err
			})
		return nil
	})
	f := dbgen.ChatLockIfOwnedParams{
		ID: c.Fence.ChatID, WorkerID: uuid.NullUUID{UUID: c.Fence.WorkerID, Valid: true},
		HistoryVersion: c.Fence.HistoryVersion, Statuses: c.Fence.statuses(), GenerationAttempt: c.Fence.Attempt,
	}
	return p.add(noNeed, func(pl *pipeline) error {
		pipeOne(pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatLockIfOwned(ctx, db, f) },
			func(row dbgen.Chat, err error) error {
				if errors.Is(err, pgx.ErrNoRows) {
					return ErrFenceMiss
				}
				a.locked = row
				return err
			})
		return nil
	})
}

// statuses are the chat statuses f accepts.
func (f Fence) statuses() []string {
	if len(f.Statuses) == 0 {
		return []string{string(client.StatusRunning)}
	}
	out := make([]string, 0, len(f.Statuses))
	for _, st := range f.Statuses {
		out = append(out, string(st))
	}
	return out
}

// compact marks history before the commit's boundary compressed, and
// consumes a manual compaction request.
func (a *applying) compact(p *plan) {
	s, ctx, chatID := a.s, a.ctx, a.c.Fence.ChatID
	pass := func(err error) error { return err }
	if before := a.c.compressBefore; before > 0 {
		p.add(noNeed, func(pl *pipeline) error {
			pipeExec(pl, func(db dbgen.DBTX) error {
				_, err := s.q.MessageCompressBefore(ctx, db, dbgen.MessageCompressBeforeParams{ChatID: chatID, BeforeID: before})
				return err
			}, pass)
			return nil
		})
	}
	if a.c.clearCompaction {
		p.add(noNeed, func(pl *pipeline) error {
			pipeExec(pl, func(db dbgen.DBTX) error { return s.q.ChatClearCompactionRequest(ctx, db, chatID) }, pass)
			return nil
		})
	}
}

// insertMessages inserts the commit's messages, in one statement.
func (a *applying) insertMessages(pl *pipeline) error {
	return a.s.queueMessages(a.ctx, pl, a.c.Fence.ChatID, a.c.Messages, func(rows []Message) { a.out.Messages = rows })
}

// spawn creates the spawned children, each with its first message.
func (a *applying) spawn(p *plan) {
	for _, sp := range a.c.spawns {
		p.addRun(func(tx pgx.Tx) error { return a.s.insertSpawn(a.ctx, tx, a.c.Fence.ChatID, sp) })
	}
}

// recordProgress updates the governing request and returns its statement.
// When the first outcome finishes the same request and its receipt does
// not sum the usage itself, the progress returns the row with its usage
// sum, and the receipt is made from that.
func (a *applying) recordProgress(p *plan) int {
	pr := a.c.Progress
	if pr == nil {
		return noNeed
	}
	returns := a.progressFinishes() && !a.receiptSums()
	return p.add(noNeed, func(pl *pipeline) error {
		var attempts []byte
		if pr.Attempt != nil {
			var err error
			if attempts, err = json.Marshal([]client.Attempt{*pr.Attempt}); err != nil {
				return err
			}
		}
		params := dbgen.RequestRecordProgressIfPendingParams{
			RequestID: pr.RequestID, AddSteps: pr.Steps, AddRejections: pr.Rejections, AddAttempts: attempts,
			AddValidationRejections: pr.ValidationRejections, SetCandidate: pr.SetCandidate,
			Candidate: pr.Candidate, CandidateToolCallID: nullString(pr.CandidateCallID), SumUsage: returns,
		}
		pipeOne(pl, func(db dbgen.DBTX) (dbgen.RequestRecordProgressIfPendingRow, error) {
			return a.s.q.RequestRecordProgressIfPending(a.ctx, db, params)
		}, func(r dbgen.RequestRecordProgressIfPendingRow, err error) error {
			if err != nil {
				return fmt.Errorf("record progress of request %s: %w", pr.RequestID, err)
			}
			req := requestFrom(r.StructuredRequest)
			a.out.Request = &req
			if returns {
				f := a.finishes[0]
				f.row, f.o.Usage = r.StructuredRequest, r.Usage
			}
			return nil
		})
		return nil
	})
}

// progressFinishes reports whether the first outcome finishes the request
// the progress updates: its receipt needs no read of its own.
func (a *applying) progressFinishes() bool {
	pr, outcomes := a.c.Progress, a.c.outcomes
	return pr != nil && len(outcomes) > 0 && outcomes[0].RequestID == pr.RequestID
}

// receiptSums reports whether the first receipt needs nothing of the
// progressed row but the usage sum, which it sums itself: it goes in the
// progress's batch. A failed one copies the row's attempts.
func (a *applying) receiptSums() bool {
	return a.progressFinishes() && a.c.outcomes[0].Status != client.OutputFailed
}

// finishRequests writes each outcome's receipt and finishes its request,
// from the row the progress returned or, else, from the row as read after
// what this transaction wrote so far.
func (a *applying) finishRequests(p *plan, progress int) {
	for i, f := range a.finishes {
		needs := progress
		switch {
		case f.summed:
			needs = noNeed
		case i > 0 || !a.progressFinishes():
			needs = f.planRead(p)
		}
		f.planWrite(p, needs)
	}
}

// gotFinish keeps a finished request's receipt and ledger row.
func (a *applying) gotFinish(m *Message, r dbgen.StructuredRequest) {
	if m != nil {
		a.out.Messages = append(a.out.Messages, *m)
	}
	req := requestFrom(r)
	a.out.Request = &req
}

// askFair asks, for a fair commit that keeps the turn going, whether
// another owner's chat waits (Commit.Fair); it returns its statement.
func (a *applying) askFair(p *plan) int {
	if !a.c.fair || a.c.end != EndNone {
		return noNeed
	}
	return p.add(noNeed, func(pl *pipeline) error {
		pipeOne(pl, func(db dbgen.DBTX) (bool, error) { return a.s.q.ChatAnotherOwnerWaits(a.ctx, db, a.c.Fence.ChatID) },
			func(yield bool, err error) error {
				a.out.Yield = yield
				return err
			})
		return nil
	})
}

// endTurn applies the commit's end to the chat row, after the fairness
// question (fair) when it was asked: a yielding commit leaves the attempt
// uncounted. Most turns end with an empty queue: one statement then; one
// that finds input queued is ended by promote.
func (a *applying) endTurn(p *plan, fair int) int {
	s, ctx, c := a.s, a.ctx, a.c
	keep := func(row dbgen.Chat, err error) error {
		a.chat = row
		return err
	}
	return p.add(fair, func(pl *pipeline) error {
		switch c.end {
		case EndNone:
			if c.countAttempt && !a.out.Yield {
				pipeOne(pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatCountAttempt(ctx, db, c.Fence.ChatID) }, keep)
			} else {
				pipeOne(pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatGet(ctx, db, c.Fence.ChatID) }, keep)
			}
		case EndRequiresAction:
			pa := dbgen.ChatSetStateParams{ID: c.Fence.ChatID, Status: client.StatusRequiresAction, ActionTimeoutSeconds: c.actionWait().Seconds()}
			pipeOne(pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatSetState(ctx, db, pa) }, keep)
		default:
			pe := dbgen.ChatEndTurnIfQueueEmptyParams{ID: c.Fence.ChatID, Status: client.StatusWaiting}
			if c.end == EndError {
				pe.Status, pe.LastError = client.StatusError, c.lastError
			}
			pipeOne(pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatEndTurnIfQueueEmpty(ctx, db, pe) },
				func(row dbgen.Chat, err error) error {
					if errors.Is(err, pgx.ErrNoRows) {
						a.queued = true
						return nil
					}
					return keep(row, err)
				})
		}
		return nil
	})
}

// actionWait is how long a commit that awaits tools gives client results:
// no deadline when only children answer.
func (c Commit) actionWait() time.Duration {
	switch {
	case c.onlyChildren:
		return 0
	case c.actionTimeout <= 0:
		return 10 * time.Minute
	}
	return c.actionTimeout
}

// promote, when the end of the turn found input queued, moves the queue
// head into history as the next user message and sets the chat's state:
// running on with the promoted message, or as the end says.
func (a *applying) promote(p *plan, end int) {
	if !a.c.ending() {
		return
	}
	pop := p.add(end, a.popHead)
	p.add(pop, a.insertPromoted)
	p.add(pop, a.setPromotedState)
}

func (a *applying) popHead(pl *pipeline) error {
	if !a.queued {
		return nil
	}
	pipeOne(pl, func(db dbgen.DBTX) (dbgen.ChatQueuedMessage, error) {
		return a.s.q.QueuePopHead(a.ctx, db, a.c.Fence.ChatID)
	},
		func(head dbgen.ChatQueuedMessage, err error) error {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			a.head = &head
			return err
		})
	return nil
}

func (a *applying) insertPromoted(pl *pipeline) error {
	if a.head == nil {
		return nil
	}
	p := userMessage(a.c.Fence.ChatID, a.head.Content, a.head.StructuredRequestID)
	pipeOne(pl, func(db dbgen.DBTX) (dbgen.ChatMessage, error) { return a.s.q.MessageInsert(a.ctx, db, p) },
		func(row dbgen.ChatMessage, err error) error {
			if err == nil {
				a.out.Messages = append(a.out.Messages, messageFrom(row))
				a.out.Promoted = true
			}
			return err
		})
	return nil
}

func (a *applying) setPromotedState(pl *pipeline) error {
	if !a.queued {
		return nil
	}
	p := dbgen.ChatSetStateParams{ID: a.c.Fence.ChatID, Status: client.StatusWaiting}
	switch {
	case a.head != nil:
		// The next turn starts at once; the worker keeps the chat.
		p.Status, p.KeepOwner = client.StatusRunning, true
	case a.c.end == EndError:
		p.Status, p.LastError = client.StatusError, a.c.lastError
	}
	pipeOne(pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return a.s.q.ChatSetState(a.ctx, db, p) },
		func(row dbgen.Chat, err error) error {
			a.chat = row
			return err
		})
	return nil
}

// handOver settles what an ended turn leaves behind: children it still
// awaits are interrupted (when the fence found the chat spawning), and a
// spawned child's outcome goes to its parent.
func (a *applying) handOver(p *plan, fence int) {
	if !a.c.ending() {
		return
	}
	p.add(fence, func(pl *pipeline) error {
		if !a.locked.SpawnAgents {
			return nil
		}
		pipeMany(pl, func(db dbgen.DBTX) ([]uuid.UUID, error) {
			return a.s.q.ChatDetachChildren(a.ctx, db, uuid.NullUUID{UUID: a.c.Fence.ChatID, Valid: true})
		}, func(_ []uuid.UUID, err error) error { return err })
		return nil
	})
	p.addRun(func(tx pgx.Tx) error {
		chat, err := a.s.deliver(a.ctx, tx, a.chat)
		a.chat = chat
		return err
	})
}
