package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbgen"
	"github.com/chatd/chatd/internal/jsonb"
)

// ClaimParams say what a worker claims.
type ClaimParams struct {
	// Worker is the claim's owner id (a fresh one per claim).
	Worker uuid.UUID
	// Chat is the chat a wake-up named; uuid.Nil claims the next runnable
	// chat, the owner with the fewest chats running first.
	Chat  uuid.UUID
	Lease time.Duration
	// CountAttempt counts a running chat's next provider attempt in the
	// claim (the worker calls the provider next, unless it finds tools to
	// run or a turn to finish).
	CountAttempt bool
	// OwnerBelow, when positive, claims only a chat whose owner has fewer
	// chats running (on every replica) than that.
	OwnerBelow int32
}

// Claim is what a claim got.
type Claim struct {
	// Turn is the claimed chat as the worker decides from; Turn.Chat.ID is
	// uuid.Nil when nothing was claimed.
	Turn Turn
	// Skipped: nothing was claimed, but a runnable chat without an owner
	// exists; another transaction held its row (ask again shortly).
	Skipped bool
	// Waited is how long the claimed chat had waited since its last
	// visible change (it became runnable), on the database clock.
	Waited time.Duration
}

// Claim takes ownership of the next runnable chat without a live owner, or
// returns ErrNotFound when there is none (ClaimTurn without a chat id).
func (s *Store) Claim(ctx context.Context, worker uuid.UUID, lease time.Duration) (Chat, error) {
	c, err := s.ClaimTurn(ctx, ClaimParams{Worker: worker, Lease: lease})
	if err == nil && c.Turn.Chat.ID == uuid.Nil {
		err = ErrNotFound
	}
	return c.Turn.Chat, err
}

// ClaimTurn takes ownership of a runnable chat without a live owner and
// reads what its worker decides from — the prompt and the governing
// request — in one transaction, after the chat's row lock. The commit is asynchronous
// (synchronous_commit off): if the database crashed before flushing it, the
// claim is lost and the chat is claimed again, and the worker's later
// commits, which are durable and flush it too, would fail their fence.
func (s *Store) ClaimTurn(ctx context.Context, p ClaimParams) (Claim, error) {
	var out Claim
	opts := pgx.TxOptions{BeginQuery: "begin; set local synchronous_commit = off"}
	purpose := "claim" // a wake-up's, naming the chat
	if p.Chat == uuid.Nil {
		purpose = "claim_next" // the idle poll's, a chain's, a reconnect's
	}
	err := pgx.BeginTxFunc(withPurpose(ctx, purpose), s.pool, opts, func(tx pgx.Tx) error {
		out = Claim{}
		worker, lease := uuid.NullUUID{UUID: p.Worker, Valid: true}, p.Lease.Seconds()
		var c dbgen.Chat
		var err error
		if p.Chat != uuid.Nil {
			if err := s.q.ChatClaimLock(ctx, tx, p.Chat); err != nil {
				return err
			}
			c, err = s.q.ChatClaimByID(ctx, tx, dbgen.ChatClaimByIDParams{ID: p.Chat, WorkerID: worker,
				LeaseSeconds: lease, CountAttempt: p.CountAttempt, OwnerBelow: p.OwnerBelow})
		} else {
			c, err = s.q.ChatClaimNext(ctx, tx, dbgen.ChatClaimNextParams{WorkerID: worker,
				LeaseSeconds: lease, CountAttempt: p.CountAttempt, OwnerBelow: p.OwnerBelow})
		}
		if errors.Is(err, pgx.ErrNoRows) {
			if p.Chat != uuid.Nil {
				return errNotClaimed // taken (by another replica's worker, say), or no longer runnable
			}
			out.Skipped, err = s.q.ChatRunnableExists(ctx, tx)
			return err
		}
		if err != nil {
			return err
		}
		out.Turn.Chat = chatFrom(c)
		if c.LeaseExpiresAt != nil {
			// The claim set the lease from now(); a claim is not a
			// visible change, so updated_at is when it became runnable.
			out.Waited = max(0, c.LeaseExpiresAt.Add(-p.Lease).Sub(c.UpdatedAt))
		}
		return s.readTurn(ctx, tx, &out.Turn)
	})
	if errors.Is(err, errNotClaimed) {
		err = nil
	}
	return out, mapError(err)
}

