package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mockllm"
)

// hostileSchema is outputSchema with a plain number, where the model can
// put numbers jsonb expands.
const hostileSchema = `{"type":"object","properties":{"title":{"type":"string","minLength":1},` +
	`"count":{"type":"integer","minimum":0,"maximum":99},"ratio":{"type":"number"}},` +
	`"required":["title","count"],"additionalProperties":false}`

// hugeText is more assistant text than one step may hold (1 MiB).
var hugeText = strings.Repeat("flood é ", 1<<20/9*11/10)

// hostileKind is one kind of hostile output.
type hostileKind struct {
	name string
	// lookup, structured: the kind needs the client tool, the finalizer.
	lookup, structured bool
	step               mockllm.Step
}

func hostileCall(id, name, args string) mockllm.ToolCall {
	return mockllm.ToolCall{ID: id, Name: name, Arguments: args}
}

// hostileKinds are the kinds of hostile model output: numbers jsonb
// cannot store in a server tool's, a client tool's or the finalizer's
// arguments (item 1), duplicate tool-call ids within a step, across two
// server calls, two client calls or one of each (item 2; the same id in
// every chat, on purpose: ids are per step), read_file on a FIFO (item 3),
// values with numbers jsonb expands (item 4), and more text than a step may
// hold (item 5).
var hostileKinds = []hostileKind{
	{name: "unstorable server args", step: mockllm.Step{ToolCalls: []mockllm.ToolCall{hostileCall("", "read_file", `{"path":"notes.txt","n":1e-999999}`)}}},
	{name: "unstorable client args", lookup: true, step: mockllm.Step{ToolCalls: []mockllm.ToolCall{hostileCall("", stormTool.Name, `{"q":1e999999}`)}}},
	{name: "unstorable value", structured: true, step: mockllm.Step{Value: json.RawMessage(`{"title":"inf","count":1e999999}`)}},
	{name: "duplicate server ids", step: mockllm.Step{ToolCalls: []mockllm.ToolCall{hostileCall("dup", "read_file", `{"path":"notes.txt"}`), hostileCall("dup", "list_files", `{}`)}}},
	{name: "duplicate client ids", lookup: true, step: mockllm.Step{ToolCalls: []mockllm.ToolCall{hostileCall("dup", stormTool.Name, `{"q":"one"}`), hostileCall("dup", stormTool.Name, `{"q":"two"}`)}}},
	{name: "duplicate mixed ids", lookup: true, step: mockllm.Step{ToolCalls: []mockllm.ToolCall{hostileCall("dup", "read_file", `{"path":"notes.txt"}`), hostileCall("dup", stormTool.Name, `{"q":"mixed"}`)}}},
	{name: "fifo", step: mockllm.Step{ToolCalls: []mockllm.ToolCall{hostileCall("", "read_file", `{"path":"pipe"}`)}}},
	{name: "expanding number", structured: true, step: mockllm.Step{Value: json.RawMessage(`{"title":"big","count":1,"ratio":0e-500}`)}},
	{name: "plain-notation value", structured: true, step: mockllm.Step{Value: json.RawMessage(`{"title":"plain","count":5e1,"ratio":1.50e2}`)}},
	{name: "huge text", step: mockllm.Step{TextOnly: true, Text: hugeText}},
}

// hostileStep answers like stormStep, but a turn's first four steps are
// often hostile (hostileKinds). Each kind is served at least three times
// first, to the first steps it fits, so that every run has them all
// (allServed closes when each was served once); then
// two steps in three, drawn from the seed, the message tag and the step.
// A step's answer is kept, so a provider call retried after a kill gets
// the same one.
func hostileStep(seed uint64) (stepFor func(*mockllm.Request) (mockllm.Step, bool), servedCounts func() string, allServed <-chan struct{}) {
	calm := stormStep(seed)
	var mu sync.Mutex
	chosen := map[string]int{} // tag/step -> kind index, -1: calm
	served := map[string]int{}
	all := make(chan struct{})
	return func(r *mockllm.Request) (mockllm.Step, bool) {
			tag, step := "", 0
			for i := len(r.Messages) - 1; i >= 0; i-- {
				m := r.Messages[i]
				if m.Role == "assistant" {
					step++
				}
				if m.Role == "user" {
					if tag = tagRE.FindString(m.Content); tag != "" {
						break
					}
				}
			}
			if tag == "" || step >= 4 {
				return mockllm.Step{}, false
			}
			fits := func(k hostileKind) bool {
				return (!k.lookup || r.Tool(stormTool.Name) != nil) && (!k.structured || r.Tool(mockllm.FinalizerTool) != nil)
			}
			mu.Lock()
			defer mu.Unlock()
			key := fmt.Sprint(tag, "/", step)
			k, ok := chosen[key]
			if !ok {
				k = -1
				for i, kind := range hostileKinds {
					if served[kind.name] < 3 && fits(kind) {
						k = i
						break
					}
				}
				if h := hash64(seed, "hostile", tag, step); k < 0 && h%3 != 0 {
					if i := int(h/3) % len(hostileKinds); fits(hostileKinds[i]) {
						k = i
					}
				}
				chosen[key] = k
				if k >= 0 {
					served[hostileKinds[k].name]++
					if served[hostileKinds[k].name] == 1 && len(served) == len(hostileKinds) {
						close(all) // the last kind's first serving
					}
				}
			}
			if k < 0 {
				return calm(r)
			}
			return hostileKinds[k].step, true
		}, func() string {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Sprint(served)
		}, all
}

