// Package store is the database seam: every state transition of a chat is a
// method here, run as one transaction whose first statement takes the chat's
// row lock and checks the transition's guard. Errors from PostgreSQL are
// mapped once, here, to the sentinel errors below.
package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbgen"
)

var (
	// ErrNotFound: no such row, or not the caller's.
	ErrNotFound = errors.New("not found")
	// ErrQueueFull: the chat's queue already holds its maximum.
	ErrQueueFull = errors.New("queue full")
	// ErrTooManyRunnable: the admission would leave its owner with more
	// runnable chats than the limit it was given.
	ErrTooManyRunnable = errors.New("too many runnable chats")
	// ErrFenceMiss: a worker's guard failed (lost ownership, history moved,
	// status changed). An expected exit for the worker, not a failure.
	ErrFenceMiss = errors.New("fence miss")
	// ErrConflict: the chat's state does not allow the operation.
	ErrConflict = errors.New("conflict")
)

// Operation names what a caller asked of a chat, for a StateError.
type Operation int

// Operations a chat's state can refuse.
const (
	OpInterrupt Operation = iota + 1
	OpSubmitToolResults
	OpPlanMode
)

// String is the operation's name, as logs and StateError.Error print it.
func (o Operation) String() string {
	switch o {
	case OpInterrupt:
		return "interrupt"
	case OpSubmitToolResults:
		return "submit_tool_results"
	case OpPlanMode:
		return "plan_mode"
	}
	return fmt.Sprintf("operation(%d)", int(o))
}

// StateError is an ErrConflict: the chat's status (or, for plan mode, its
// mode) does not allow the operation. The API words it for clients.
type StateError struct {
	Op     Operation
	Status client.ChatStatus
	Mode   client.ChatMode
}

func (e *StateError) Error() string {
	return fmt.Sprintf("%s not allowed: chat is %s (%s)", e.Op, e.Status, e.Mode)
}
func (e *StateError) Unwrap() error { return ErrConflict }

// ErrInvalidUserName: a user name outside the users.name pattern.
var ErrInvalidUserName = errors.New("invalid user name")

// ErrInvalidScope: a token scope that is not one of client.Scopes.
var ErrInvalidScope = errors.New("invalid scope")

// Store runs transitions against one database.
type Store struct {
	pool *pgxpool.Pool
	q    *dbgen.Queries

	finished *prometheus.CounterVec // nil until Instrument
	tokens   tokenCache
	users    tokenCache // identities (X-Chatd-User, JWT subjects) to users
	runnable runnableCounts

	hub  uuid.UUID // this process, when Tell was called
	tell Teller
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, q: dbgen.New()}
}

// Teller hears, in this process and after the commit, what this store's
// commits do not announce to it (notify.Hub implements it).
type Teller interface {
	// TellFinished: a commit finished a structured request, and state is
	// the request as the commit left it (its ledger row and receipt), for
	// this process's long polls to answer without reading it again. A
	// finish of a request this process admitted, while nobody follows its
	// chat, is not announced on chatd_request
	// (sql/triggers/030_requests.sql): this wakes the process's long polls
	// and webhook deliverer.
	TellFinished(state RequestState)
	// TellChanged: a worker's own commit changed the chat; it is announced
	// only to the chat's followers (ChatLockIfOwned), not to this process's
	// other subscribers of the chat.
	TellChanged(chat, owner uuid.UUID, snapshot int64)
	// Admitting: this process is admitting a structured request, owner's,
	// in chat (called before the admission commits; failed when it did
	// not). Until the finish is told or announced, this process's long
	// polls need not read the request to know it is pending.
	Admitting(request, owner, chat uuid.UUID) (failed func())
}

// Tell names this process hub (its notify hub's id) in the requests it
// admits and the finishes it commits (admitted_by, finished_by), and tells
// t what its commits do not announce to it. Call it before use.
func (s *Store) Tell(hub uuid.UUID, t Teller) {
	s.hub, s.tell = hub, t
}

// admitting tells the Teller of a request being admitted, and returns what
// to call with the admission's outcome.
func (s *Store) admitting(request uuid.NullUUID, owner, chat uuid.UUID) (done func(err error)) {
	if !request.Valid || s.tell == nil {
		return func(error) {}
	}
	failed := s.tell.Admitting(request.UUID, owner, chat)
	return func(err error) {
		if err != nil {
			failed()
		}
	}
}

// finishedCommitted follows a committed transaction that finished
// requests: this process's long polls are told, then the finishes counted.
func (s *Store) finishedCommitted(done []finished) {
	s.tellFinished(done)
	s.countFinished(done)
}

// tellFinished tells this process (Tell) of the requests a committed
// transaction finished.
func (s *Store) tellFinished(done []finished) {
	if s.tell == nil {
		return
	}
	for _, f := range done {
		s.tell.TellFinished(f.state)
	}
}

// process is this process's id for admitted_by and finished_by: NULL
// without Tell.
func (s *Store) process() uuid.NullUUID { return uuid.NullUUID{UUID: s.hub, Valid: s.hub != uuid.Nil} }