// errNotClaimed ends the transaction of a named claim that found the chat
// taken: it wrote nothing and is rolled back; not an error for the caller.
var errNotClaimed = errors.New("nothing claimed")

// RenewLease extends the worker's lease; ErrFenceMiss if it lost the chat.
func (s *Store) RenewLease(ctx context.Context, chatID, worker uuid.UUID, lease time.Duration) error {
	_, err := s.q.ChatRenewLeaseIfOwned(ctx, s.pool, dbgen.ChatRenewLeaseIfOwnedParams{
		ID: chatID, WorkerID: uuid.NullUUID{UUID: worker, Valid: true}, LeaseSeconds: lease.Seconds(),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrFenceMiss
	}
	return err
}

// Release gives a chat back (the worker is stopping).
func (s *Store) Release(ctx context.Context, chatID, worker uuid.UUID) error {
	_, err := s.q.ChatReleaseIfOwned(ctx, s.pool, dbgen.ChatReleaseIfOwnedParams{
		ID: chatID, WorkerID: uuid.NullUUID{UUID: worker, Valid: true},
	})
	return err
}

// Turn is what a worker reads to decide its next action.
type Turn struct {
	Chat Chat
	// Prompt is the model-visible history, in order.
	Prompt []Message
	// Request governs the turn when the latest real user request asked for
	// structured output and is still pending.
	Request *Request
}

// LoadTurn reads the chat, its prompt history and its governing request in
// one snapshot.
func (s *Store) LoadTurn(ctx context.Context, chatID uuid.UUID) (Turn, error) {
	var t Turn
	err := pgx.BeginTxFunc(withPurpose(ctx, "worker_read"), s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		c, err := s.q.ChatGet(ctx, tx, chatID)
		if err != nil {
			return err
		}
		t.Chat = chatFrom(c)
		return s.readTurn(ctx, tx, &t)
	})
	return t, mapError(err)
}

// readTurn reads t.Chat's prompt and governing request, in one round trip.
func (s *Store) readTurn(ctx context.Context, tx pgx.Tx, t *Turn) error {
	var pl pipeline
	s.queueTurnRead(ctx, &pl, t)
	return pl.send(ctx, tx)
}

// queueTurnRead queues the reads of t.Chat's prompt and governing request,
// which fill t when pl is sent.
func (s *Store) queueTurnRead(ctx context.Context, pl *pipeline, t *Turn) {
	pipeMany(pl, func(db dbgen.DBTX) ([]dbgen.ChatMessage, error) { return s.q.MessageListForPrompt(ctx, db, t.Chat.ID) },
		func(rows []dbgen.ChatMessage, err error) error {
			t.Prompt = mapRows(rows, messageFrom)
			return err
		})
	pipeMany(pl, func(db dbgen.DBTX) ([]dbgen.StructuredRequest, error) {
		return s.q.RequestGoverning(ctx, db, t.Chat.ID)
	},
		func(rows []dbgen.StructuredRequest, err error) error {
			if len(rows) > 0 {
				req := requestFrom(rows[0])
				t.Request = &req
			}
			return err
		})
}

// Fence is a worker's guard: the chat it owns, at the history it read.
type Fence struct {
	ChatID         uuid.UUID
	WorkerID       uuid.UUID
	HistoryVersion int64
	// Statuses the commit accepts (default: running).
	Statuses []client.ChatStatus
	// Attempt, when set, must still be the chat's generation_attempt: the
	// commit ends a generation made under that attempt.
	Attempt *int32
}

