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

// Held is a chat a worker holds: the chat and the worker's claim.
type Held struct {
	Chat, Worker uuid.UUID
}

// RenewLeases extends, in one statement, the leases of the held chats
// still owned, and returns those it renewed. A chat it did not return was
// lost, or its row was held by another transaction (the worker's own
// commit): renew it alone (RenewLease) to tell which. The renewal is not
// flushed at commit (synchronous_commit off), as a claim is not: a
// database crash that loses it lets another replica take the chat over
// sooner, and the fence keeps the first worker's commits out.
func (s *Store) RenewLeases(ctx context.Context, held []Held, lease time.Duration) ([]uuid.UUID, error) {
	p := dbgen.ChatRenewLeasesIfOwnedParams{LeaseSeconds: lease.Seconds(),
		Ids: make([]uuid.UUID, len(held)), WorkerIds: make([]uuid.UUID, len(held))}
	for i, h := range held {
		p.Ids[i], p.WorkerIds[i] = h.Chat, h.Worker
	}
	var renewed []uuid.UUID
	opts := pgx.TxOptions{BeginQuery: "begin; set local synchronous_commit = off"}
	err := pgx.BeginTxFunc(withPurpose(ctx, "renew_leases"), s.pool, opts, func(tx pgx.Tx) error {
		var err error
		renewed, err = s.q.ChatRenewLeasesIfOwned(ctx, tx, p)
		return err
	})
	return renewed, mapError(err)
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
	var rows []Message
	var r dbgen.StructuredRequest
	f := &finishing{s: s, ctx: ctx, chatID: chatID, o: o, done: done, got: func(m *Message, req dbgen.StructuredRequest) {
		if m != nil {
			rows = append(rows, *m)
		}
		r = req
	}}
	var p plan
	f.planWrite(&p, f.planRead(&p))
	err := batched(ctx, tx, &p)
	return rows, r, err
}

// finishing is a request a transaction finishes: a receipt row plus the
// ledger update, made from the request's row as the transaction left it.
type finishing struct {
	s      *Store
	ctx    context.Context
	chatID uuid.UUID
	o      Outcome
	// row is the request's ledger row, read in this transaction or
	// returned by its progress (with the usage sum, in o.Usage); summed:
	// the receipt is sent after the progress in the same batch and sums
	// the usage itself (MessageInsertReceipt), needing nothing of the row.
	row    dbgen.StructuredRequest
	summed bool
	// already: the request was finished before this transaction.
	already bool
	receipt Message
	done    *[]finished
	// got gets the receipt (nil when the request was finished already)
	// and the ledger row.
	got func(*Message, dbgen.StructuredRequest)
}

// planRead reads the request and its usage sum, the steps this
// transaction inserted included (the receipt keeps the request's final
// sum); it returns the statement the receipt needs.
func (f *finishing) planRead(p *plan) int {
	s, ctx, id := f.s, f.ctx, f.o.RequestID
	p.add(noNeed, func(pl *pipeline) error {
		pipeOne(pl, func(db dbgen.DBTX) (dbgen.StructuredRequest, error) { return s.q.RequestGet(ctx, db, id) },
			func(r dbgen.StructuredRequest, err error) error {
				if err != nil {
					return fmt.Errorf("finish request %s: %w", id, err)
				}
				f.row, f.already = r, r.Status != client.OutputPending
				return nil
			})
		return nil
	})
	return p.add(noNeed, func(pl *pipeline) error {
		pipeOne(pl, func(db dbgen.DBTX) (json.RawMessage, error) { return s.q.RequestUsageSum(ctx, db, id) },
			func(usage json.RawMessage, err error) error {
				if err != nil {
					return fmt.Errorf("sum the usage of %s: %w", id, err)
				}
				f.o.Usage = usage
				return nil
			})
		return nil
	})
}

// planWrite writes the receipt and finishes the request, built from what
// statement needs read.
func (f *finishing) planWrite(p *plan, needs int) {
	p.add(needs, f.queueReceipt)
	p.add(needs, f.queueFinish)
}

func (f *finishing) queueReceipt(pl *pipeline) error {
	if f.already {
		f.got(nil, f.row)
		return nil
	}
	o := &f.o
	if o.Status == client.OutputFailed && len(f.row.Attempts) > 0 && string(f.row.Attempts) != "[]" {
		o.Attempts = f.row.Attempts // read in this transaction: the rejection that failed it included
	}
	p, err := messageParams(f.chatID, NewMessage{
		Role: client.RoleAssistant, Kind: KindReceipt, Visibility: VisibleUser,
		Parts:     ReceiptParts(*o),
		RequestID: uuid.NullUUID{UUID: o.RequestID, Valid: true},
	})
	if err != nil {
		return err
	}
	insert := func(db dbgen.DBTX) (dbgen.ChatMessage, error) { return f.s.q.MessageInsert(f.ctx, db, p) }
	if f.summed {
		rp := dbgen.MessageInsertReceiptParams{ChatID: p.ChatID, Role: p.Role, Kind: p.Kind, Visibility: p.Visibility,
			Content: p.Content, RequestID: o.RequestID}
		insert = func(db dbgen.DBTX) (dbgen.ChatMessage, error) { return f.s.q.MessageInsertReceipt(f.ctx, db, rp) }
	}
	pipeOne(pl, insert, func(row dbgen.ChatMessage, err error) error {
		if err != nil {
			return fmt.Errorf("insert receipt for %s: %w", o.RequestID, err)
		}
		f.receipt = messageFrom(row)
		return nil
	})
	return nil
}

func (f *finishing) queueFinish(pl *pipeline) error {
	if f.already {
		return nil
	}
	o := f.o
	i := len(*f.done)
	*f.done = append(*f.done, finished{Outcome: o})
	fp := dbgen.RequestFinishIfPendingParams{RequestID: o.RequestID, Status: o.Status,
		ErrorCode: nullCode(o.Code), ErrorMessage: nullString(textColumn(o.Message)), FinishedBy: f.s.process()}
	pipeOne(pl, func(db dbgen.DBTX) (dbgen.StructuredRequest, error) {
		return f.s.q.RequestFinishIfPending(f.ctx, db, fp)
	},
		func(row dbgen.StructuredRequest, err error) error {
			if err != nil {
				return fmt.Errorf("finish request %s: %w", o.RequestID, err)
			}
			f.got(&f.receipt, row)
			(*f.done)[i].state = RequestState{Request: requestFrom(row), Receipt: &f.receipt}
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
