package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/pglocal"
)

// Floor is the least a plain structured turn's durable writes cost,
// measured on the same cluster right after chatd's window: a bare pgx
// client writing the rows a turn writes — the chat, the user message and
// the pending request; then the step's messages, the receipt, the
// request's finish and the chat's end — with chatd's bytes, in the same two
// transactions of one round trip each. It writes them into chatd's own
// schema, so its triggers and constraints are the floor's too, and it says
// what chatd's commits say (the owner's own commit, the admitting process's
// own finish), so that it notifies nobody, as a turn long-polled where it
// was created does not; no reads, no attempt counted, no limit checked, no
// HTTP, JSON or model. Bare is the same rows in tables without triggers.
type Floor struct {
	Schema, Bare FloorRun
}

// FloorRun is one floor's measure.
type FloorRun struct {
	Turns       int
	TurnsPerSec float64
	// CPU per turn: the floor's client (this process) and PostgreSQL.
	CPU struct{ Client, Postgres time.Duration }
	// Statements per turn (its two transactions').
	Statements int
}

// Total is the floor's CPU per turn.
func (f FloorRun) Total() time.Duration { return f.CPU.Client + f.CPU.Postgres }

// bareSchema is the bare floor's tables: the columns a turn writes, their
// keys and the indexes a prompt read and a receipt lookup need.
const bareSchema = `
CREATE TABLE IF NOT EXISTS floor_chats (
    id uuid PRIMARY KEY, owner_id uuid NOT NULL, status text NOT NULL, model text NOT NULL,
    worker_id uuid, created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS floor_messages (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, chat_id uuid NOT NULL REFERENCES floor_chats,
    role text NOT NULL, content jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX IF NOT EXISTS floor_messages_chat ON floor_messages (chat_id, id);
CREATE TABLE IF NOT EXISTS floor_requests (
    request_id uuid PRIMARY KEY, chat_id uuid NOT NULL REFERENCES floor_chats, status text NOT NULL,
    schema jsonb NOT NULL, receipt_message_id bigint REFERENCES floor_messages,
    created_at timestamptz NOT NULL DEFAULT now(), finished_at timestamptz);
CREATE INDEX IF NOT EXISTS floor_requests_chat ON floor_requests (chat_id);`

// floorMessage is one message row of chatd's turn.
type floorMessage struct {
	role, kind, visibility string
	content                json.RawMessage
	finish                 *string
	request                bool // carries the request's id
}

// floorTurn is one turn's bytes, as chatd wrote them: the request's name
// and schema, and the chat's messages in order (the user's first, the
// receipt last).
type floorTurn struct {
	name     string
	schema   json.RawMessage
	messages []floorMessage
}

// readFloorTurn reads the last succeeded structured turn of a chatd
// database.
func readFloorTurn(ctx context.Context, url string) (floorTurn, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return floorTurn{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return readFloorTurnFrom(ctx, conn)
}

// querier is what readFloorTurnFrom reads with: a connection or a pool.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func readFloorTurnFrom(ctx context.Context, db querier) (floorTurn, error) {
	var ft floorTurn
	var chat uuid.UUID
	err := db.QueryRow(ctx, `SELECT chat_id, name, schema FROM structured_requests WHERE status = 'succeeded'
		ORDER BY finished_at DESC LIMIT 1`).Scan(&chat, &ft.name, &ft.schema)
	if err != nil {
		return ft, fmt.Errorf("the floor's turn: %w", err)
	}
	rows, err := db.Query(ctx, `SELECT role, kind, visibility, content, finish_reason, structured_request_id IS NOT NULL
		FROM chat_messages WHERE chat_id = $1 ORDER BY id`, chat)
	if err != nil {
		return ft, err
	}
	for rows.Next() {
		var m floorMessage
		if err := rows.Scan(&m.role, &m.kind, &m.visibility, &m.content, &m.finish, &m.request); err != nil {
			return ft, err
		}
		ft.messages = append(ft.messages, m)
	}
	if err := rows.Err(); err != nil {
		return ft, err
	}
	if n := len(ft.messages); n < 2 || ft.messages[0].role != "user" || ft.messages[n-1].kind != "receipt" {
		return ft, errors.New("the floor's turn: not a user message, a step and a receipt")
	}
	return ft, nil
}