// RecordAttempt counts a provider attempt before making it.
func (s *Store) RecordAttempt(ctx context.Context, f Fence) (int32, error) {
	row, err := s.q.ChatRecordAttemptIfOwned(ctx, s.pool, dbgen.ChatRecordAttemptIfOwnedParams{
		ID: f.ChatID, WorkerID: uuid.NullUUID{UUID: f.WorkerID, Valid: true}, HistoryVersion: f.HistoryVersion,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrFenceMiss
	}
	return row.GenerationAttempt, err
}

// SetProviderRetry records, behind f, the provider retry the worker waits
// out (a client.ProviderRetry as JSON). ErrFenceMiss: the chat moved.
func (s *Store) SetProviderRetry(ctx context.Context, f Fence, retry json.RawMessage) error {
	n, err := s.q.ChatSetProviderRetryIfOwned(ctx, s.pool, dbgen.ChatSetProviderRetryIfOwnedParams{
		ID: f.ChatID, WorkerID: uuid.NullUUID{UUID: f.WorkerID, Valid: true}, HistoryVersion: f.HistoryVersion, ProviderRetry: retry,
	})
	if err == nil && n == 0 {
		return ErrFenceMiss
	}
	return err
}

// StartMCPCall journals an MCP call of the step messageID before it is
// sent, behind f, and returns how many times it has been sent, this time
// included: above 1, an earlier send's result was never committed (its
// worker died or stopped). ErrFenceMiss: the chat moved.
func (s *Store) StartMCPCall(ctx context.Context, f Fence, messageID int64, toolCallID, server, tool string) (int32, error) {
	n, err := s.q.MCPCallStartIfOwned(ctx, s.pool, dbgen.MCPCallStartIfOwnedParams{
		MessageID: messageID, ToolCallID: toolCallID, Server: server, Tool: tool,
		ChatID: f.ChatID, WorkerID: uuid.NullUUID{UUID: f.WorkerID, Valid: true}, HistoryVersion: f.HistoryVersion,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrFenceMiss
	}
	return n, err
}

// NewMessage is a row to insert.
type NewMessage struct {
	Role         client.Role
	Kind         MessageKind // default message
	Visibility   Visibility  // default both
	Parts        []jsonb.Part
	RequestID    uuid.NullUUID
	FinishReason string
	Usage        json.RawMessage
}

// Progress updates the governing request with the evidence committed beside it.
type Progress struct {
	RequestID            uuid.UUID
	Steps                int32
	Rejections           int32
	ValidationRejections int32
	// Attempt, with a rejection, says why it was rejected: appended to the
	// request's attempts.
	Attempt *client.Attempt
	// SetCandidate replaces the candidate with Candidate (nil clears it).
	SetCandidate    bool
	Candidate       json.RawMessage
	CandidateCallID string
}

// Outcome finishes a pending request: a receipt row plus the ledger update.
type Outcome struct {
	RequestID uuid.UUID
	Status    client.RequestStatus // succeeded, failed, cancelled
	Value     json.RawMessage
	Code      client.ErrorCode
	Message   string
	// Usage is the request's token sum (client.Usage's shape); the commit
	// that writes the receipt fills it in.
	Usage json.RawMessage
	// Attempts is the ledger's list of rejected attempts, copied into a
	// failed receipt (finishRequest sets it).
	Attempts json.RawMessage
}

// End says how a commit leaves the chat.
type End int

const (
	// EndNone keeps the turn going.
	EndNone End = iota
	// EndTurn finishes the turn: promote the queue head or go idle.
	EndTurn
	// EndError finishes the turn with an error: promote the queue head, or
	// stay in the error status with LastError.
	EndError
	// EndRequiresAction waits for client tool results.
	EndRequiresAction
)

// Commit is one fenced worker transaction.
type Commit struct {
	Fence Fence
	// CompressBefore, when set, marks model-visible history before that
	// message id (and earlier summaries) compressed: compaction.
	CompressBefore int64
	// ClearCompaction consumes a manual compaction request.
	ClearCompaction bool
	Messages        []NewMessage
	Progress        *Progress
	Outcomes        []Outcome
	End             End
	LastError       json.RawMessage
	// ActionTimeout is how long EndRequiresAction waits for client results.
	ActionTimeout time.Duration
	// CountAttempt, with EndNone, counts the turn's next provider attempt
	// in this transaction: the worker calls the provider next.
	CountAttempt bool
	// Fair, with EndNone, asks whether another user's chat waits for a
	// worker while this chat's owner has more turns running
	// (Committed.Yield). A yielding commit leaves the attempt uncounted:
	// the next claim counts it.
	Fair bool
	// Spawns are child chats created for calls of the step being answered
	// (spawn_agent); with EndRequiresAction the chat waits for them.
	Spawns []Spawn
	// OnlyChildren, with EndRequiresAction: no client tool call waits, so
	// there is no deadline (the children's ending commits resume the chat).
	OnlyChildren bool
	// SpawnParent, on a commit that ends a spawned child's turn while its
	// parent awaits it, is that parent: it is locked before the child (the
	// order of every transaction that touches both) and gets the child's
	// outcome in this transaction.
	SpawnParent uuid.NullUUID
}

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
// their requests, then end the turn (promoting the queue head).
func (s *Store) Apply(ctx context.Context, c Commit) (Committed, error) {
	var out Committed
	statuses := []string{string(client.StatusRunning)}
	if len(c.Fence.Statuses) > 0 {
		statuses = statuses[:0]
		for _, st := range c.Fence.Statuses {
			statuses = append(statuses, string(st))
		}
	}
	var done []finished
	ending := c.End == EndTurn || c.End == EndError
	var locked dbgen.Chat
	// The locks go out with BEGIN and the commit's first batch (lazyTx):
	// the fence's answer, judged first, decides whether anything commits.
	lock := func(pl *pipeline) {
		if c.SpawnParent.Valid && ending {
			pipeOne(pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatLockByID(ctx, db, c.SpawnParent.UUID) },
				func(_ dbgen.Chat, err error) error {
					if errors.Is(err, pgx.ErrNoRows) {
						return nil
					}
					return err
				})
		}
		// The chat's lock first, whatever the fence says: the writes sent
		// with the fence (lazyTx) run before its answer is judged, and take
		// their locks as every commit does, the chat first.
		pipeOne(pl, func(db dbgen.DBTX) (uuid.UUID, error) { return s.q.ChatLock(ctx, db, c.Fence.ChatID) },
			func(_ uuid.UUID, err error) error {
				if errors.Is(err, pgx.ErrNoRows) {
					return ErrFenceMiss // the chat is gone
				}
				return err
			})
		p := dbgen.ChatLockIfOwnedParams{
			ID: c.Fence.ChatID, WorkerID: uuid.NullUUID{UUID: c.Fence.WorkerID, Valid: true},
			HistoryVersion: c.Fence.HistoryVersion, Statuses: statuses, GenerationAttempt: c.Fence.Attempt,
		}
		pipeOne(pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatLockIfOwned(ctx, db, p) },
			func(row dbgen.Chat, err error) error {
				if errors.Is(err, pgx.ErrNoRows) {
					return ErrFenceMiss
				}
				locked = row
				return err
			})
	}
	err := s.txFrom(ctx, "worker_commit", lock, func(tx pgx.Tx) error {
		var err error
		if c.CompressBefore > 0 {
			if _, err := s.q.MessageCompressBefore(ctx, tx, dbgen.MessageCompressBeforeParams{ChatID: c.Fence.ChatID, BeforeID: c.CompressBefore}); err != nil {
				return err
			}
		}
		if c.ClearCompaction {
			if err := s.q.ChatClearCompactionRequest(ctx, tx, c.Fence.ChatID); err != nil {
				return err
			}
		}
		// Statements whose results decide nothing that follows go out
		// together (pl), the first batch with BEGIN and the lock (lazyTx):
		// the plain finalizer commit is BEGIN, the lock, the messages, the
		// progress, the receipt, the finish and the end of the turn, then
		// COMMIT — two round trips.
		var pl pipeline
		if err := s.queueMessages(ctx, &pl, c.Fence.ChatID, c.Messages, func(rows []Message) { out.Messages = rows }); err != nil {
			return err
		}
		if len(c.Spawns) > 0 {
			if err := pl.send(ctx, tx); err != nil {
				return err
			}
			pl = pipeline{}
			for _, sp := range c.Spawns {
				if err := s.insertSpawn(ctx, tx, c.Fence.ChatID, sp); err != nil {
					return err
				}
			}
		}
		// read: the ledger row of the progress's request as this
		// transaction left it (locked by the update), with its usage sum,
		// when an outcome of the same request follows: its receipt needs no
		// read of its own then.
		var read *progressed
		if p := c.Progress; p != nil {
			var attempts []byte
			if p.Attempt != nil {
				if attempts, err = json.Marshal([]client.Attempt{*p.Attempt}); err != nil {
					return err
				}
			}
			finishing := len(c.Outcomes) > 0 && c.Outcomes[0].RequestID == p.RequestID
			// A receipt that needs nothing of the progressed row but the
			// usage sum sums it itself: it goes in this batch. A failed
			// one copies the row's attempts, so it waits for the row.
			together := finishing && c.Outcomes[0].Status != client.OutputFailed
			params := dbgen.RequestRecordProgressIfPendingParams{
				RequestID: p.RequestID, AddSteps: p.Steps, AddRejections: p.Rejections, AddAttempts: attempts,
				AddValidationRejections: p.ValidationRejections, SetCandidate: p.SetCandidate,
				Candidate: p.Candidate, CandidateToolCallID: nullString(p.CandidateCallID), SumUsage: finishing && !together,
			}
			pipeOne(&pl, func(db dbgen.DBTX) (dbgen.RequestRecordProgressIfPendingRow, error) {
				return s.q.RequestRecordProgressIfPending(ctx, db, params)
			}, func(r dbgen.RequestRecordProgressIfPendingRow, err error) error {
				if err != nil {
					return fmt.Errorf("record progress of request %s: %w", p.RequestID, err)
				}
				req := requestFrom(r.StructuredRequest)
				out.Request = &req
				if finishing && !together {
					read = &progressed{row: r.StructuredRequest, usage: r.Usage}
				}
				return nil
			})
			switch {
			case together:
				read = &progressed{summed: true}
			case finishing:
				// The receipt is made from the row the progress returns.
				if err := pl.send(ctx, tx); err != nil {
					return err
				}
				pl = pipeline{}
			}
		}
		for _, o := range c.Outcomes {
			if read == nil {
				// The receipt is made from the row as read after what
				// this transaction wrote so far.
				if err := pl.send(ctx, tx); err != nil {
					return err
				}
				pl = pipeline{}
			}
			err := s.queueFinish(ctx, tx, &pl, c.Fence.ChatID, o, read, &done, func(m *Message, r dbgen.StructuredRequest) {
				if m != nil {
					out.Messages = append(out.Messages, *m)
				}
				req := requestFrom(r)
				out.Request = &req
			})
			read = nil // the first outcome changed the row
			if err != nil {
				return err
			}
		}
		ec := c
		if c.Fair && c.End == EndNone {
			if err := pl.send(ctx, tx); err != nil {
				return err
			}
			pl = pipeline{}
			if out.Yield, err = s.q.ChatAnotherOwnerWaits(ctx, tx, c.Fence.ChatID); err != nil {
				return err
			}
			ec.CountAttempt = c.CountAttempt && !out.Yield
		}
		chat, promoted, err := s.end(ctx, tx, &pl, ec)
		if err != nil {
			return err
		}
		if ending {
			// The turn is over: children it still awaits are interrupted,
			// and a spawned child's outcome goes to its parent.
			if locked.SpawnAgents {
				if _, err := s.q.ChatDetachChildren(ctx, tx, uuid.NullUUID{UUID: chat.ID, Valid: true}); err != nil {
					return err
				}
			}
			if chat, err = s.deliver(ctx, tx, chat); err != nil {
				return err
			}
		}
		if promoted != nil {
			out.Messages = append(out.Messages, *promoted)
			out.Promoted = true
		}
		out.Chat = chatFrom(chat)
		return nil
	})
	if err == nil {
		s.finishedCommitted(done)
		if s.tell != nil {
			s.tell.TellChanged(out.Chat.ID, out.Chat.OwnerID, out.Chat.SnapshotVersion)
		}
	}
	return out, err
}

