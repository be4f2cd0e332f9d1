package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mockllm"
)

// tagRE finds the tag every user message of these tests starts with.
var tagRE = regexp.MustCompile(`\[c\d+ m\d+\]`)

// chaosStep answers a provider request from the seed, the tag of the
// conversation's latest tagged user message and the number of assistant
// steps since it, so the answer does not depend on which process asks or
// when: a read_file call, an invalid value, a text-only ending, or (the
// default, and always from the fifth step on) a valid value — plain text in
// an ordinary turn.
func chaosStep(seed uint64) func(*mockllm.Request) (mockllm.Step, bool) {
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
		structured := r.Tool(mockllm.FinalizerTool) != nil
		switch h := hash64(seed, tag, step) % 100; {
		case h < 20:
			return mockllm.Step{ToolCalls: []mockllm.ToolCall{{Name: "read_file", Arguments: `{"path":"notes.txt"}`}}}, true
		case structured && h < 38:
			return mockllm.Step{Invalid: true}, true
		case structured && h < 46:
			return mockllm.Step{TextOnly: true, Text: "Let me think about it."}, true
		}
		return mockllm.Step{}, false
	}
}

// killPoint is where one SIGKILL lands.
type killPoint struct {
	// Phase: "request" (a provider call has arrived and is not answered),
	// "stream" (before chunk Chunk of the streamed answer), "response"
	// (Delay after the answer was fully sent: the step is being committed)
	// or "timed" (Delay after the previous restart, anywhere: tools,
	// receipts, promotion, API calls).
	Phase string
	// Skip provider requests pass before the one the point applies to.
	Skip  int
	Chunk int
	Delay time.Duration
	// Slot is the server a timed kill hits.
	Slot int
}

func (p killPoint) String() string {
	switch p.Phase {
	case "stream":
		return fmt.Sprintf("stream(skip %d, chunk %d)", p.Skip, p.Chunk)
	case "response":
		return fmt.Sprintf("response(skip %d, +%s)", p.Skip, p.Delay)
	case "timed":
		return fmt.Sprintf("timed(slot %d, +%s)", p.Slot, p.Delay)
	}
	return fmt.Sprintf("request(skip %d)", p.Skip)
}

// planKill draws the next kill point; the same number of draws every time,
// so a seed gives the same plan.
func planKill(rng *rand.Rand) killPoint {
	p := killPoint{Skip: rng.IntN(4), Chunk: 1 + rng.IntN(4), Slot: rng.IntN(2)}
	switch rng.IntN(4) {
	case 0:
		p.Phase = "request"
	case 1:
		p.Phase = "stream"
	case 2:
		p.Phase, p.Delay = "response", time.Duration(rng.IntN(40))*time.Millisecond
	default:
		p.Phase, p.Delay = "timed", time.Duration(100+rng.IntN(900))*time.Millisecond
	}
	return p
}

// killAt draws kill point i, waits for it, SIGKILLs the server there and
// starts it again. ok is false when the point fell on a request of a process
// already gone: nothing was killed, draw again.
func (c *cluster) killAt(rng *rand.Rand, tr *trigger, i int) (p killPoint, slot int, ok bool) {
	c.t.Helper()
	p = planKill(rng)
	slot = p.Slot
	if p.Phase == "timed" {
		time.Sleep(p.Delay) // the kill point itself: a moment, not a synchronisation
	} else {
		tr.arm(p)
		var f firing
		select {
		case f = <-tr.fired:
		case <-time.After(90 * time.Second):
			c.t.Fatalf("kill %d (%s): no provider request reached it in 90s", i, p)
		}
		if slot = c.slotOf(f.proc); slot < 0 {
			return p, slot, false
		}
		if f.gemini {
			c.geminiKills.Add(1)
		}
		if p.Phase == "response" {
			time.Sleep(p.Delay) // as above: where in the commit the kill lands
		}
	}
	c.server(slot).kill()
	c.start(slot)
	return p, slot, true
}