// runFloorRound runs round i's floors with the bytes of the first build's
// last turn (nil when the floor is off). The schema floor's database is
// migrated by that build.
func runFloorRound(ctx context.Context, o Options, cluster *pglocal.Cluster, db string, postmaster, i int) (*Floor, error) {
	if o.FloorDuration < 0 {
		return nil, nil
	}
	fmt.Fprintf(o.Progress, "bench: round %d: the floors with %d clients for %s each\n", i+1, o.Clients, o.FloorDuration)
	ft, err := readFloorTurn(ctx, cluster.URL(db))
	if err != nil {
		return nil, err
	}
	var f Floor
	if f.Schema, err = runFloor(ctx, cluster.URL("floor"), o, ft, postmaster, schemaFloor); err != nil {
		return nil, fmt.Errorf("the schema floor: %w", err)
	}
	if f.Bare, err = runFloor(ctx, cluster.URL("floor_bare"), o, ft, postmaster, bareFloor); err != nil {
		return nil, fmt.Errorf("the bare floor: %w", err)
	}
	return &f, nil
}

// floorProcess admits and finishes the schema floor's requests, as a
// chatd process does its own (admitted_by, finished_by): a finish the
// admitting process commits is not announced (chatd_finish_announced).
var floorProcess = uuid.New()

// floorKind is one floor: its setup (the owner it writes as), how it
// writes a turn, and how many statements that takes.
type floorKind struct {
	setup      func(ctx context.Context, pool *pgxpool.Pool) (owner uuid.UUID, err error)
	turn       func(ctx context.Context, pool *pgxpool.Pool, owner uuid.UUID, ft floorTurn) error
	statements func(ft floorTurn) int
}

var (
	schemaFloor = floorKind{
		setup: func(ctx context.Context, pool *pgxpool.Pool) (uuid.UUID, error) { // migrated by the build, with its users
			var owner uuid.UUID
			return owner, pool.QueryRow(ctx, `SELECT id FROM users ORDER BY name LIMIT 1`).Scan(&owner)
		},
		turn:       schemaTurn,
		statements: func(ft floorTurn) int { return 3 + 1 + min(len(ft.messages)-2, 1) + 3 },
	}
	bareFloor = floorKind{
		setup: func(ctx context.Context, pool *pgxpool.Pool) (uuid.UUID, error) {
			_, err := pool.Exec(ctx, bareSchema)
			return uuid.New(), err
		},
		turn:       bareTurn,
		statements: func(ft floorTurn) int { return 3 + min(len(ft.messages)-2, 1) + 2 },
	}
)

// runFloor runs o.Clients loops of floor turns on url's database for
// o.FloorDuration, after a second's warm-up, and measures them.
func runFloor(ctx context.Context, url string, o Options, ft floorTurn, postmaster int, kind floorKind) (FloorRun, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return FloorRun{}, err
	}
	cfg.MaxConns, cfg.MinConns = int32(o.Clients), int32(o.Clients)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return FloorRun{}, err
	}
	defer pool.Close()
	owner, err := kind.setup(ctx, pool)
	if err != nil {
		return FloorRun{}, err
	}
	if _, err := driveFloor(ctx, pool, o.Clients, time.Second, owner, ft, kind); err != nil { // connections, plans
		return FloorRun{}, err
	}
	cpu0, pg0 := selfCPU(), clusterCPU(postmaster)
	begin := time.Now()
	n, err := driveFloor(ctx, pool, o.Clients, o.FloorDuration, owner, ft, kind)
	if err != nil {
		return FloorRun{}, err
	}
	f := FloorRun{Turns: n, TurnsPerSec: float64(n) / time.Since(begin).Seconds(), Statements: kind.statements(ft)}
	if n > 0 {
		f.CPU.Client = (selfCPU() - cpu0) / time.Duration(n)
		f.CPU.Postgres = (clusterCPU(postmaster) - pg0) / time.Duration(n)
	}
	return f, nil
}

// driveFloor runs floor turns on clients connections for d; it returns
// how many it completed.
func driveFloor(ctx context.Context, pool *pgxpool.Pool, clients int, d time.Duration, owner uuid.UUID, ft floorTurn, kind floorKind) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var n atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := kind.turn(ctx, pool, owner, ft)
				if ctx.Err() != nil {
					return // a turn cut by the end of the window is not counted
				}
				if err != nil {
					once.Do(func() { first = err })
					cancel()
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return int(n.Load()), first
}

