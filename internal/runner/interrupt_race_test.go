package runner_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/hooks"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
	"github.com/chatd/chatd/internal/testsignal"
)

// Users press stop while the model writes its value or while the receipt
// commits. These tests hold the worker at each of those points with the
// runner's test signals (no sleeps), interrupt through the API, let it go,
// and check that the request ends with exactly one receipt, the one the
// database ordered first, and that a value the interrupt beat is never
// published: not in a receipt, not in the history, not as a candidate.

// reach waits until a worker is held at b.
func reach(t *testing.T, b *testsignal.Barrier) {
	t.Helper()
	select {
	case <-b.Reached():
	case <-time.After(60 * time.Second):
		t.Fatal("the worker never reached the barrier")
	}
}

// interrupt interrupts chat through the API and returns the HTTP status.
func interrupt(t *testing.T, c *client.Client, chat uuid.UUID) int {
	t.Helper()
	if _, err := c.Interrupt(t.Context(), chat); err != nil {
		var ae *client.APIError
		if !errors.As(err, &ae) {
			t.Fatal(err)
		}
		return ae.StatusCode
	}
	return http.StatusAccepted
}

// finalizerParts counts the finalizer calls and results stored for req,
// and whether its ledger holds a candidate.
func finalizerParts(t *testing.T, env *testenv.Env, req uuid.UUID) (calls, results int, candidate bool) {
	t.Helper()
	err := env.Pool.QueryRow(t.Context(), `SELECT
		(SELECT count(*) FROM chat_messages m, jsonb_array_elements(m.content) p
		  WHERE m.structured_request_id = $1 AND p->>'type' = 'tool-call' AND p->>'tool_name' = $2),
		(SELECT count(*) FROM chat_messages m, jsonb_array_elements(m.content) p
		  WHERE m.structured_request_id = $1 AND p->>'type' = 'tool-result' AND p->>'tool_name' = $2),
		(SELECT candidate IS NOT NULL FROM structured_requests WHERE request_id = $1)`, req, runner.FinalizerName).
		Scan(&calls, &results, &candidate)
	if err != nil {
		t.Fatal(err)
	}
	return calls, results, candidate
}

// notPublished checks that value appears in no client-visible message of
// chat (a receipt's value or content, a finalizer call's arguments).
func notPublished(t *testing.T, c *client.Client, chat uuid.UUID, value string) {
	t.Helper()
	h, err := c.ListMessages(t.Context(), chat, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(h.Messages)
	if strings.Contains(string(b), value) {
		t.Fatalf("the interrupted value %s reached the history: %s", value, b)
	}
}

const raceValue = `{"command":"make race-test","tags":["one","two","three"]}`

func raceEnv(t *testing.T, hooked bool) (*testenv.Env, *runner.TestSignals) {
	t.Helper()
	ts := &runner.TestSignals{}
	o := testenv.Options{Runner: runner.Options{TestSignals: ts},
		Mock: mockllm.Options{Script: &mockllm.Script{Steps: []mockllm.Step{{Value: json.RawMessage(raceValue)}}}}}
	if hooked {
		srv := httptest.NewServer(&hookServer{decisions: []hooks.Decision{{Decision: "finish"}}})
		t.Cleanup(srv.Close)
		o.Hooks = []hooks.Config{{URL: srv.URL}}
	}
	return testenv.New(t, o), ts
}

func TestInterruptWhileTheFinalizerStreams(t *testing.T) {
	t.Parallel()
	env, ts := raceEnv(t, false)
	ts.FinalizerFragment.Init(t)
	c := env.Client("alice")
	chat, req := create(t, c, reportSchema)
	reach(t, &ts.FinalizerFragment) // a fragment of the arguments is in, the rest is not
	if code := interrupt(t, c, chat); code != http.StatusAccepted {
		t.Fatalf("interrupt: HTTP %d", code)
	}
	// Not released by the test: the interrupt cuts the step, whose end
	// lets the worker go.
	if res := wait(t, c, req); res.Status != client.OutputCancelled || res.Error == nil || res.Error.Code != client.CodeInterrupted {
		t.Fatalf("result %+v", res)
	}
	settled(t, env, chat, req, client.OutputCancelled, client.CodeInterrupted)
	if calls, results, candidate := finalizerParts(t, env, req); calls != 0 || results != 0 || candidate {
		t.Fatalf("the half-streamed call was kept: %d calls, %d results, candidate %v", calls, results, candidate)
	}
	notPublished(t, c, chat, "make race-test")
	if n := providerCalls(env); n != 1 {
		t.Fatalf("%d provider calls", n)
	}
}

// The value is validated (and, with a stop hook, vetted) and its receipt
// is about to be committed when the interrupt commits first: the receipt's
// commit misses the fence, and the worker cancels the request instead.
func TestInterruptBetweenValidationAndReceipt(t *testing.T) {
	t.Parallel()
	for _, hooked := range []bool{false, true} {
		name := map[bool]string{false: "no hooks", true: "a stop hook"}[hooked]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env, ts := raceEnv(t, hooked)
			ts.BeforePublish.Init(t)
			c := env.Client("alice")
			chat, req := create(t, c, reportSchema)
			reach(t, &ts.BeforePublish)
			if code := interrupt(t, c, chat); code != http.StatusAccepted {
				t.Fatalf("interrupt: HTTP %d", code)
			}
			ts.BeforePublish.Release()
			if res := wait(t, c, req); res.Status != client.OutputCancelled || res.Error == nil || res.Error.Code != client.CodeInterrupted {
				t.Fatalf("result %+v", res)
			}
			settled(t, env, chat, req, client.OutputCancelled, client.CodeInterrupted)
			calls, results, candidate := finalizerParts(t, env, req)
			if candidate {
				t.Fatal("the cancelled request kept its candidate")
			}
			if !hooked && (calls != 0 || results != 0) {
				// The step, its acknowledgement and the receipt were one
				// commit, which the interrupt beat: none of it is stored.
				t.Fatalf("%d finalizer calls, %d results stored", calls, results)
			}
			if !hooked {
				notPublished(t, c, chat, "make race-test")
			}
		})
	}
}

