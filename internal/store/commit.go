package store

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
)

// End says how a commit leaves the chat.
type End int

const (
	// EndNone keeps the turn going.
	EndNone End = iota
	// EndTurn finishes the turn: promote the queue head or go idle.
	EndTurn
	// EndError finishes the turn with an error: promote the queue head, or
	// stay in the error status with the commit's error.
	EndError
	// EndRequiresAction waits for client tool results.
	EndRequiresAction
)

// Commit is one fenced worker transaction. It is made by the constructor
// of its end — Continue, FinishTurn, FailTurn or AwaitTools — which takes
// only what that end allows. The zero Commit keeps the turn going and
// counts no attempt.
type Commit struct {
	// Fence guards the commit: the worker sets it before Apply.
	Fence Fence
	// Messages are inserted in order, first.
	Messages []NewMessage
	// Progress updates the governing request.
	Progress *Progress

	end       End
	outcomes  []Outcome
	lastError json.RawMessage
	// compressBefore, when set, marks model-visible history before that
	// message id (and earlier summaries) compressed: compaction.
	compressBefore  int64
	clearCompaction bool
	countAttempt    bool
	fair            bool
	spawns          []Spawn
	actionTimeout   time.Duration
	onlyChildren    bool
	spawnParent     uuid.NullUUID
}

// Continuation is what a commit that keeps the turn going writes.
type Continuation struct {
	Messages []NewMessage
	Progress *Progress
	// CountAttempt counts the turn's next provider attempt in this
	// transaction: the worker calls the provider next.
	CountAttempt bool
	// CompressBefore, when set, marks model-visible history before that
	// message id (and earlier summaries) compressed: compaction.
	CompressBefore int64
	// ClearCompaction consumes a manual compaction request.
	ClearCompaction bool
}

// Continue is a commit that keeps the turn going.
func Continue(c Continuation) Commit {
	return Commit{Messages: c.Messages, Progress: c.Progress, end: EndNone, countAttempt: c.CountAttempt,
		compressBefore: c.CompressBefore, clearCompaction: c.ClearCompaction}
}

// Ending is what a commit that finishes the turn writes.
type Ending struct {
	Messages []NewMessage
	Progress *Progress
	// Outcomes finish pending requests, a receipt each.
	Outcomes []Outcome
}

// FinishTurn is a commit that finishes the turn: the queue head is
// promoted, or the chat waits.
func FinishTurn(e Ending) Commit {
	return Commit{Messages: e.Messages, Progress: e.Progress, outcomes: e.Outcomes, end: EndTurn}
}

// FailTurn is a commit that finishes the turn with an error: the queue
// head is promoted, or the chat stays in the error status with why as its
// last error.
func FailTurn(e Ending, why client.StreamError) Commit {
	lastError, _ := json.Marshal(why) // a struct of strings always marshals
	return Commit{Messages: e.Messages, Progress: e.Progress, outcomes: e.Outcomes, end: EndError, lastError: lastError}
}

// Awaiting is what a commit that waits for tool results writes.
type Awaiting struct {
	Messages []NewMessage
	Progress *Progress
	// Spawns are child chats created for calls of the step being answered
	// (spawn_agent); the chat waits for them.
	Spawns []Spawn
	// Timeout is how long client tool results are waited for (10 minutes
	// when unset).
	Timeout time.Duration
	// OnlyChildren: no client tool call waits, so there is no deadline
	// (the children's ending commits resume the chat).
	OnlyChildren bool
}

// AwaitTools is a commit that leaves the chat waiting for the results of
// its client tools or spawned children.
func AwaitTools(a Awaiting) Commit {
	return Commit{Messages: a.Messages, Progress: a.Progress, end: EndRequiresAction, spawns: a.Spawns,
		actionTimeout: a.Timeout, onlyChildren: a.OnlyChildren}
}

// End says how c leaves the chat.
func (c Commit) End() End { return c.end }

// Outcomes are the requests c finishes.
func (c Commit) Outcomes() []Outcome { return c.outcomes }

// CountsAttempt reports whether c counts the turn's next provider attempt.
func (c Commit) CountsAttempt() bool { return c.countAttempt }

// Fair makes a commit that keeps the turn going ask whether another user's
// chat waits for a worker while this chat's owner has more turns running
// (Committed.Yield). A yielding commit leaves the attempt uncounted: the
// next claim counts it. A commit that ends the turn is returned as it is.
func (c Commit) Fair() Commit {
	c.fair = c.end == EndNone
	return c
}

// ToParent makes a commit that ends a spawned child's turn, while parent
// awaits it, lock parent before the child (the order of every transaction
// that touches both) and give it the child's outcome in this transaction.
// Any other commit is returned as it is.
func (c Commit) ToParent(parent uuid.NullUUID) Commit {
	if c.ending() {
		c.spawnParent = parent
	}
	return c
}

// ending reports whether c finishes the turn.
func (c Commit) ending() bool { return c.end == EndTurn || c.end == EndError }