// queueMessages queues the insert of msgs on pl, in one statement with
// ids in their order; got gets the rows in that order.
func (s *Store) queueMessages(ctx context.Context, pl *pipeline, chatID uuid.UUID, msgs []NewMessage, got func([]Message)) error {
	switch len(msgs) {
	case 0:
		return nil
	case 1:
		p, err := messageParams(chatID, msgs[0])
		if err != nil {
			return err
		}
		pipeOne(pl, func(db dbgen.DBTX) (dbgen.ChatMessage, error) { return s.q.MessageInsert(ctx, db, p) },
			func(row dbgen.ChatMessage, err error) error {
				if err == nil {
					got([]Message{messageFrom(row)})
				}
				return err
			})
		return nil
	}
	type row struct {
		Role                client.Role     `json:"role"`
		Kind                string          `json:"kind"`
		Visibility          string          `json:"visibility"`
		Content             json.RawMessage `json:"content"`
		StructuredRequestID *uuid.UUID      `json:"structured_request_id,omitempty"`
		FinishReason        *string         `json:"finish_reason,omitempty"`
		Usage               json.RawMessage `json:"usage,omitempty"`
	}
	in := make([]row, len(msgs))
	for i, m := range msgs {
		p, err := messageParams(chatID, m)
		if err != nil {
			return err
		}
		in[i] = row{Role: p.Role, Kind: p.Kind, Visibility: p.Visibility, Content: p.Content,
			FinishReason: p.FinishReason, Usage: p.Usage}
		if p.StructuredRequestID.Valid {
			in[i].StructuredRequestID = &p.StructuredRequestID.UUID
		}
	}
	rows, err := json.Marshal(in)
	if err != nil {
		return err
	}
	pipeMany(pl, func(db dbgen.DBTX) ([]dbgen.ChatMessage, error) {
		return s.q.MessageInsertRows(ctx, db, dbgen.MessageInsertRowsParams{ChatID: chatID, Rows: rows})
	}, func(inserted []dbgen.ChatMessage, err error) error {
		if err != nil {
			return err
		}
		if len(inserted) != len(msgs) {
			return fmt.Errorf("inserted %d messages of %d", len(inserted), len(msgs))
		}
		// Ids follow the array's order; RETURNING's order is not promised.
		slices.SortFunc(inserted, func(a, b dbgen.ChatMessage) int { return cmp.Compare(a.ID, b.ID) })
		got(mapRows(inserted, messageFrom))
		return nil
	})
	return nil
}

