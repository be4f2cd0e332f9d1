package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

// TestFairClaimAcrossUsers: alice's long turns hold every worker; bob's new
// turn must not wait for them to end. A busy worker hands alice's chat back
// at its next step boundary and claims bob's, so bob's receipt arrives
// while both of alice's turns still run (each takes 40 steps).
func TestFairClaimAcrossUsers(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	started := make(chan struct{}) // both of alice's chats are in a provider step
	long := &mockllm.Script{Steps: []mockllm.Step{{ToolCalls: []mockllm.ToolCall{{Name: "list_files", Arguments: `{}`}}}}, Then: mockllm.ThenRepeat}
	env := testenv.New(t, testenv.Options{Workspace: t.TempDir(), Runner: runner.Options{MaxRunning: 2, MaxSteps: 40},
		Mock: mockllm.Options{Latency: 30 * time.Millisecond, Scripts: map[string]*mockllm.Script{"long": long},
			BeforeRespond: func(context.Context, *mockllm.Request) error {
				if calls.Add(1) == 2 {
					close(started)
				}
				return nil
			}}})
	alice, bob := env.Client("alice"), env.Client("bob")
	ctx := t.Context()
	var chats []uuid.UUID
	for range 2 {
		res, err := alice.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("[script:long] List the files, again and again.")}})
		if err != nil {
			t.Fatal(err)
		}
		chats = append(chats, res.Chat.ID)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}

	begin := time.Now()
	_, req := create(t, bob, reportSchema)
	if res := wait(t, bob, req); res.Status != client.OutputSucceeded {
		t.Fatalf("bob's result %+v", res)
	}
	took := time.Since(begin)
	for _, id := range chats {
		ch, err := alice.GetChat(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Status != client.StatusRunning {
			t.Fatalf("bob's turn ended after %s, once alice's chat %s was %s: it waited for her turns to end", took, id, ch.Status)
		}
	}
	t.Logf("bob's turn took %s while alice's two turns held both workers", took)

	// Handed back, alice's chats go on to the end of their turns.
	for _, id := range chats {
		waitIdle(t, alice, id)
		if ch, err := alice.GetChat(ctx, id); err != nil || ch.Status != client.StatusWaiting {
			t.Fatalf("alice's chat %s ended %+v (%v)", id, ch, err)
		}
	}
}