// The receipt is committed and the worker not yet past it when the
// interrupt comes: the request stays succeeded. Alone, the chat is idle and
// the interrupt is refused; with a request queued behind, the interrupt
// cancels that one, which the commit had already started.
func TestInterruptAfterTheReceipt(t *testing.T) {
	t.Parallel()
	t.Run("alone", func(t *testing.T) {
		t.Parallel()
		env, ts := raceEnv(t, false)
		ts.AfterPublish.Init(t)
		c := env.Client("alice")
		chat, req := create(t, c, reportSchema)
		reach(t, &ts.AfterPublish)
		if code := interrupt(t, c, chat); code != http.StatusConflict {
			t.Fatalf("interrupt of an idle chat: HTTP %d, want 409", code)
		}
		ts.AfterPublish.Release()
		if res := wait(t, c, req); res.Status != client.OutputSucceeded || !jsonEqual(t, res.Value, json.RawMessage(raceValue)) {
			t.Fatalf("result %+v", res)
		}
		settled(t, env, chat, req, client.OutputSucceeded, "")
	})
	t.Run("a request queued", func(t *testing.T) {
		t.Parallel()
		env, ts := raceEnv(t, false)
		ts.BeforePublish.Init(t)
		ts.AfterPublish.Init(t)
		c := env.Client("alice")
		chat, req := create(t, c, reportSchema)
		reach(t, &ts.BeforePublish) // the turn runs: the next request queues
		sent, err := c.SendMessage(t.Context(), chat, client.SendMessageRequest{
			Content: []client.MessagePart{client.TextPart("And again.")}, ResponseFormat: structured(reportSchema)})
		if err != nil || !sent.Queued {
			t.Fatalf("send: %+v %v", sent, err)
		}
		next := *sent.QueuedMessage.StructuredOutputRequestID
		ts.BeforePublish.Release()
		reach(t, &ts.AfterPublish) // the receipt and the promotion of the next request are committed
		if code := interrupt(t, c, chat); code != http.StatusAccepted {
			t.Fatalf("interrupt: HTTP %d", code)
		}
		ts.AfterPublish.Release()
		if res := wait(t, c, req); res.Status != client.OutputSucceeded || !jsonEqual(t, res.Value, json.RawMessage(raceValue)) {
			t.Fatalf("first result %+v", res)
		}
		if res := wait(t, c, next); res.Status != client.OutputCancelled || res.Error == nil || res.Error.Code != client.CodeInterrupted {
			t.Fatalf("second result %+v", res)
		}
		settled(t, env, chat, next, client.OutputCancelled, client.CodeInterrupted)
		oneReceipt(t, env, req)
	})
}