// schemaTurn writes one turn into chatd's tables: the admission, then
// the worker's commit, each one batch (pgx runs a batch as one implicit
// transaction: one round trip).
func schemaTurn(ctx context.Context, pool *pgxpool.Pool, owner uuid.UUID, ft floorTurn) error {
	chat, req, worker := uuid.New(), uuid.New(), uuid.New()
	admit := &pgx.Batch{}
	admit.Queue(`INSERT INTO chats (id, owner_id, model, status, worker_id, lease_expires_at)
		VALUES ($1, $2, 'bench/mock', 'running', $3, now() + interval '30 seconds')`, chat, owner, worker)
	admit.Queue(`INSERT INTO structured_requests (request_id, chat_id, name, schema, admitted_by) VALUES ($1, $2, $3, $4, $5)`,
		req, chat, ft.name, ft.schema, floorProcess)
	u := ft.messages[0]
	admit.Queue(`INSERT INTO chat_messages (chat_id, role, kind, visibility, content, structured_request_id) VALUES ($1, $2, $3, $4, $5, $6)`,
		chat, u.role, u.kind, u.visibility, u.content, req)
	if err := pool.SendBatch(ctx, admit).Close(); err != nil {
		return err
	}
	commit := &pgx.Batch{}
	// The owner's own commit, as chatd's fenced lock says (chatd_note_claim):
	// not announced to the owner.
	commit.Queue(`SELECT chatd_note_claim($1)`, chat)
	last := len(ft.messages) - 1
	if steps := ft.messages[1:last]; len(steps) > 0 {
		var values []string
		args := []any{chat}
		for _, m := range steps {
			r := uuid.NullUUID{UUID: req, Valid: m.request}
			n := len(args)
			values = append(values, fmt.Sprintf("($1, $%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6))
			args = append(args, m.role, m.kind, m.visibility, m.content, r, m.finish)
		}
		commit.Queue(`INSERT INTO chat_messages (chat_id, role, kind, visibility, content, structured_request_id, finish_reason) VALUES `+
			strings.Join(values, ", "), args...)
	}
	rc := ft.messages[last]
	commit.Queue(`INSERT INTO chat_messages (chat_id, role, kind, visibility, content, structured_request_id) VALUES ($1, $2, $3, $4, $5, $6)`,
		chat, rc.role, rc.kind, rc.visibility, rc.content, req)
	commit.Queue(`UPDATE structured_requests SET status = 'succeeded', steps = steps + 1, finished_by = $2,
		receipt_message_id = (SELECT m.id FROM chat_messages m WHERE m.structured_request_id = $1 AND m.kind = 'receipt')
		WHERE request_id = $1 AND status = 'pending'`, req, floorProcess)
	commit.Queue(`UPDATE chats SET status = 'waiting', worker_id = NULL, lease_expires_at = NULL WHERE id = $1 AND worker_id = $2`, chat, worker)
	return pool.SendBatch(ctx, commit).Close()
}

// bareTurn writes one turn into the bare tables (bareSchema).
func bareTurn(ctx context.Context, pool *pgxpool.Pool, owner uuid.UUID, ft floorTurn) error {
	chat, req, worker := uuid.New(), uuid.New(), uuid.New()
	admit := &pgx.Batch{}
	admit.Queue(`INSERT INTO floor_chats (id, owner_id, status, model, worker_id) VALUES ($1, $2, 'running', 'bench/mock', $3)`, chat, owner, worker)
	admit.Queue(`INSERT INTO floor_requests (request_id, chat_id, status, schema) VALUES ($1, $2, 'pending', $3)`, req, chat, ft.schema)
	admit.Queue(`INSERT INTO floor_messages (chat_id, role, content) VALUES ($1, $2, $3)`, chat, ft.messages[0].role, ft.messages[0].content)
	if err := pool.SendBatch(ctx, admit).Close(); err != nil {
		return err
	}
	commit := &pgx.Batch{}
	last := len(ft.messages) - 1
	if steps := ft.messages[1:last]; len(steps) > 0 {
		var values []string
		args := []any{chat}
		for _, m := range steps {
			values = append(values, fmt.Sprintf("($1, $%d, $%d)", len(args)+1, len(args)+2))
			args = append(args, m.role, m.content)
		}
		commit.Queue(`INSERT INTO floor_messages (chat_id, role, content) VALUES `+strings.Join(values, ", "), args...)
	}
	commit.Queue(`WITH receipt AS (INSERT INTO floor_messages (chat_id, role, content) VALUES ($1, $2, $3) RETURNING id)
		UPDATE floor_requests SET status = 'succeeded', finished_at = now(), receipt_message_id = (SELECT id FROM receipt)
		WHERE request_id = $4 AND status = 'pending'`, chat, ft.messages[last].role, ft.messages[last].content, req)
	commit.Queue(`UPDATE floor_chats SET status = 'waiting', worker_id = NULL, updated_at = now() WHERE id = $1 AND worker_id = $2`, chat, worker)
	return pool.SendBatch(ctx, commit).Close()
}