// trigger picks the provider request an armed kill point applies to and
// reports which process made it when the point is reached.
type trigger struct {
	mu    sync.Mutex
	armed *killPoint
	skip  int
	fired chan firing
}

type firing struct {
	proc   string
	p      killPoint
	gemini bool // the request was a Gemini call
}

type targetKey struct{}

// target is the request a kill point applies to.
type target struct {
	tr     *trigger
	proc   string
	p      killPoint
	gemini bool
	once   sync.Once
}

func (tg *target) fire() { tg.once.Do(func() { tg.tr.fired <- firing{tg.proc, tg.p, tg.gemini} }) }

func newTrigger() *trigger { return &trigger{fired: make(chan firing, 1)} }

func (tr *trigger) arm(p killPoint) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.armed, tr.skip = &p, p.Skip
}

func (tr *trigger) take(proc string, gemini bool) *target {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.armed == nil {
		return nil
	}
	if tr.skip > 0 {
		tr.skip--
		return nil
	}
	tg := &target{tr: tr, proc: proc, p: *tr.armed, gemini: gemini}
	tr.armed = nil
	return tg
}

// wrap marks the target request; a point not reached inside the mock (an
// answer with fewer chunks) fires when the answer is complete.
func (tr *trigger) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var tg *target
		if r.Method == http.MethodPost {
			tg = tr.take(r.Header.Get(procHeader), strings.HasPrefix(r.URL.Path, "/v1beta/models/"))
		}
		if tg != nil {
			r = r.WithContext(context.WithValue(r.Context(), targetKey{}, tg))
		}
		h.ServeHTTP(w, r)
		if tg != nil {
			tg.fire()
		}
	})
}

// hold fires the target's point and holds the request until the process
// that made it is gone (its connection closes).
func hold(ctx context.Context, phase string, chunk int) error {
	tg, _ := ctx.Value(targetKey{}).(*target)
	if tg == nil || tg.p.Phase != phase || (phase == "stream" && chunk != tg.p.Chunk) {
		return nil
	}
	tg.fire()
	<-ctx.Done()
	return ctx.Err()
}

// cluster is a set of server processes sharing one database, restarted
// under new process names as they are killed.
type cluster struct {
	t       *testing.T
	db      string
	mockURL string
	ws      string
	workers int
	// hookURL, when set, is a webhook receiver every server delivers to.
	hookURL string
	token   string
	// users, when set, are the tokens of more users: driver id acts as
	// users[id%len(users)]. owners maps each chat a driver created to its
	// user's token, so that any helper reaches it as its owner.
	users  []string
	owners sync.Map
	// serverErrors counts answers with a 5xx status, by method and path.
	serverErrors sync.Map

	mu    sync.Mutex
	slots []*server
	all   []*server
	procs map[string]int // process name -> slot
	gen   int

	// schema, when set, is what the drivers' structured requests ask for
	// (default outputSchema).
	schema string
	// geminiShare is the percentage of the drivers' chats created on
	// geminiModel; geminiKills counts kill points that landed during a
	// Gemini call (not timed ones).
	geminiShare int
	geminiKills atomic.Int64
}

func (c *cluster) format() *client.ResponseFormat {
	f := structured()
	if c.schema != "" {
		f.JSONSchema.Schema = json.RawMessage(c.schema)
	}
	return f
}

func (c *cluster) start(slot int) {
	c.mu.Lock()
	c.gen++
	name := fmt.Sprintf("s%dg%d", slot, c.gen)
	c.mu.Unlock()
	cfg := writeConfig(c.t, c.mockURL, c.ws, name)
	if c.hookURL != "" {
		withWebhook(c.t, cfg, c.hookURL)
	}
	s := startServer(c.t, serverOpts{Name: name, DB: c.db, Config: cfg, Workers: c.workers, Quiet: true})
	c.mu.Lock()
	defer c.mu.Unlock()
	if slot == len(c.slots) {
		c.slots = append(c.slots, s)
	} else {
		c.slots[slot] = s
	}
	c.procs[name] = slot
	if len(c.all) == 0 {
		c.t.Cleanup(c.report)
	}
	c.all = append(c.all, s)
}