// tx runs fn in a transaction, mapping errors; purpose names it for the
// transaction counter (TxCounter).
func (s *Store) tx(ctx context.Context, purpose string, fn func(tx pgx.Tx) error) error {
	return mapError(pgx.BeginFunc(withPurpose(ctx, purpose), s.pool, fn))
}

// txFrom is tx whose BEGIN, and the statements first queues, go out with
// the first batch fn sends (or its first statement): a transaction that
// opens with a guard (a fenced lock) and writes behind it sends both in one
// round trip. The guard's callback runs first and fails the batch when it
// misses; fn's writes that ran with it are rolled back (lazyTx).
func (s *Store) txFrom(ctx context.Context, purpose string, first func(pl *pipeline), fn func(tx pgx.Tx) error) error {
	tx := newLazyTx(s.pool, purpose)
	first(&tx.head)
	// Rollback after Commit does nothing; before it, it ends the
	// transaction (when it began) and hands the connection back.
	defer func() { _ = tx.Rollback(ctx) }()
	if err := fn(tx); err != nil {
		return mapError(err)
	}
	return mapError(tx.Commit(withPurpose(ctx, purpose)))
}

// mapError translates database errors into the package's sentinels.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if IsConstraint(err, QueueAtMost20) {
		return fmt.Errorf("%w: %w", ErrQueueFull, err)
	}
	if IsConstraint(err, ChatsRunnablePerUser) {
		return fmt.Errorf("%w: %w", ErrTooManyRunnable, err)
	}
	return err
}

// Unavailable reports whether err means the database could not be reached
// or dropped the connection: a restart, a failover, a network fault, a full
// connection table. Such a failure says nothing about the request, so the
// API answers 503 (retry later) instead of 500. A write whose connection was
// lost while it committed may have been applied; the API documents that.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller gave up; the database may be fine
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true // whatever the server said, it did not let us in
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception. 57P01-57P03: the server is
		// shutting down, crashed, or is still starting. 53300: too many
		// connections.
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "53300":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	var netErr net.Error
	return errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// TokenPrefix starts every API token.
const TokenPrefix = "chatd_"

// HashToken is how tokens are stored: a SHA-256 digest. Tokens carry 256
// bits of randomness, so a fast hash is enough.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// CreateToken creates the user if needed and a new token for them (read
// and write scopes). The token is returned once; only its digest is stored.
func (s *Store) CreateToken(ctx context.Context, userName string) (string, error) {
	token, _, err := s.CreateExpiringToken(ctx, userName, 0)
	return token, err
}

// CreateExpiringToken is CreateToken for a token that stops working
// expiresIn from now on the database clock (0: never), returned with its
// expiry (nil: never).
func (s *Store) CreateExpiringToken(ctx context.Context, userName string, expiresIn time.Duration) (string, *time.Time, error) {
	token, info, err := s.CreateScopedToken(ctx, TokenSpec{User: userName, ExpiresIn: expiresIn})
	return token, info.ExpiresAt, err
}

// TokenSpec says what a new token is for.
type TokenSpec struct {
	User      string         // the user's name, created on first use
	Scopes    []client.Scope // nil: read and write
	ActAs     bool           // may send X-Chatd-User
	ExpiresIn time.Duration  // 0: never expires
}

// CreateScopedToken creates the user if needed and a token as spec says:
// the secret, returned this once, and the token's description.
// ErrInvalidUserName and ErrInvalidScope name what is wrong.
func (s *Store) CreateScopedToken(ctx context.Context, spec TokenSpec) (string, TokenInfo, error) {
	scopes, err := NormalizeScopes(spec.Scopes)
	if err != nil {
		return "", TokenInfo{}, err
	}
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", TokenInfo{}, err
	}
	token := TokenPrefix + base64.RawURLEncoding.EncodeToString(secret[:])
	names := make([]string, len(scopes))
	for i, sc := range scopes {
		names[i] = string(sc)
	}
	var info TokenInfo
	err = s.tx(ctx, "create_token", func(tx pgx.Tx) error {
		u, err := s.q.UserUpsertByName(ctx, tx, spec.User)
		if err != nil {
			return err
		}
		row, err := s.q.TokenInsert(ctx, tx, dbgen.TokenInsertParams{UserID: u.ID, TokenHash: HashToken(token),
			ExpiresInSeconds: spec.ExpiresIn.Seconds(), Scopes: names, ActAs: spec.ActAs})
		info = TokenInfo{ID: row.ID, UserID: u.ID, UserName: u.Name, Scopes: names, ActAs: spec.ActAs,
			CreatedAt: row.CreatedAt, ExpiresAt: row.ExpiresAt}
		return err
	})
	if err != nil {
		if IsConstraint(err, UsersNameCheck) {
			return "", TokenInfo{}, fmt.Errorf("%w %q", ErrInvalidUserName, spec.User)
		}
		return "", TokenInfo{}, err
	}
	return token, info, nil
}
