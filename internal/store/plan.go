package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// plan is a transaction's statements in order, each naming the earlier
// statement whose result it is built from. Planning says what a transaction
// writes; an executor (batched, oneByOne) decides the round trips.
type plan struct{ stmts []stmt }

// stmt is one statement of a plan: queue puts it on the pipeline (or puts
// nothing, when an earlier result says it is not needed), and its callback
// keeps its result for the statements that follow. A stmt with run instead
// of queue talks to the database itself, after everything before it ran.
type stmt struct {
	needs int // index of the statement whose result it is built from, or noNeed
	queue func(pl *pipeline) error
	run   func(tx pgx.Tx) error
}

// noNeed is the needs of a statement built from nothing read in its
// transaction.
const noNeed = -1

// add appends a statement built from the result of statement needs, and
// returns its index, for the statements built from its own result.
func (p *plan) add(needs int, queue func(pl *pipeline) error) int {
	p.stmts = append(p.stmts, stmt{needs: needs, queue: queue})
	return len(p.stmts) - 1
}

// addRun appends work that runs its own statements: everything before it
// runs first.
func (p *plan) addRun(run func(tx pgx.Tx) error) int {
	p.stmts = append(p.stmts, stmt{needs: len(p.stmts) - 1, run: run})
	return len(p.stmts) - 1
}

// executor runs a plan in tx.
type executor func(ctx context.Context, tx pgx.Tx, p *plan) error

// batched sends statements together until one needs the result of a
// statement still queued: that forces a round trip. In a lazyTx the first
// batch goes with BEGIN.
func batched(ctx context.Context, tx pgx.Tx, p *plan) error {
	var pl pipeline
	sent := 0 // the statements before p.stmts[sent] have run
	for i, st := range p.stmts {
		if st.needs >= sent {
			if err := pl.send(ctx, tx); err != nil {
				return err
			}
			pl, sent = pipeline{}, i
		}
		if st.run != nil {
			if err := st.run(tx); err != nil {
				return err
			}
			sent = i + 1
			continue
		}
		if err := st.queue(&pl); err != nil {
			return err
		}
	}
	return pl.send(ctx, tx)
}

// oneByOne sends each statement in a round trip of its own: the plain
// reading of a plan, which batched must agree with.
func oneByOne(ctx context.Context, tx pgx.Tx, p *plan) error {
	for _, st := range p.stmts {
		if st.run != nil {
			if err := st.run(tx); err != nil {
				return err
			}
			continue
		}
		var pl pipeline
		if err := st.queue(&pl); err != nil {
			return err
		}
		if err := pl.send(ctx, tx); err != nil {
			return err
		}
	}
	return nil
}
