package runner_test

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

// Issue 33, item 7: every number within float64's range is accepted and
// published as an equal number. Before, a schema with "maximum": 1e100 was
// refused and the finalizer values [123e65] and 1.5e300 were rejected at
// every attempt ("68 characters in plain decimal notation, more than the
// limit of 64"), the request failing after 3 wasted model calls.
func TestNumbersEveryFloat64(t *testing.T) {
	t.Parallel()
	lits := []string{"123e65", "1.5e300", "0.0000001e-300", "-4.9406564584124654e-324", "1.7976931348623157e308", "1.50e2", "-0"}
	script := &mockllm.Script{Steps: []mockllm.Step{{Value: json.RawMessage(`[` + strings.Join(lits, ",") + `]`)}}}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	chat, req := create(t, c, `{"type":"array","items":{"type":"number","maximum":1.7976931348623157e308,"minimum":-1e300}}`)
	res := wait(t, c, req)
	if res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v %+v", res, res.Error)
	}
	settled(t, env, chat, req, client.OutputSucceeded, "")
	dec := json.NewDecoder(bytes.NewReader(res.Value))
	dec.UseNumber()
	var got []json.Number
	if err := dec.Decode(&got); err != nil || len(got) != len(lits) {
		t.Fatalf("published %s: %v; requests %d", res.Value, err, len(env.Mock.Requests()))
	}
	for i, lit := range lits {
		a, _ := new(big.Rat).SetString(lit)
		b, ok := new(big.Rat).SetString(string(got[i]))
		if !ok || a.Cmp(b) != 0 {
			t.Errorf("published %.40s for %s", got[i], lit)
		}
	}
	if n := providerCalls(env); n != 1 {
		t.Fatalf("%d provider calls, want 1", n)
	}
}

// Issue 33, item 7: a number beyond float64's range (1e400) is refused to
// the model with a message naming the number and its path, counted like
// any rejection (a model that repeats it ends the request after three),
// and the failure tells the user which number could not be stored.
func TestNumberBeyondFloat64Refused(t *testing.T) {
	t.Parallel()
	bad := mockllm.Step{Value: json.RawMessage(`{"n":[1,1e400]}`)}
	script := &mockllm.Script{Steps: []mockllm.Step{bad, bad, bad, bad}}
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: script}})
	c := env.Client("alice")
	chat, req := create(t, c, `{"type":"object","properties":{"n":{"type":"array","items":{"type":"number"}}}}`)
	res := wait(t, c, req)
	if res.Status != client.OutputFailed || res.Error == nil {
		t.Fatalf("result %+v", res)
	}
	settled(t, env, chat, req, client.OutputFailed, res.Error.Code)
	const named = "number 1e400 is beyond the range of a 64-bit float"
	if !strings.Contains(res.Error.Message, named) || !strings.Contains(res.Error.Message, "/output/n/1") {
		t.Errorf("failure %q does not name the number and its path", res.Error.Message)
	}
	if len(res.Attempts) != 3 || res.Attempts[2].Errors[0].Keyword != "unstorable" ||
		!strings.Contains(res.Attempts[2].Errors[0].Message, named) {
		t.Errorf("attempts %+v", res.Attempts)
	}
	reqs := env.Mock.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d provider calls, want 3", len(reqs))
	}
	var told string
	for _, m := range reqs[1].Messages {
		if m.Role == "tool" {
			told += m.Content
		}
	}
	if !strings.Contains(told, named) || !strings.Contains(told, "/n/1") {
		t.Errorf("the model was told %q", told)
	}
	var rejections int
	if err := env.Pool.QueryRow(t.Context(), `SELECT rejections FROM structured_requests WHERE request_id = $1`, req).Scan(&rejections); err != nil || rejections != 3 {
		t.Fatalf("rejections %d %v, want 3", rejections, err)
	}
}
