package store_test

import (
	"testing"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/store"
)

// A StateError names its operation in words, as logs print it.
func TestStateErrorNamesItsOperation(t *testing.T) {
	t.Parallel()
	for op, want := range map[store.Operation]string{
		store.OpInterrupt:         "interrupt not allowed: chat is waiting (normal)",
		store.OpSubmitToolResults: "submit_tool_results not allowed: chat is waiting (normal)",
		store.OpPlanMode:          "plan_mode not allowed: chat is waiting (normal)",
		store.Operation(99):       "operation(99) not allowed: chat is waiting (normal)",
	} {
		if got := (&store.StateError{Op: op, Status: client.StatusWaiting, Mode: client.ModeNormal}).Error(); got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}