// report shows, when the test failed, the warnings and errors of every
// process and the end of the latest processes' logs.
func (c *cluster) report() {
	if !c.t.Failed() {
		return
	}
	c.t.Logf("server warnings and errors:\n%s", c.logSummary())
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.all[max(0, len(c.all)-4):] {
		c.t.Logf("chatd %s log (%s), last lines:\n%s", s.name, s.LogPath, tailFile(s.LogPath, 20))
	}
}

// logSummary sums up the warnings and errors of every process.
func (c *cluster) logSummary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, s := range c.all {
		if sum := logSummary(s.LogPath); sum != "" {
			b.WriteString(s.name + ":\n" + sum + "\n")
		}
	}
	return b.String()
}

// slotOf is the slot whose current process has this name (-1: a process
// already replaced).
func (c *cluster) slotOf(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	slot, ok := c.procs[name]
	if !ok || c.slots[slot].name != name {
		return -1
	}
	return slot
}

func (c *cluster) server(slot int) *server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slots[slot]
}

// client returns a client of one of the servers (it may be down: callers
// retry).
func (c *cluster) client(n uint64) *client.Client { return c.clientAs(c.token, n) }

// clientAs is client for another user's token; it counts 5xx answers.
func (c *cluster) clientAs(token string, n uint64) *client.Client {
	c.mu.Lock()
	s := c.slots[n%uint64(len(c.slots))]
	c.mu.Unlock()
	return client.New(s.URL, token, &http.Client{Timeout: 60 * time.Second, Transport: countingTransport{c}})
}

// chatClient is a client acting as the chat's owner. A chat whose create
// got no answer (its server killed first) has no recorded owner: the
// users' tokens are tried, and the one that sees the chat is recorded.
func (c *cluster) chatClient(chat uuid.UUID, n uint64) *client.Client {
	if tok, ok := c.owners.Load(chat); ok {
		return c.clientAs(tok.(string), n)
	}
	for _, tok := range c.users {
		if _, err := c.clientAs(tok, n).GetChat(context.Background(), chat); err == nil {
			c.owners.Store(chat, tok)
			return c.clientAs(tok, n)
		}
	}
	return c.client(n)
}

// userToken is the token driver id acts with.
func (c *cluster) userToken(id int) string {
	if len(c.users) == 0 {
		return c.token
	}
	return c.users[id%len(c.users)]
}

// countingTransport notes every 5xx answer of a server.
type countingTransport struct{ c *cluster }

