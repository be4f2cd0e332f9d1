package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/prom"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

// TestFairClaimAcrossUsers: alice's and carol's long turns hold both
// slots (carol's the headroom, kept for users with nothing running); bob's
// new turn must not wait for them to end. A busy worker hands alice's chat
// back at its next step boundary (she has more running than bob) and
// claims bob's, so bob's receipt arrives while the long turns still run
// (each takes 40 steps).
func TestFairClaimAcrossUsers(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	started := make(chan struct{}) // alice's and carol's chats are in a provider step
	long := &mockllm.Script{Steps: []mockllm.Step{{ToolCalls: []mockllm.ToolCall{{Name: "list_files", Arguments: `{}`}}}}, Then: mockllm.ThenRepeat}
	env := testenv.New(t, testenv.Options{Workspace: t.TempDir(), Runner: runner.Options{MaxRunning: 2, MaxSteps: 40},
		Mock: mockllm.Options{Latency: 30 * time.Millisecond, Scripts: map[string]*mockllm.Script{"long": long},
			BeforeRespond: func(context.Context, *mockllm.Request) error {
				if calls.Add(1) == 2 {
					close(started)
				}
				return nil
			}}})
	alice, bob, carol := env.Client("alice"), env.Client("bob"), env.Client("carol")
	ctx := t.Context()
	var chats []uuid.UUID
	for _, c := range []*client.Client{alice, alice, carol} {
		res, err := c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("[script:long] List the files, again and again.")}})
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
	owners := []*client.Client{alice, alice, carol}
	for i, id := range chats {
		ch, err := owners[i].GetChat(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Status != client.StatusRunning {
			t.Fatalf("bob's turn ended after %s, once chat %s was %s: it waited for the long turns to end", took, id, ch.Status)
		}
	}
	if n := yields(t, env); n < 1 {
		t.Fatalf("no chat was handed back for bob's (chatd_fair_yields_total %v)", n)
	}
	t.Logf("bob's turn took %s while alice's and carol's turns held both slots", took)

	// Handed back, the long chats go on to the end of their turns.
	for i, id := range chats {
		waitIdle(t, owners[i], id)
		if ch, err := owners[i].GetChat(ctx, id); err != nil || ch.Status != client.StatusWaiting {
			t.Fatalf("chat %s ended %+v (%v)", id, ch, err)
		}
	}
}

// yields reads chatd_fair_yields_total.
func yields(t *testing.T, env *testenv.Env) float64 {
	t.Helper()
	s, err := prom.Gather(env.Metrics)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := s.Get("chatd_fair_yields_total")
	return n
}