func (s *Store) insertMessage(ctx context.Context, tx pgx.Tx, chatID uuid.UUID, m NewMessage) (Message, error) {
	p, err := messageParams(chatID, m)
	if err != nil {
		return Message{}, err
	}
	row, err := s.q.MessageInsert(ctx, tx, p)
	return messageFrom(row), err
}

// messageParams are MessageInsert's parameters for m.
func messageParams(chatID uuid.UUID, m NewMessage) (dbgen.MessageInsertParams, error) {
	content, err := jsonb.MarshalParts(m.Parts)
	if err != nil {
		return dbgen.MessageInsertParams{}, err
	}
	kind, vis := m.Kind, m.Visibility
	if kind == "" {
		kind = KindMessage
	}
	if vis == "" {
		vis = VisibleBoth
	}
	return dbgen.MessageInsertParams{
		ChatID: chatID, Role: m.Role, Kind: string(kind), Visibility: string(vis), Content: content,
		StructuredRequestID: m.RequestID, FinishReason: nullString(m.FinishReason), Usage: m.Usage,
	}, nil
}

// finishRequest writes a receipt and closes its ledger row, and appends o
// to done (the caller counts done once the transaction committed). A
// request that is already finished (an ambiguous earlier commit, a recovered
// worker) is left alone: the receipt that exists is the one outcome.
func (s *Store) finishRequest(ctx context.Context, tx pgx.Tx, chatID uuid.UUID, o Outcome, done *[]finished) ([]Message, dbgen.StructuredRequest, error) {
	var pl pipeline
	var rows []Message
	var r dbgen.StructuredRequest
	err := s.queueFinish(ctx, tx, &pl, chatID, o, nil, done, func(m *Message, req dbgen.StructuredRequest) {
		if m != nil {
			rows = append(rows, *m)
		}
		r = req
	})
	if err == nil {
		err = pl.send(ctx, tx)
	}
	return rows, r, err
}