func (ct countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && res.StatusCode >= 500 {
		n, _ := ct.c.serverErrors.LoadOrStore(fmt.Sprintf("%s %s: %d", r.Method, r.URL.Path, res.StatusCode), new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	return res, err
}

// serverErrorReport lists the 5xx answers the clients got.
func (c *cluster) serverErrorReport() []string {
	var out []string
	c.serverErrors.Range(func(k, v any) bool {
		out = append(out, fmt.Sprintf("%s (%d times)", k, v.(*atomic.Int64).Load()))
		return true
	})
	return out
}

// answer submits results for the client tool calls the chat waits for;
// a conflict or a lost answer is fine, the caller looks again.
func (c *cluster) answer(ctx context.Context, chat uuid.UUID, rng *rand.Rand) {
	cl := c.chatClient(chat, rng.Uint64())
	ch, err := cl.GetChat(ctx, chat)
	if err != nil || ch.Status != client.StatusRequiresAction {
		return
	}
	var results []client.ToolResult
	for _, call := range ch.PendingToolCalls {
		results = append(results, client.ToolResult{ToolCallID: call.ToolCallID, Output: json.RawMessage(`{"answer":"calm"}`)})
	}
	_, _ = cl.SubmitToolResults(ctx, chat, client.ToolResultsRequest{Results: results})
}

// slotClient is a client of whatever process serves the slot: its
// transport sends each request to the slot's current address, so a stream
// reconnects to the restarted server as it would through a load balancer.
func (c *cluster) slotClient(slot int) *client.Client {
	return client.New(fmt.Sprintf("http://slot%d", slot), c.token, &http.Client{Transport: slotTransport{c, slot}})
}

type slotTransport struct {
	c    *cluster
	slot int
}

func (st slotTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Host = strings.TrimPrefix(st.c.server(st.slot).URL, "http://")
	r.Host = r.URL.Host
	return http.DefaultTransport.RoundTrip(r)
}

// waitIdle polls the chat through the servers until it is idle, answering
// the client tool calls it waits for; false: ctx ended, or the chat was
// deleted.
func (c *cluster) waitIdle(ctx context.Context, chat uuid.UUID, rng *rand.Rand) bool {
	for ctx.Err() == nil {
		cl := c.chatClient(chat, rng.Uint64())
		ch, err := cl.GetChat(ctx, chat)
		if err == nil && (ch.Status == client.StatusWaiting || ch.Status == client.StatusError) {
			return true
		}
		if ae := (*client.APIError)(nil); errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound {
			return false
		}
		if err == nil && ch.Status == client.StatusRequiresAction {
			c.answer(ctx, chat, rng)
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond): // polling the servers for a state
		}
	}
	return false
}

// drive is one client: it opens a chat and, whenever the chat is idle,
// sends one message or two at once (the second queues), structured most of
// the time, sometimes interrupting the running turn, sometimes deleting the
// queued message again; half its chats declare a client tool, whose calls
// it answers. After a dozen messages it opens a new chat. Every message
// starts with a unique tag.
func (c *cluster) drive(ctx context.Context, id int, seed uint64, record func(input)) {
	rng := rand.New(rand.NewPCG(seed, uint64(id)))
	token := c.userToken(id)
	msg := 0
	next := func() (string, *client.ResponseFormat) {
		msg++
		var f *client.ResponseFormat
		if rng.IntN(100) < 80 {
			f = c.format()
		}
		return fmt.Sprintf("[c%d m%d] Report on the project.", id, msg), f
	}
	requestOf := func(m *client.ChatMessage, q *client.QueuedMessage) uuid.UUID {
		switch {
		case m != nil && m.StructuredOutputRequestID != nil:
			return *m.StructuredOutputRequestID
		case q != nil && q.StructuredOutputRequestID != nil:
			return *q.StructuredOutputRequestID
		}
		return uuid.Nil
	}
	// A refused connection sent nothing: the message is sent again
	// (to another server, after a pause). Any other error leaves the
	// message's fate unknown; it is recorded as such and not repeated.
	refused := func(err error) bool {
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
		return ctx.Err() == nil
	}
	for ctx.Err() == nil {
		var chat uuid.UUID
		for chat == uuid.Nil && ctx.Err() == nil {
			txt, f := next()
			req := client.CreateChatRequest{Content: text(txt), ResponseFormat: f}
			if rng.IntN(2) == 0 {
				req.DynamicTools = []client.DynamicTool{stormTool}
			}
			if c.geminiShare > 0 && rng.IntN(100) < c.geminiShare {
				req.Model = geminiModel
			}
			res, err := c.clientAs(token, rng.Uint64()).CreateChat(ctx, req)
			for refused(err) {
				res, err = c.clientAs(token, rng.Uint64()).CreateChat(ctx, req)
			}
			if err != nil {
				record(input{Text: txt})
				continue
			}
			chat = res.Chat.ID
			c.owners.Store(chat, token)
			record(input{Chat: chat, Text: txt, Request: requestOf(&res.Messages[0], nil), Known: true})
		}
		for sent := 1; sent < 12 && c.waitIdle(ctx, chat, rng); {
			n := 1
			if rng.IntN(100) < 40 {
				n = 2
			}
			for i := range n {
				txt, f := next()
				sent++
				req := client.SendMessageRequest{Content: text(txt), ResponseFormat: f}
				// The second of two usually arrives during the first's turn.
				action := rng.IntN(100)
				if i == 1 && action < 30 {
					req.BusyBehavior = client.BusyInterrupt // cancels the running turn
				}
				deleteIt := i == 1 && action >= 70
				res, err := c.chatClient(chat, rng.Uint64()).SendMessage(ctx, chat, req)
				for refused(err) {
					res, err = c.chatClient(chat, rng.Uint64()).SendMessage(ctx, chat, req)
				}
				if err != nil {
					record(input{Chat: chat, Text: txt})
					continue
				}
				in := input{Chat: chat, Text: txt, Request: requestOf(res.Message, res.QueuedMessage), Known: true}
				if q := res.QueuedMessage; q != nil && deleteIt {
					// Take it back while it waits (404: it was promoted first).
					_, err := c.chatClient(chat, rng.Uint64()).DeleteQueued(ctx, chat, q.ID)
					for refused(err) {
						_, err = c.chatClient(chat, rng.Uint64()).DeleteQueued(ctx, chat, q.ID)
					}
					var ae *client.APIError
					switch {
					case err == nil:
						in.Removed = removed
					case !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound:
						in.Removed = maybeRemoved
					}
				}
				record(in)
			}
		}
	}
}

// TestKillRestart SIGKILLs chatd servers at seeded points of structured
// turns and restarts them, while clients keep sending. Two servers share the
// database (so one keeps working while the other restarts); each kill
// point is drawn from the seed: while a provider call is unanswered, in the
// middle of a streamed answer, just after an answer (while its step is
// committed), or after a random delay. Then: every request is finished with
// exactly one receipt, no accepted message is lost or duplicated, and the
// checker is clean. CHATD_CRASH_KILLS sets the number of kill points (50 by
// default; `make crash-long` runs more), CHATD_CRASH_SEED replays a run.
func TestKillRestart(t *testing.T) {
	t.Parallel()
	seed := seedFor(t)
	kills := envInt(t, "CHATD_CRASH_KILLS", 50)
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))
	db := dbtest.NewURL(t)
	pool := openPool(t, db)

	tr := newTrigger()
	mock := mockllm.New(mockllm.Options{
		Latency:       15 * time.Millisecond,
		ChunkDelay:    3 * time.Millisecond,
		StepFor:       stormStep(seed),
		BeforeRespond: func(ctx context.Context, _ *mockllm.Request) error { return hold(ctx, "request", 0) },
		BeforeChunk:   func(ctx context.Context, _ *mockllm.Request, n int) error { return hold(ctx, "stream", n) },
	})
	mockSrv := httptest.NewServer(tr.wrap(mock))
	t.Cleanup(mockSrv.Close)

	// Every receipt is also delivered to a webhook receiver, whatever
	// the kills cut off (it answers every fourth POST 500).
	recv := newHookReceiver(t)
	hookSrv := httptest.NewServer(recv)
	t.Cleanup(hookSrv.Close)

	c := &cluster{t: t, db: db, mockURL: mockSrv.URL, ws: workspace(t), workers: 2, procs: map[string]int{}, hookURL: hookSrv.URL,
		geminiShare: 50}
	c.start(0) // migrates
	c.token = newToken(t, db, "alice")
	c.start(1)

	sent := &journal{}
	ctx, stopDrivers := context.WithCancel(context.Background())
	defer stopDrivers()
	var wg sync.WaitGroup
	for id := range 8 {
		wg.Go(func() { c.drive(ctx, id, seed, sent.record) })
	}

	// One more client follows its chat with a stream through slot 0,
	// which reconnects every time that server is killed and restarted.
	followRNG := rand.New(rand.NewPCG(seed, 99))
	fol := follow(t, ctx, &wg, c.slotClient(0), 99, func(ctx context.Context, chat uuid.UUID) bool {
		return c.waitIdle(ctx, chat, followRNG)
	}, sent.record)

	start := time.Now()
	phases := map[string]int{}
	slot0Kills := 0
	for i := 0; i < kills; {
		p, slot, ok := c.killAt(rng, tr, i)
		if !ok {
			continue
		}
		phases[p.Phase]++
		if slot == 0 {
			slot0Kills++
		}
		i++
	}
	chaos := time.Since(start)
	stopDrivers()
	wg.Wait()

	answerRNG := rand.New(rand.NewPCG(seed, 98))
	settle(t, pool, 120*time.Second, func(chat uuid.UUID) { c.answer(context.Background(), chat, answerRNG) })
	seen := sent.requests()
	known := 0
	for _, in := range sent.inputs {
		if in.Known {
			known++
		}
	}
	outcomes := auditRequests(t, pool, seen)
	auditInputs(t, pool, sent.inputs)
	fol.verify()
	recv.verifyDelivered(t, pool)
	if slot0Kills > 0 && fol.stream.Reconnects == 0 {
		t.Errorf("slot 0 was killed %d times, but the stream through it never reconnected", slot0Kills)
	}
	if out, code := runChatd(t, "check", "--database-url", db); code != 0 || !strings.HasSuffix(out, " 0 violations\n") {
		t.Errorf("chatd check: exit %d\n%s", code, out)
	}
	if testing.Verbose() {
		t.Logf("server warnings and errors:\n%s", c.logSummary())
	}
	var toolResults int
	_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM chat_messages WHERE role = 'tool' AND content::text LIKE '%calm%'`).Scan(&toolResults)
	gemini := geminiAudit(t, pool, mock, kills, phases["timed"], c.geminiKills.Load())
	t.Logf("%d kills in %s (%v); %d messages sent (%d accepted), %d structured requests: %s; %d provider calls, %d client tool results; %s",
		kills, chaos.Round(time.Millisecond), phases, len(sent.inputs), known, len(seen), outcomeSummary(outcomes), len(mock.Requests()), toolResults, gemini)
	if kills > 0 && len(seen) < kills/2 {
		t.Errorf("only %d structured requests were accepted during %d kills: the test did little work", len(seen), kills)
	}
}

// attemptsSpentMessage matches the receipt of a turn whose provider attempts
// were all spent without a committed step (runner's crash-loop guard).
const attemptsSpentMessage = "no answer of the model could be completed and stored in % attempts"

// geminiAudit checks the Gemini share of a kill run: kills landed during
// Gemini calls, Gemini structured requests succeeded, and none failed on
// the provider (the mock refuses a conversation whose thought signatures
// were lost or altered, which would end a request in provider_error).
func geminiAudit(t *testing.T, pool *pgxpool.Pool, mock *mockllm.Server, kills, timed int, geminiKills int64) string {
	t.Helper()
	var calls, signed int
	for _, r := range mock.Requests() {
		if r.Format == mockllm.FormatGemini {
			calls++
			for _, m := range r.Messages {
				if m.Signature != "" {
					signed++
				}
			}
		}
	}
	// A chat killed during its step as many times as the runner allows
	// attempts ends in provider_error by the crash-loop guard: that is the
	// kills' doing, not the signatures', so it is counted apart.
	var succeeded, providerErrors, spent int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE r.status = 'succeeded'),
			count(*) FILTER (WHERE r.error_code = 'provider_error' AND r.error_message NOT LIKE $2),
			count(*) FILTER (WHERE r.error_code = 'provider_error' AND r.error_message LIKE $2)
		FROM structured_requests r JOIN chats c ON c.id = r.chat_id WHERE c.model = $1`,
		geminiModel, attemptsSpentMessage).Scan(&succeeded, &providerErrors, &spent); err != nil {
		t.Fatal(err)
	}
	if kills-timed >= 10 && geminiKills == 0 {
		t.Errorf("no kill point landed during a Gemini call (%d kills on calls)", kills-timed)
	}
	if kills > 0 && succeeded == 0 {
		t.Errorf("no Gemini structured request succeeded")
	}
	if providerErrors > 0 {
		t.Errorf("%d Gemini structured requests failed with provider_error", providerErrors)
	}
	return fmt.Sprintf("gemini: %d calls (%d replayed signed calls), %d kills during them, %d requests succeeded, %d failed by the kills spending their attempts",
		calls, signed, geminiKills, succeeded, spent)
}
