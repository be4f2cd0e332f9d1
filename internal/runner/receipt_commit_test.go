package runner_test

import (
	"net/http/httptest"
	"testing"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/hooks"
	"github.com/chatd/chatd/internal/testenv"
)

// revisions returns the revision (the chat's snapshot_version when the row
// was written, so one per transaction) of the request's assistant step,
// finalizer result and receipt.
func revisions(t *testing.T, env *testenv.Env, req uuid.UUID) (step, result, receipt int64) {
	t.Helper()
	rows, err := env.Pool.Query(t.Context(), `SELECT role, kind, revision FROM chat_messages
		WHERE structured_request_id = $1 AND (role IN ('assistant', 'tool')) ORDER BY id`, req)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var role, kind string
		var rev int64
		if err := rows.Scan(&role, &kind, &rev); err != nil {
			t.Fatal(err)
		}
		switch {
		case kind == "receipt":
			receipt = rev
		case role == "tool":
			result = rev
		case role == "assistant" && kind == "message":
			step = rev
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if step == 0 || result == 0 || receipt == 0 {
		t.Fatalf("step %d, result %d, receipt %d: a row is missing", step, result, receipt)
	}
	return step, result, receipt
}

// Without stop hooks, a finalizer-only step, its value's acknowledgement
// and its receipt are one transaction (the server validates the value;
// nothing could change the candidate between them); with a hook, the hook
// is asked in between, so the receipt is a later one.
func TestValidValueAndReceiptCommitTogether(t *testing.T) {
	t.Parallel()
	t.Run("no hooks", func(t *testing.T) {
		t.Parallel()
		env := testenv.New(t, testenv.Options{})
		c := env.Client("alice")
		chat, req := create(t, c, reportSchema)
		if res := wait(t, c, req); res.Status != client.OutputSucceeded {
			t.Fatalf("result %+v", res)
		}
		settled(t, env, chat, req, client.OutputSucceeded, "")
		step, result, receipt := revisions(t, env, req)
		if result != receipt || step != result {
			t.Fatalf("revisions: step %d, result %d, receipt %d; want the step, its result and the receipt in one transaction", step, result, receipt)
		}
		if n := providerCalls(env); n != 1 {
			t.Fatalf("%d provider calls", n)
		}
	})
	t.Run("a hook", func(t *testing.T) {
		t.Parallel()
		hs := &hookServer{decisions: []hooks.Decision{{Decision: "finish"}}}
		hookSrv := httptest.NewServer(hs)
		defer hookSrv.Close()
		env := testenv.New(t, testenv.Options{Hooks: []hooks.Config{{URL: hookSrv.URL}}})
		c := env.Client("alice")
		chat, req := create(t, c, reportSchema)
		if res := wait(t, c, req); res.Status != client.OutputSucceeded {
			t.Fatalf("result %+v", res)
		}
		settled(t, env, chat, req, client.OutputSucceeded, "")
		if _, result, receipt := revisions(t, env, req); result >= receipt {
			t.Fatalf("revisions: result %d, receipt %d; want the hook between them", result, receipt)
		}
		if n := len(hs.calls()); n != 1 {
			t.Fatalf("hook called %d times", n)
		}
	})
}