// queueFinish is finishRequest with the receipt and the finish queued on
// pl; got gets the receipt (nil when the request was finished already) and
// the ledger row, once pl is sent or at once. read, when set, is the
// request's row as this transaction's progress left it: pending, with its
// usage sum, so nothing is read first.
func (s *Store) queueFinish(ctx context.Context, tx pgx.Tx, pl *pipeline, chatID uuid.UUID, o Outcome, read *progressed, done *[]finished,
	got func(*Message, dbgen.StructuredRequest)) error {
	var r dbgen.StructuredRequest
	var err error
	if read != nil {
		r, o.Usage = read.row, read.usage // the usage is the receipt INSERT's own when summed
	} else {
		if r, err = s.q.RequestGet(ctx, tx, o.RequestID); err != nil {
			return fmt.Errorf("finish request %s: %w", o.RequestID, err)
		}
		if r.Status != client.OutputPending {
			got(nil, r)
			return nil
		}
		// The steps this transaction inserted are counted too: the
		// receipt keeps the request's final sum.
		if o.Usage, err = s.q.RequestUsageSum(ctx, tx, o.RequestID); err != nil {
			return fmt.Errorf("sum the usage of %s: %w", o.RequestID, err)
		}
	}
	if o.Status == client.OutputFailed && len(r.Attempts) > 0 && string(r.Attempts) != "[]" {
		o.Attempts = r.Attempts // read in this transaction: the rejection that failed it included
	}
	p, err := messageParams(chatID, NewMessage{
		Role: client.RoleAssistant, Kind: KindReceipt, Visibility: VisibleUser,
		Parts:     ReceiptParts(o),
		RequestID: uuid.NullUUID{UUID: o.RequestID, Valid: true},
	})
	if err != nil {
		return err
	}
	insert := func(db dbgen.DBTX) (dbgen.ChatMessage, error) { return s.q.MessageInsert(ctx, db, p) }
	if read != nil && read.summed {
		rp := dbgen.MessageInsertReceiptParams{ChatID: p.ChatID, Role: p.Role, Kind: p.Kind, Visibility: p.Visibility,
			Content: p.Content, RequestID: o.RequestID}
		insert = func(db dbgen.DBTX) (dbgen.ChatMessage, error) { return s.q.MessageInsertReceipt(ctx, db, rp) }
	}
	var receipt Message
	pipeOne(pl, insert,
		func(row dbgen.ChatMessage, err error) error {
			if err != nil {
				return fmt.Errorf("insert receipt for %s: %w", o.RequestID, err)
			}
			receipt = messageFrom(row)
			return nil
		})
	i := len(*done)
	*done = append(*done, finished{Outcome: o})
	fp := dbgen.RequestFinishIfPendingParams{RequestID: o.RequestID, Status: o.Status,
		ErrorCode: nullCode(o.Code), ErrorMessage: nullString(textColumn(o.Message)), FinishedBy: s.process()}
	pipeOne(pl, func(db dbgen.DBTX) (dbgen.StructuredRequest, error) { return s.q.RequestFinishIfPending(ctx, db, fp) },
		func(row dbgen.StructuredRequest, err error) error {
			if err != nil {
				return fmt.Errorf("finish request %s: %w", o.RequestID, err)
			}
			got(&receipt, row)
			(*done)[i].state = RequestState{Request: requestFrom(row), Receipt: &receipt}
			return nil
		})
	return nil
}

