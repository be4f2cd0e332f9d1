package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/prom"
)

// TxCounter counts the transactions a pool runs, by purpose, as the
// database sees them: an explicit BEGIN … COMMIT is one, a batch sent
// outside one is one (an implicit transaction), and every other statement
// is one of its own (autocommit). Install it with Trace before the pool is
// created. The purpose is the one a store method named (withPurpose), or
// else the sqlc name of the transaction's first statement.
//
// It is how the benchmark and the transaction-budget test tell what a turn
// costs, and it is cheap enough to stay on in production: one map lookup
// under a mutex per statement.
type TxCounter struct {
	opened atomic.Int64 // connections established
	failed atomic.Int64 // connection attempts that failed

	mu sync.Mutex
	// servers is the address the last connection reached, by the
	// configuration's first host (the pool's, and a listener's direct
	// one, each its own); moved counts the changes (a failover), onMove
	// is told each.
	servers map[string]string
	moved   int64
	onMove  func(from, to string)
	open    map[*pgx.Conn]*openTx
	stats   map[string]*TxStat
}

// TxStat is what the counter saw for one purpose.
type TxStat struct {
	Commits, Rollbacks int64
	Statements         int64 // inside the committed and rolled back transactions
	// RoundTrips are the exchanges with the server those transactions
	// waited for: BEGIN and COMMIT included, a batch one.
	RoundTrips int64
}

type openTx struct {
	purpose    string
	statements int64
	roundTrips int64
	failed     bool
}

// Trace installs a new counter on cfg, after any tracer already there.
func Trace(cfg *pgxpool.Config) *TxCounter {
	c := &TxCounter{open: map[*pgx.Conn]*openTx{}, stats: map[string]*TxStat{}}
	if prev := cfg.ConnConfig.Tracer; prev != nil {
		panic("store.Trace: the pool already has a tracer")
	}
	cfg.ConnConfig.Tracer = c
	return c
}

// Snapshot returns the counts so far, by purpose.
func (c *TxCounter) Snapshot() map[string]TxStat {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]TxStat, len(c.stats))
	for k, v := range c.stats {
		out[k] = *v
	}
	return out
}

// Opened is how many database connections the pool has established.
func (c *TxCounter) Opened() int64 { return c.opened.Load() }

type purposeKey struct{}

// withPurpose names the transactions ctx runs, for the counter.
func withPurpose(ctx context.Context, purpose string) context.Context {
	return context.WithValue(ctx, purposeKey{}, purpose)
}

func purposeOf(ctx context.Context, sql string) string {
	if p, ok := ctx.Value(purposeKey{}).(string); ok {
		return p
	}
	return statementName(sql)
}

// statementName is the sqlc name of a query ("-- name: ChatGet :one"), or
// its first word.
func statementName(sql string) string {
	sql = strings.TrimSpace(sql)
	if rest, ok := strings.CutPrefix(sql, "-- name: "); ok {
		name, _, _ := strings.Cut(rest, " ")
		return name
	}
	word, _, _ := strings.Cut(sql, " ")
	return strings.ToLower(strings.TrimSuffix(word, ";"))
}

// statement counts sql, which ran in a batch (one round trip for them all,
// counted by TraceBatchStart) when batched.
func (c *TxCounter) statement(ctx context.Context, conn *pgx.Conn, sql string, batched bool, err error) {
	word := statementName(sql)
	c.mu.Lock()
	defer c.mu.Unlock()
	tx := c.open[conn]
	switch {
	case word == "begin":
		if err == nil {
			c.open[conn] = &openTx{purpose: purposeOf(ctx, ""), roundTrips: 1}
		}
		return
	case tx != nil && (word == "commit" || word == "rollback"):
		delete(c.open, conn)
		c.done(tx.purpose, tx.statements, tx.roundTrips+1, word == "commit" && err == nil && !tx.failed)
		return
	case tx != nil:
		if tx.purpose == "" {
			tx.purpose = purposeOf(ctx, sql)
		}
		tx.statements++
		if !batched {
			tx.roundTrips++
		}
		tx.failed = tx.failed || err != nil
		return
	}
	c.done(purposeOf(ctx, sql), 1, 1, err == nil)
}

func (c *TxCounter) done(purpose string, statements, roundTrips int64, committed bool) {
	st := c.stats[purpose]
	if st == nil {
		st = &TxStat{}
		c.stats[purpose] = st
	}
	if committed {
		st.Commits++
	} else {
		st.Rollbacks++
	}
	st.Statements += statements
	st.RoundTrips += roundTrips
}

type sqlKey struct{}

// TraceQueryStart implements pgx.QueryTracer.
func (c *TxCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, sqlKey{}, data.SQL)
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *TxCounter) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	sql, _ := ctx.Value(sqlKey{}).(string)
	c.statement(ctx, conn, sql, false, data.Err)
}

type batchKey struct{}