// TestHostileModelStorm is the hostile-model storm: a model mixing
// every kind of hostile output (hostileStep) into random steps of many
// chats of three users, while two servers are SIGKILLed at seeded points
// and restarted. Afterwards every structured request has exactly one
// receipt, no chat is left running or waiting (and `chatd check`, with its
// stuck_chat check, is clean), no client ever got a 5xx, and every hostile
// kind reached the servers and was screened: no stored text beyond the
// cap, placeholders with their marker, renamed ids, the FIFO refused.
// CHATD_HOSTILE_KILLS sets the number of kill points (8 by default).
func TestHostileModelStorm(t *testing.T) {
	t.Parallel()
	seed := seedFor(t)
	kills := envInt(t, "CHATD_HOSTILE_KILLS", 8)
	setup := time.Now()
	rng := rand.New(rand.NewPCG(seed, 0x686f7374))
	db := dbtest.NewURL(t)
	pool := openPool(t, db)

	tr := newTrigger()
	stepFor, served, allServed := hostileStep(seed)
	mock := mockllm.New(mockllm.Options{
		Latency:       10 * time.Millisecond,
		ChunkDelay:    2 * time.Millisecond,
		StepFor:       stepFor,
		BeforeRespond: func(ctx context.Context, _ *mockllm.Request) error { return hold(ctx, "request", 0) },
		BeforeChunk:   func(ctx context.Context, _ *mockllm.Request, n int) error { return hold(ctx, "stream", n) },
	})
	mockSrv := httptest.NewServer(tr.wrap(mock))
	t.Cleanup(mockSrv.Close)

	ws := workspace(t)
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, db: db, mockURL: mockSrv.URL, ws: ws, workers: 2, procs: map[string]int{}, schema: hostileSchema}
	c.start(0) // migrates
	for _, u := range []string{"ann", "bob", "cyd"} {
		c.users = append(c.users, newToken(t, db, u))
	}
	c.token = c.users[0]
	c.start(1)

	sent := &journal{}
	ctx, stopDrivers := context.WithCancel(context.Background())
	defer stopDrivers()
	var wg sync.WaitGroup
	for id := range 6 {
		wg.Go(func() { c.drive(ctx, id, seed, sent.record) })
	}

	start := time.Now()
	for i := 0; i < kills; {
		if _, _, ok := c.killAt(rng, tr, i); ok {
			i++
		}
	}
	chaos := time.Since(start)
	// On a fast machine the kill points can all pass before every kind
	// was served: the drivers go on until each one was.
	select {
	case <-allServed:
	case <-time.After(2 * time.Minute):
		t.Fatalf("hostile kinds served after 2 minutes: %s, want every kind", served())
	}
	stopDrivers()
	wg.Wait()

	answerRNG := rand.New(rand.NewPCG(seed, 98))
	settleStart := time.Now()
	settle(t, pool, 120*time.Second, func(chat uuid.UUID) { c.answer(context.Background(), chat, answerRNG) })
	settled := time.Since(settleStart)
	seen := sent.requests()
	outcomes := auditRequests(t, pool, seen)
	auditInputs(t, pool, sent.inputs)
	if out, code := runChatd(t, "check", "--database-url", db); code != 0 || !strings.HasSuffix(out, " 0 violations\n") {
		t.Errorf("chatd check: exit %d\n%s", code, out)
	}
	for _, e := range c.serverErrorReport() {
		t.Errorf("a client got a server error: %s", e)
	}

	// Every hostile kind reached a server and was screened.
	var owners, rejectedArgs, renamed, fifo, capped, longest int
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(DISTINCT owner_id) FROM chats),
		(SELECT count(*) FROM chat_messages m, jsonb_array_elements(m.content) p
		  WHERE m.role = 'assistant' AND p->>'type' = 'tool-call' AND p ? 'args_rejected' AND p->'args' = '{}'::jsonb),
		(SELECT count(*) FROM chat_messages m, jsonb_array_elements(m.content) p
		  WHERE m.role = 'assistant' AND p->>'type' = 'tool-call' AND p->>'tool_call_id' = 'dup_2'),
		(SELECT count(*) FROM chat_messages m, jsonb_array_elements(m.content) p
		  WHERE m.role = 'tool' AND p->>'type' = 'tool-result' AND p->>'result' LIKE '%not a regular file%'),
		(SELECT count(*) FROM chat_messages WHERE role = 'assistant' AND finish_reason = 'length'),
		(SELECT coalesce(max(octet_length(p->>'text')), 0) FROM chat_messages m, jsonb_array_elements(m.content) p
		  WHERE m.role = 'assistant' AND p->>'type' = 'text')`).
		Scan(&owners, &rejectedArgs, &renamed, &fifo, &capped, &longest)
	if err != nil {
		t.Fatal(err)
	}
	if owners != 3 || rejectedArgs == 0 || renamed == 0 || fifo == 0 || capped == 0 || longest > 1<<20 {
		t.Errorf("%d users' chats; %d rejected arguments, %d renamed ids, %d FIFO refusals, %d capped steps (longest text %d bytes)",
			owners, rejectedArgs, renamed, fifo, capped, longest)
	}
	t.Logf("setup %s, settled in %s; hostile steps served: %s", start.Sub(setup).Round(time.Millisecond), settled.Round(time.Millisecond), served())
	t.Logf("%d kills in %s; %d messages sent, %d structured requests: %s; %d provider calls; %d rejected arguments, %d renamed ids, %d FIFO refusals, %d capped steps",
		kills, chaos.Round(time.Millisecond), len(sent.inputs), len(seen), outcomeSummary(outcomes), len(mock.Requests()),
		rejectedArgs, renamed, fifo, capped)
	if kills > 0 && len(seen) < kills {
		t.Errorf("only %d structured requests were accepted during %d kills: the test did little work", len(seen), kills)
	}
}