// finished is a request a commit finished: its outcome (for the metrics)
// and, once the batch ran, its ledger row and receipt as the commit left
// them (for this process's long polls: Teller.TellFinished).
type finished struct {
	Outcome
	state RequestState
}

// progressed is a ledger row a commit's progress returned, with the usage
// sum its receipt keeps; or, when summed, the promise that the receipt is
// sent after the progress in the same batch and sums the usage itself
// (MessageInsertReceipt), needing nothing else of the row.
type progressed struct {
	row    dbgen.StructuredRequest
	usage  json.RawMessage
	summed bool
}

// ReceiptParts is a receipt's content: a text fallback for clients that do
// not know structured_output, and the internal outcome part.
func ReceiptParts(o Outcome) []jsonb.Part {
	out := &jsonb.Outcome{RequestID: o.RequestID.String(), Status: string(o.Status), Usage: o.Usage}
	var text string
	switch o.Status {
	case client.OutputSucceeded:
		out.Value = o.Value
		text = string(o.Value)
	case client.OutputCancelled:
		out.Error = &jsonb.OutcomeError{Code: string(o.Code), Message: o.Message}
		text = fmt.Sprintf("Structured output request cancelled (%s): %s", o.Code, o.Message)
	default:
		out.Error = &jsonb.OutcomeError{Code: string(o.Code), Message: o.Message, Attempts: o.Attempts}
		text = fmt.Sprintf("Structured output failed (%s): %s", o.Code, o.Message)
	}
	return []jsonb.Part{jsonb.Text(text), {Type: jsonb.PartOutcome, Outcome: out}}
}