// batchState follows one batch: outside a transaction its statements are
// one implicit transaction.
type batchState struct {
	implicit   bool
	purpose    string
	statements int64
	failed     bool
}

// TraceBatchStart implements pgx.BatchTracer.
func (c *TxCounter) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	c.mu.Lock()
	tx, inTx := c.open[conn]
	if inTx {
		tx.roundTrips++
	}
	c.mu.Unlock()
	b := &batchState{}
	if !inTx && data.Batch != nil && len(data.Batch.QueuedQueries) > 0 &&
		statementName(data.Batch.QueuedQueries[0].SQL) != "begin" {
		b.implicit = true
		b.purpose = purposeOf(ctx, data.Batch.QueuedQueries[0].SQL)
	}
	return context.WithValue(ctx, batchKey{}, b)
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c *TxCounter) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	b, _ := ctx.Value(batchKey{}).(*batchState)
	if b == nil || !b.implicit {
		c.statement(ctx, conn, data.SQL, true, data.Err)
		return
	}
	b.statements++
	b.failed = b.failed || data.Err != nil
}

// TraceBatchEnd implements pgx.BatchTracer.
func (c *TxCounter) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	b, _ := ctx.Value(batchKey{}).(*batchState)
	if b == nil || !b.implicit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done(b.purpose, b.statements, 1, !b.failed && data.Err == nil)
}

// TraceConnectStart implements pgx.ConnectTracer.
func (c *TxCounter) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return ctx
}

// TraceConnectEnd implements pgx.ConnectTracer.
func (c *TxCounter) TraceConnectEnd(_ context.Context, data pgx.TraceConnectEndData) {
	if data.Err != nil {
		c.failed.Add(1)
		return
	}
	c.opened.Add(1)
	to := data.Conn.PgConn().Conn().RemoteAddr().String()
	cfg := data.Conn.Config()
	key := fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
	c.mu.Lock()
	if c.servers == nil {
		c.servers = map[string]string{}
	}
	from, f := c.servers[key], c.onMove
	c.servers[key] = to
	moved := from != "" && from != to
	if moved {
		c.moved++
	}
	c.mu.Unlock()
	if moved && f != nil {
		f(from, to)
	}
}

// OnServerChange calls f (on the connecting goroutine) when a new
// connection reaches another server address than the one before: with a
// multi-host URL or a name that moves, the primary changed.
func (c *TxCounter) OnServerChange(f func(from, to string)) {
	c.mu.Lock()
	c.onMove = f
	c.mu.Unlock()
}

// Moved is how many times new connections reached another server.
func (c *TxCounter) Moved() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.moved
}

// TraceRelease implements pgxpool.ReleaseTracer: a connection handed back
// in the middle of a transaction (it is then closed) leaves no state.
func (c *TxCounter) TraceRelease(_ *pgxpool.Pool, data pgxpool.TraceReleaseData) {
	c.mu.Lock()
	delete(c.open, data.Conn)
	c.mu.Unlock()
}

// Instrument registers the counter's figures on reg.
func (c *TxCounter) Instrument(reg *prometheus.Registry) {
	prom.Func(reg, "chatd_db_transactions_total", "Database transactions this process ran, by purpose (the store "+
		"method, or the first statement's query name) and outcome (commit, rollback). A statement outside a "+
		"transaction counts as one.", prometheus.CounterValue, []string{"purpose", "outcome"}, func() []prom.Sample {
		var out []prom.Sample
		for p, st := range c.Snapshot() {
			out = append(out, prom.Sample{Values: []string{p, "commit"}, Value: float64(st.Commits)},
				prom.Sample{Values: []string{p, "rollback"}, Value: float64(st.Rollbacks)})
		}
		return out
	})
	prom.Func(reg, "chatd_db_statements_total", "Statements this process ran inside its counted transactions, by purpose.",
		prometheus.CounterValue, []string{"purpose"}, func() []prom.Sample {
			var out []prom.Sample
			for p, st := range c.Snapshot() {
				out = append(out, prom.Sample{Values: []string{p}, Value: float64(st.Statements)})
			}
			return out
		})
	prom.Func(reg, "chatd_db_connections_opened_total", "Database connections this process established.",
		prometheus.CounterValue, nil, func() []prom.Sample {
			return []prom.Sample{{Value: float64(c.Opened())}}
		})
	prom.Func(reg, "chatd_db_connect_errors_total", "Database connection attempts that failed (no host of the URL "+
		"answered as the URL asks, e.g. no read-write one during a failover).",
		prometheus.CounterValue, nil, func() []prom.Sample {
			return []prom.Sample{{Value: float64(c.failed.Load())}}
		})
	prom.Func(reg, "chatd_db_server_changes_total", "Times a new database connection reached another server address "+
		"than the connection before it: the primary moved (a failover or switchover).",
		prometheus.CounterValue, nil, func() []prom.Sample {
			return []prom.Sample{{Value: float64(c.Moved())}}
		})
}
