package httpapi_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

// TestLongPollWokenInProcessAnswersAsARead: a long poll woken by a finish
// that its own process committed answers with the request as the commit
// left it, not read again (TestTurnTransactionBudget counts the reads);
// the answer is byte for byte what a read after the commit gives, for a
// succeeded receipt with its usage and for a failed one with its attempts.
func TestLongPollWokenInProcessAnswersAsARead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script *mockllm.Script
		want   client.RequestStatus
	}{
		{"succeeded", nil, client.OutputSucceeded},
		{"failed", &mockllm.Script{Steps: []mockllm.Step{{Invalid: true}}, Then: mockllm.ThenRepeat}, client.OutputFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHolder("hold")
			t.Cleanup(h.Release)
			signals := &httpapi.TestSignals{}
			signals.LongPoll.Waiting.Init()
			env := testenv.New(t, testenv.Options{Mock: mockllm.Options{BeforeRespond: h.hook, Script: tc.script}, APISignals: signals})
			c := env.Client("alice")
			token := env.Token("alice")
			chat, err := c.CreateChat(t.Context(), client.CreateChatRequest{Content: text("hold this turn"), ResponseFormat: schemaFormat()})
			if err != nil {
				t.Fatal(err)
			}
			h.waitEntered(t)
			path := "/api/v1/structured-outputs/" + chat.Messages[0].StructuredOutputRequestID.String()
			polled := make(chan apiResult, 1)
			go func() { polled <- call(t, env, token, "GET", path+"?wait=60s", "") }()
			// Released once the long poll waits on the request.
			select {
			case <-signals.LongPoll.Waiting.C():
			case res := <-polled:
				t.Fatalf("the long poll answered before the finish: %d %s", res.status, res.body)
			case <-t.Context().Done():
				t.Fatal(t.Context().Err())
			}
			h.Release()
			woken := <-polled
			read := call(t, env, token, "GET", path, "")
			if woken.status != 200 || read.status != 200 || !bytes.Equal(woken.body, read.body) {
				t.Fatalf("long poll %d %s\nread after %d %s", woken.status, woken.body, read.status, read.body)
			}
			got, err := c.GetStructuredOutput(t.Context(), *chat.Messages[0].StructuredOutputRequestID, 0)
			if err != nil || got.Status != tc.want || got.Usage == nil || (tc.want == client.OutputFailed) != (len(got.Attempts) > 0) {
				t.Fatalf("result %+v %v, want %s with usage (and attempts when failed)", got, err, tc.want)
			}
		})
	}
}

// TestLongPollOfARequestAdmittedHere: a long poll of a request this process
// admitted does not read it while it is pending (the hub knows it is), so
// one that times out reads it then, and answers byte for byte as a read;
// once the finish is told (a worker here) or announced (a worker of another
// replica), a new long poll answers at once, not after its wait.
func TestLongPollOfARequestAdmittedHere(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	for _, tc := range []struct {
		name      string
		elsewhere bool
	}{{"finished here", false}, {"finished by another replica", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHolder("hold")
			t.Cleanup(h.Release)
			api := testenv.OnPool(t, pool, testenv.Options{Mock: mockllm.Options{BeforeRespond: h.hook}, NoRunner: tc.elsewhere})
			if tc.elsewhere {
				testenv.OnPool(t, pool, testenv.Options{Mock: mockllm.Options{BeforeRespond: h.hook}})
			}
			c := api.Client("alice")
			token := api.Token("alice")
			chat, err := c.CreateChat(t.Context(), client.CreateChatRequest{Content: text("hold this turn"), ResponseFormat: schemaFormat()})
			if err != nil {
				t.Fatal(err)
			}
			h.waitEntered(t)
			path := "/api/v1/structured-outputs/" + chat.Messages[0].StructuredOutputRequestID.String()
			timedOut := call(t, api, token, "GET", path+"?wait=50ms", "")
			read := call(t, api, token, "GET", path, "")
			if timedOut.status != 200 || !bytes.Equal(timedOut.body, read.body) || !bytes.Contains(read.body, []byte(`"status":"pending"`)) {
				t.Fatalf("timed out %d %s\nread %d %s", timedOut.status, timedOut.body, read.status, read.body)
			}
			h.Release()
			if res, err := c.WaitStructuredOutput(t.Context(), *chat.Messages[0].StructuredOutputRequestID); err != nil || res.Status != client.OutputSucceeded {
				t.Fatalf("result %+v %v", res, err)
			}
			start := time.Now()
			again := call(t, api, token, "GET", path+"?wait=20s", "")
			if took := time.Since(start); again.status != 200 || took > 10*time.Second || !bytes.Contains(again.body, []byte(`"status":"succeeded"`)) {
				t.Fatalf("a long poll after the finish took %s: %d %s", took, again.status, again.body)
			}
		})
	}
}