// end applies the end of commit c to the chat row, in the round trip of
// what pl holds.
func (s *Store) end(ctx context.Context, tx pgx.Tx, pl *pipeline, c Commit) (dbgen.Chat, *Message, error) {
	chatID, e, lastError, actionTimeout := c.Fence.ChatID, c.End, c.LastError, c.ActionTimeout
	var chat dbgen.Chat
	queued := false
	keep := func(row dbgen.Chat, err error) error {
		chat = row
		return err
	}
	switch e {
	case EndNone:
		if c.CountAttempt {
			pipeOne(pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatCountAttempt(ctx, db, chatID) }, keep)
		} else {
			pipeOne(pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatGet(ctx, db, chatID) }, keep)
		}
	case EndRequiresAction:
		if actionTimeout <= 0 {
			actionTimeout = 10 * time.Minute
		}
		if c.OnlyChildren {
			actionTimeout = 0 // no deadline
		}
		p := dbgen.ChatSetStateParams{ID: chatID, Status: client.StatusRequiresAction, ActionTimeoutSeconds: actionTimeout.Seconds()}
		pipeOne(pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatSetState(ctx, db, p) }, keep)
	default:
		// Most turns end with an empty queue: one statement then.
		p := dbgen.ChatEndTurnIfQueueEmptyParams{ID: chatID, Status: client.StatusWaiting}
		if e == EndError {
			p.Status, p.LastError = client.StatusError, lastError
		}
		pipeOne(pl, func(db dbgen.DBTX) (dbgen.Chat, error) { return s.q.ChatEndTurnIfQueueEmpty(ctx, db, p) },
			func(row dbgen.Chat, err error) error {
				if errors.Is(err, pgx.ErrNoRows) {
					queued = true // promoted below
					return nil
				}
				return keep(row, err)
			})
	}
	if err := pl.send(ctx, tx); err != nil || !queued {
		return chat, nil, err
	}
	promoted, err := s.promote(ctx, tx, chatID)
	if err != nil {
		return dbgen.Chat{}, nil, err
	}
	p := dbgen.ChatSetStateParams{ID: chatID, Status: client.StatusWaiting}
	switch {
	case promoted != nil:
		// The next turn starts at once; the worker keeps the chat.
		p.Status, p.KeepOwner = client.StatusRunning, true
	case e == EndError:
		p.Status, p.LastError = client.StatusError, lastError
	}
	chat, err = s.q.ChatSetState(ctx, tx, p)
	return chat, promoted, err
}

// promote moves the queue head into history as the next user message.
func (s *Store) promote(ctx context.Context, tx pgx.Tx, chatID uuid.UUID) (*Message, error) {
	head, err := s.q.QueuePopHead(ctx, tx, chatID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	msg, err := s.insertUserMessage(ctx, tx, chatID, head.Content, head.StructuredRequestID)
	if err != nil {
		return nil, err
	}
	return &msg, nil
}

// textColumn makes s storable in a text column: PostgreSQL refuses U+0000
// and invalid UTF-8 there.
func textColumn(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func nullCode(c client.ErrorCode) *client.ErrorCode {
	if c == "" {
		return nil
	}
	return &c
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// CountControls returns how many control rows a request has: the stop
// hooks' continuations so far.
func (s *Store) CountControls(ctx context.Context, requestID uuid.NullUUID) (int, error) {
	n, err := s.q.MessageCountControls(ctx, s.pool, requestID)
	return int(n), mapError(err)
}
