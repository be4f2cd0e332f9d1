package store

import (
	"testing"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
)

// TestCommitOptionsOnlyWhereLegal: the yield question goes only with a
// commit that keeps the turn going, the parent only with one that ends it.
func TestCommitOptionsOnlyWhereLegal(t *testing.T) {
	t.Parallel()
	parent := uuid.NullUUID{UUID: uuid.New(), Valid: true}
	for _, tc := range []struct {
		name         string
		c            Commit
		fair, parent bool
	}{
		{"continue", Continue(Continuation{CountAttempt: true}), true, false},
		{"finish", FinishTurn(Ending{}), false, true},
		{"fail", FailTurn(Ending{}, client.StreamError{Code: client.CodeProviderError, Message: "down"}), false, true},
		{"await", AwaitTools(Awaiting{OnlyChildren: true}), false, false},
	} {
		c := tc.c.Fair().ToParent(parent)
		if c.fair != tc.fair || c.spawnParent.Valid != tc.parent {
			t.Errorf("%s: fair %v, parent %v; want %v, %v", tc.name, c.fair, c.spawnParent.Valid, tc.fair, tc.parent)
		}
	}
}
