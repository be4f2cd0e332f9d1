package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/check"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/pglocal"
	"github.com/chatd/chatd/internal/prom"
)

// The failover tests' load: failoverTurns structured turns, each one
// provider call of failoverLatency (the first byte after most of it, then
// the finalizer's arguments streamed), through two replicas with leases of
// failoverLease.
const (
	failoverTurns   = 300
	failoverLatency = 2 * time.Second
	failoverLease   = 10 * time.Second
	failoverOutage  = 3 * time.Second
	failoverPace    = 20 * time.Millisecond // 50 turns a second
)

// pgPair is a primary and a streaming standby of it, clusters of the
// test's own (unix sockets, the postgres account when root), and the
// database chatd uses on them.
type pgPair struct {
	t                *testing.T
	primary, standby *pglocal.Cluster
}

// startPair starts a primary, creates the chatd database on it and makes a
// standby of it with pg_basebackup; with sync, commits wait for the
// standby (synchronous_standby_names, synchronous_commit on).
func startPair(t *testing.T, sync bool) *pgPair {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	settings := map[string]string{"fsync": "off", "max_connections": "200", "wal_sender_timeout": "5s"}
	var dirs [2]string
	for i := range dirs {
		d, err := os.MkdirTemp("", "chatd-failover-pg-")
		if err != nil {
			t.Fatal(err)
		}
		dirs[i] = d
		t.Cleanup(func() { _ = os.RemoveAll(d) })
	}
	p := &pgPair{t: t}
	var err error
	if p.primary, err = pglocal.Start(ctx, pglocal.Options{Dir: dirs[0], Settings: settings}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.primary.Stop(context.Background()) })
	if err := p.primary.EnsureDatabase(ctx, "chatd"); err != nil {
		t.Fatal(err)
	}
	if p.standby, err = p.primary.Standby(ctx, "standby", pglocal.Options{Dir: dirs[1], Settings: settings}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.standby.Stop(context.Background()) })
	want := "async"
	if sync {
		want = "sync"
		p.exec(p.primary, "ALTER SYSTEM SET synchronous_standby_names = 'standby'")
		p.exec(p.primary, "SELECT pg_reload_conf()")
	}
	poll(t, 60*time.Second, "the standby to stream ("+want+")", func() bool {
		return p.query(p.primary, "SELECT coalesce(max(sync_state), '') FROM pg_stat_replication WHERE application_name = 'standby'") == want
	})
	return p
}

// url is the multi-host URL both replicas use: the primary's socket, then
// the standby's, and only a read-write session will do.
func (p *pgPair) url() string {
	pd, pp := p.primary.Socket()
	sd, sp := p.standby.Socket()
	q := url.Values{}
	q.Set("host", pd+","+sd)
	q.Set("port", strconv.Itoa(pp)+","+strconv.Itoa(sp))
	q.Set("sslmode", "disable")
	q.Set("target_session_attrs", "read-write")
	return "postgres://postgres@/chatd?" + q.Encode()
}

func (p *pgPair) exec(c *pglocal.Cluster, sql string) {
	p.t.Helper()
	if err := execSQL(c.URL("chatd"), sql); err != nil {
		p.t.Fatal(err)
	}
}

// query runs one query as the superuser and returns its value as text
// ("" for none, NULL or a failure: callers poll).
func (p *pgPair) query(c *pglocal.Cluster, sql string) string { return queryText(c.URL("chatd"), sql) }

// failoverMock answers every turn with one finalizer call whose value
// says which call of the turn it is (count), and counts the calls per
// turn: a call made after the turn's step committed shows as a receipt
// whose count is below the turn's calls.
type failoverMock struct {
	mu    sync.Mutex
	calls map[string]int // by the turn's tag
	// hold, when set, holds the calls of the turns it names until gate
	// closes; held counts them.
	hold func(tag string) bool
	gate chan struct{}
	held atomic.Int32
}

func (m *failoverMock) options() mockllm.Options {
	return mockllm.Options{Latency: failoverLatency - 500*time.Millisecond, ChunkDelay: 25 * time.Millisecond,
		BeforeRespond: func(ctx context.Context, req *mockllm.Request) error {
			if m.hold == nil || !m.hold(turnTag(req)) {
				return nil
			}
			m.held.Add(1)
			select {
			case <-m.gate:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		StepFor: func(req *mockllm.Request) (mockllm.Step, bool) {
			tag := turnTag(req)
			m.mu.Lock()
			m.calls[tag]++
			n := m.calls[tag]
			m.mu.Unlock()
			v, _ := json.Marshal(map[string]any{"title": "turn " + tag + " answered by its call number " + strconv.Itoa(n) +
				" of the model, streamed in fragments", "count": n, "tags": []string{tag, "failover", "synchronous standby"}})
			return mockllm.Step{Value: v}, true
		}}
}

// turnTag is the "t17" of a turn's first user message "turn #t17".
func turnTag(req *mockllm.Request) string {
	for _, m := range req.Messages {
		if m.Role == "user" {
			_, tag, _ := strings.Cut(m.Content, "#")
			return tag
		}
	}
	return ""
}

// seenReceipt is a receipt as a client first saw it.
type seenReceipt struct {
	tag     string
	req     uuid.UUID
	res     client.StructuredOutputResult
	at      time.Time
	session int32 // the failover session it was seen in (0: before)
}

// failoverLoad runs the turns: each is created through one replica (with
// an idempotency key, retried until answered) and long-polled through the
// other; every fifth is also followed by a stream, through a proxy that
// cuts it at the failure and at the promotion.
type failoverLoad struct {
	t       *testing.T
	servers [2]*server
	token   string
	phase   atomic.Int32 // bumped at the kill: what was seen before it is phase 0
	mu      sync.Mutex
	seen    map[uuid.UUID]seenReceipt
	streams []*failoverStream
	cuts    *cutProxy
	done    atomic.Int32
}

// cutProxy passes the streams to the replicas, each connection to the
// other replica than the last, and cuts every open one on cut(), as a
// network failure would: the clients reconnect with Last-Event-ID.
type cutProxy struct {
	srv     *httptest.Server
	targets [2]string
	n       atomic.Int32
	mu      sync.Mutex
	open    map[*http.Request]context.CancelFunc
	cuts    atomic.Int32
}

func newCutProxy(t *testing.T, targets [2]string) *cutProxy {
	p := &cutProxy{targets: targets, open: map[*http.Request]context.CancelFunc{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *cutProxy) serve(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	p.mu.Lock()
	p.open[r] = cancel
	p.mu.Unlock()
	defer func() { p.mu.Lock(); delete(p.open, r); p.mu.Unlock() }()
	target := p.targets[p.n.Add(1)%2]
	up, err := http.NewRequestWithContext(ctx, r.Method, target+r.URL.RequestURI(), nil)
	if err != nil {
		return
	}
	up.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(up)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer resp.Body.Close()
	maps.Copy(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
		if err != nil {
			if ctx.Err() != nil {
				panic(http.ErrAbortHandler) // cut: no clean end
			}
			return
		}
	}
}

// cut drops every stream open now.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cancel := range p.open {
		cancel()
	}
	p.cuts.Add(1)
}

// run starts turns from..to-1, one every failoverPace, each on a
// goroutine of its own: a turn's client waits for nobody else's.
func (l *failoverLoad) run(ctx context.Context, from, to int) *sync.WaitGroup {
	var wg sync.WaitGroup
	tick := time.NewTicker(failoverPace)
	defer tick.Stop()
	for i := from; i < to; i++ {
		wg.Go(func() { l.turn(ctx, i) })
		select {
		case <-tick.C:
		case <-ctx.Done():
			return &wg
		}
	}
	return &wg
}

// turn creates turn i and waits for its receipt.
func (l *failoverLoad) turn(ctx context.Context, i int) {
	tag := "t" + strconv.Itoa(i)
	in, out := l.servers[i%2].client(l.token), l.servers[(i+1)%2].client(l.token)
	var created client.CreateChatResponse
	err := retry(ctx, func() error {
		var err error
		created, err = in.CreateChat(client.WithIdempotencyKey(ctx, "failover-"+tag), client.CreateChatRequest{
			Content: text("turn #" + tag), ResponseFormat: structured()})
		return err
	})
	if err != nil {
		l.t.Errorf("%s: create: %v", tag, err)
		return
	}
	req := *created.Messages[0].StructuredOutputRequestID
	if i%5 == 0 {
		fs := &failoverStream{tag: tag, chat: created.Chat.ID, req: req, done: make(chan struct{})}
		l.mu.Lock()
		l.streams = append(l.streams, fs)
		l.mu.Unlock()
		go fs.follow(ctx, client.New(l.cuts.srv.URL, l.token, nil))
	}
	var res client.StructuredOutputResult
	if err := retry(ctx, func() error { var err error; res, err = out.WaitStructuredOutput(ctx, req); return err }); err != nil {
		l.t.Errorf("%s: receipt: %v", tag, err)
		return
	}
	l.mu.Lock()
	l.seen[req] = seenReceipt{tag: tag, req: req, res: res, at: time.Now(), session: l.phase.Load()}
	l.mu.Unlock()
	l.done.Add(1)
}

// retry calls f until it succeeds, a 4xx other than 429 says it never
// will, or ctx ends: the database may be failing over.
func retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		var ae *client.APIError
		if err == nil || ctx.Err() != nil || (errors.As(err, &ae) && ae.StatusCode < 500 && ae.StatusCode != 429) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// failoverStream is a stream that follows one turn until its receipt,
// reconnecting (Last-Event-ID) through whatever happens meanwhile.
type failoverStream struct {
	tag       string
	chat      uuid.UUID
	req       uuid.UUID
	evs       []client.StreamEvent
	reconnect int
	err       error
	done      chan struct{}
}

func (fs *failoverStream) follow(ctx context.Context, c *client.Client) {
	defer close(fs.done)
	s := c.Stream(ctx, fs.chat, 0)
	defer s.Close()
	for {
		ev, err := s.Next()
		if err != nil {
			fs.err = err
			return
		}
		fs.evs = append(fs.evs, ev)
		fs.reconnect = s.Reconnects
		if ev.Message != nil && ev.Message.StructuredOutput != nil && ev.Message.StructuredOutput.RequestID == fs.req {
			return
		}
	}
}

// failoverDir is a directory of the test's own that the postgres account
// may enter (pg_auto_failover's nodes live there).
func failoverDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "chatd-failover-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(d)
}

// verify checks what the stream delivered: no event id twice, every
// generation's fragments in order from 1 (or from after a preview_reset's
// position, when fragments were lost for good), the receipt, and every
// message of the chat a client sees.
func (fs *failoverStream) verify(t *testing.T, visible []int64) {
	t.Helper()
	if fs.err != nil {
		t.Errorf("stream %s: %v", fs.tag, fs.err)
		return
	}
	ids := map[string]bool{}
	msgs := map[int64]bool{}
	type gen struct {
		h int64
		a int32
	}
	var cur gen
	var next int64 = 1
	for _, e := range fs.evs {
		if e.EventID != "" && ids[e.EventID] {
			t.Errorf("stream %s: event id %q came twice", fs.tag, e.EventID)
		}
		ids[e.EventID] = true
		switch {
		case e.Message != nil:
			msgs[e.Message.ID] = true
		case e.PreviewReset != nil:
			cur, next = gen{e.PreviewReset.HistoryVersion, e.PreviewReset.GenerationAttempt}, 1
			if f := strings.Split(e.EventID, ":"); len(f) == 4 {
				base, _ := strconv.ParseInt(f[3], 10, 64)
				next = base + 1
			}
		case e.Part != nil:
			if g := (gen{e.Part.HistoryVersion, e.Part.GenerationAttempt}); g != cur {
				cur, next = g, 1
			}
			from := e.Part.Seq
			if e.Part.FromSeq > 0 {
				from = e.Part.FromSeq
			}
			if from != next {
				t.Errorf("stream %s: generation %v: fragments %d..%d after %d, no preview_reset", fs.tag, cur, from, e.Part.Seq, next-1)
			}
			next = e.Part.Seq + 1
		}
	}
	for _, id := range visible {
		if !msgs[id] {
			t.Errorf("stream %s: message %d never came", fs.tag, id)
		}
	}
}

// failoverRig is a pair (or an HA manager's nodes) behind two chatd
// replicas, the mock model and a webhook receiver.
type failoverRig struct {
	t     *testing.T
	db    string // the replicas' multi-host URL
	mock  *failoverMock
	hooks *hookReceiver
	load  *failoverLoad
}

func startRig(t *testing.T, db string) *failoverRig {
	t.Helper()
	r := &failoverRig{t: t, db: db, mock: &failoverMock{calls: map[string]int{}}, hooks: newHookReceiver(t)}
	mockSrv := httptest.NewServer(mockllm.New(r.mock.options()))
	t.Cleanup(mockSrv.Close)
	hookSrv := httptest.NewServer(r.hooks)
	t.Cleanup(hookSrv.Close)
	config := writeConfig(t, mockSrv.URL, "", "failover")
	withWebhook(t, config, hookSrv.URL)
	r.load = &failoverLoad{t: t, seen: map[uuid.UUID]seenReceipt{}}
	for i, name := range []string{"a", "b"} {
		r.load.servers[i] = startServer(t, serverOpts{Name: "failover-" + name, DB: db, Config: config, Workers: 400, Lease: failoverLease})
	}
	r.load.token = newToken(t, db, "alice")
	r.load.cuts = newCutProxy(t, [2]string{r.load.servers[0].URL, r.load.servers[1].URL})
	return r
}

// ready reports whether both replicas answer /readyz 200 (want true) or
// neither does (want false).
func (r *failoverRig) ready(want bool) bool {
	for _, s := range r.load.servers {
		if s.ready(context.Background()) != want {
			return false
		}
	}
	return true
}

// failover runs the load, calls down once killAfter receipts came, waits
// until no replica is ready, calls promote (which returns when a primary
// answers again), and returns when every turn has its receipt, with the
// time of the promotion.
func (r *failoverRig) failover(killAfter int, down func(), promote func() time.Time) time.Time {
	t := r.t
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	var wg *sync.WaitGroup
	started := make(chan struct{})
	go func() { wg = r.load.run(ctx, 0, failoverTurns); close(started) }()
	poll(t, 2*time.Minute, fmt.Sprintf("%d receipts before the failover", killAfter), func() bool { return int(r.load.done.Load()) >= killAfter })
	r.load.phase.Store(1)
	down()
	downAt := time.Now()
	r.load.cuts.cut() // the streams reconnect while no primary answers
	poll(t, 30*time.Second, "/readyz to say not ready on both replicas", func() bool { return r.ready(false) })
	notReady := time.Since(downAt)
	promoted := promote()
	r.load.cuts.cut() // and again once one does
	poll(t, 60*time.Second, "/readyz to come back on both replicas", func() bool { return r.ready(true) })
	t.Logf("primary down: both replicas not ready after %s; promoted %s after the failure; ready %s after the promotion",
		notReady.Round(time.Millisecond), promoted.Sub(downAt).Round(time.Millisecond), time.Since(promoted).Round(time.Millisecond))
	<-started
	wg.Wait()
	for _, fs := range r.load.streams {
		<-fs.done
	}
	if n := r.load.done.Load(); n != failoverTurns {
		t.Fatalf("%d of %d turns got their receipt", n, failoverTurns)
	}
	return promoted
}

// audit checks the outcome on the database now primary (url: a single
// host): every turn has exactly one receipt, the one its client saw
// (same status, value and receipt message), the last one came within the
// bound after the promotion, webhooks delivered each receipt (a repeat
// with the same webhook-id), the streams delivered everything once, and
// chatd check is clean. It returns the turns whose committed step was
// followed by another provider call.
func (r *failoverRig) audit(primaryURL string, promoted time.Time) (repeated []string) {
	t := r.t
	pool := openPool(t, primaryURL)
	var ids []uuid.UUID
	var last time.Time
	for id, s := range r.load.seen {
		ids = append(ids, id)
		if s.at.After(last) {
			last = s.at
		}
	}
	if outcomes := auditRequests(t, pool, ids); outcomes["succeeded"] != len(ids) {
		// A failover costs a turn an attempt or two, not its budget.
		t.Errorf("outcomes %s, want every turn succeeded", outcomeSummary(outcomes))
	}
	bound := failoverLease + 2*failoverLatency + 15*time.Second
	if d := last.Sub(promoted); d > bound {
		t.Errorf("the last receipt came %s after the promotion, more than %s", d.Round(time.Millisecond), bound)
	} else {
		t.Logf("the last receipt came %s after the promotion (bound %s)", d.Round(time.Millisecond), bound)
	}
	c := r.load.servers[0].client(r.load.token)
	before := 0
	for id, s := range r.load.seen {
		now, err := c.GetStructuredOutput(context.Background(), id, 0)
		if err != nil {
			t.Fatalf("%s: lookup after the failover: %v", s.tag, err)
		}
		if s.session == 0 {
			before++
		}
		if now.Status != s.res.Status || !jsonEqual(now.Value, s.res.Value) || *now.ReceiptMessageID != *s.res.ReceiptMessageID {
			t.Errorf("%s: the client saw %s %s (message %d), now %s %s (message %d)", s.tag, s.res.Status, s.res.Value,
				*s.res.ReceiptMessageID, now.Status, now.Value, *now.ReceiptMessageID)
		}
		var v struct{ Count int }
		_ = json.Unmarshal(now.Value, &v)
		r.mock.mu.Lock()
		if calls := r.mock.calls[s.tag]; v.Count != calls {
			repeated = append(repeated, fmt.Sprintf("%s (receipt from call %d of %d)", s.tag, v.Count, calls))
		}
		r.mock.mu.Unlock()
	}
	t.Logf("%d receipts seen before the failover, %d after, checked against the new primary", before, len(r.load.seen)-before)
	r.hooks.verifyDelivered(t, pool)
	r.auditStreams(pool)
	for _, s := range r.load.servers {
		if _, exited := s.wait(0); exited {
			t.Errorf("chatd %s exited", s.name)
		}
		r.auditMetrics(s)
	}
	return repeated
}

// auditMetrics checks that a replica reported the failover: its listener
// reconnected after an outage it measured, its new connections failed
// while no primary answered and then reached another server, and its log
// says so.
func (r *failoverRig) auditMetrics(s *server) {
	t := r.t
	b, err := s.client("").Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := prom.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, name := range []string{"chatd_listener_reconnects_total", "chatd_listener_outage_seconds_count",
		"chatd_db_connect_errors_total", "chatd_db_server_changes_total"} {
		v, _ := sc.Get(name)
		if v < 1 {
			t.Errorf("chatd %s: %s is %v after the failover", s.name, name, v)
		}
		got = append(got, fmt.Sprintf("%s %v", name, v))
	}
	outage, _ := sc.Quantile("chatd_listener_outage_seconds", 0.5)
	var logged []string
	for _, msg := range []string{"notification listener reconnected", "database connections reach another server"} {
		if n := logCount(s.LogPath, msg); n == 0 {
			t.Errorf("chatd %s logged no %q", s.name, msg)
		} else {
			logged = append(logged, fmt.Sprintf("%q x%d", msg, n))
		}
	}
	t.Logf("chatd %s: %s; listener outage p50 %.1fs; logged %s", s.name, strings.Join(got, ", "), outage, strings.Join(logged, ", "))
}

// logCount counts the log records with message msg.
func logCount(path, msg string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte(`"msg":"`+msg+`"`))
}

// auditStreams verifies each stream against the chat's visible messages.
func (r *failoverRig) auditStreams(pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) {
	reconnects := 0
	for _, fs := range r.load.streams {
		rows, err := pool.Query(context.Background(), `SELECT id FROM chat_messages
			WHERE chat_id = $1 AND NOT deleted AND visibility IN ('user', 'both') ORDER BY id`, fs.chat)
		if err != nil {
			r.t.Fatal(err)
		}
		visible, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			r.t.Fatal(err)
		}
		fs.verify(r.t, visible)
		reconnects += fs.reconnect
	}
	r.t.Logf("%d streams, %d reconnections", len(r.load.streams), reconnects)
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}

// TestFailoverSynchronousStandby: a primary and a synchronous streaming
// standby, two replicas on a multi-host URL (target_session_attrs
// read-write), 300 structured turns; the primary is SIGKILLed (or, planned,
// stopped cleanly) in the middle of the load and the standby promoted.
// Every turn ends with exactly one receipt, each the one its client saw,
// the last within lease + 2 × model latency + 15 s of the promotion;
// /readyz says not ready while no primary answers; no replica exits;
// webhooks and streams deliver everything once; chatd check is clean.
// Planned, no provider call follows a step that committed.
func TestFailoverSynchronousStandby(t *testing.T) {
	t.Parallel()
	for _, planned := range []bool{false, true} {
		name := "primary killed"
		if planned {
			name = "planned switchover"
		}
		t.Run(name, func(t *testing.T) {
			pair := startPair(t, true)
			rig := startRig(t, pair.url())
			promoted := rig.failover(failoverTurns/3, func() {
				if planned {
					_ = pair.primary.Stop(context.Background())
				} else {
					pair.primary.Kill()
				}
			}, func() time.Time {
				// An HA manager takes seconds to decide: the outage lasts
				// a while, and requests pile up behind it.
				<-time.After(failoverOutage)
				if err := pair.standby.Promote(context.Background()); err != nil {
					t.Fatal(err)
				}
				return time.Now()
			})
			repeated := rig.audit(pair.standby.URL("chatd"), promoted)
			switch {
			case planned && len(repeated) > 0:
				t.Errorf("%d turns called the model again after their step committed: %v", len(repeated), repeated)
			default:
				t.Logf("%d turns called the model again after their step committed: %v", len(repeated), repeated)
			}
		})
	}
}

// caughtUp waits until the standby replayed everything the primary wrote.
func (p *pgPair) caughtUp() {
	lsn := p.query(p.primary, "pg_current_wal_lsn()")
	poll(p.t, 30*time.Second, "the standby to replay "+lsn, func() bool {
		return p.query(p.standby, "pg_last_wal_replay_lsn() >= '"+lsn+"'::pg_lsn") == "true"
	})
}

// detach stops the standby's replication (an empty primary_conninfo): what
// the primary commits from now on is on the primary alone, as when an
// asynchronous standby lags.
func (p *pgPair) detach() {
	p.exec(p.standby, "ALTER SYSTEM SET primary_conninfo = ''")
	p.exec(p.standby, "SELECT pg_reload_conf()")
	poll(p.t, 30*time.Second, "the standby to stop streaming", func() bool {
		return p.query(p.primary, "SELECT count(*) FROM pg_stat_replication") == "0"
	})
}

// TestFailoverAsynchronousStandby: with an asynchronous standby, what the
// primary committed after the standby's last replayed WAL is lost with
// the primary. Turns answered while the standby kept up (A) keep their
// receipts. Turns admitted while it kept up but answered after it fell
// behind (B: their calls are held, the standby detached, then the calls
// answered) are pending again after the promotion: they are run again
// and end with another receipt than the one their client saw, delivered
// to webhooks under the same webhook-id. Turns admitted after it fell
// behind (C) are unknown: their lookups answer 404. chatd check, run when
// every turn settled, is clean: the database is consistent, only older.
func TestFailoverAsynchronousStandby(t *testing.T) {
	t.Parallel()
	pair := startPair(t, false)
	rig := startRig(t, pair.url())
	l := rig.load
	ctx := t.Context()
	const n = 10
	l.run(ctx, 0, n).Wait()
	pair.caughtUp()
	rig.mock.gate = make(chan struct{})
	rig.mock.hold = func(tag string) bool { i, _ := strconv.Atoi(strings.TrimPrefix(tag, "t")); return i >= n && i < 2*n }
	b := l.run(ctx, n, 2*n)
	poll(t, time.Minute, "the calls of B to be held", func() bool { return rig.mock.held.Load() == n })
	pair.caughtUp()
	pair.detach()
	close(rig.mock.gate)
	b.Wait()
	l.run(ctx, 2*n, 3*n).Wait()
	if got := l.done.Load(); got != 3*n {
		t.Fatalf("%d of %d turns answered before the failover", got, 3*n)
	}
	pair.primary.Kill()
	if err := pair.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	poll(t, 60*time.Second, "/readyz to come back on both replicas", func() bool { return rig.ready(true) })
	rig.auditAsync(pair.standby.URL("chatd"), n)
}

// auditAsync checks TestFailoverAsynchronousStandby's outcome, batch by
// batch (n turns each).
func (r *failoverRig) auditAsync(primaryURL string, n int) {
	t := r.t
	c := r.load.servers[0].client(r.load.token)
	outcome := map[string]int{}
	rerun := map[uuid.UUID]json.RawMessage{}
	for id, s := range r.load.seen {
		i, _ := strconv.Atoi(strings.TrimPrefix(s.tag, "t"))
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		now, err := c.WaitStructuredOutput(ctx, id)
		cancel()
		var ae *client.APIError
		switch {
		case i < n && (err != nil || !jsonEqual(now.Value, s.res.Value)):
			t.Errorf("%s, answered while the standby kept up: now %s %s (%v), the client saw %s", s.tag, now.Status, now.Value, err, s.res.Value)
		case i >= n && i < 2*n && (err != nil || now.Status != client.OutputSucceeded || jsonEqual(now.Value, s.res.Value)):
			t.Errorf("%s, answered after the standby fell behind: now %s %s (%v), want another value than the client saw, %s",
				s.tag, now.Status, now.Value, err, s.res.Value)
		case i >= 2*n && (!errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound):
			t.Errorf("%s, admitted after the standby fell behind: %s %s (%v), want 404", s.tag, now.Status, now.Value, err)
		}
		outcome[[]string{"kept", "run again", "unknown"}[min(i/n, 2)]]++
		if i >= n && i < 2*n {
			rerun[id] = now.Value
		}
	}
	pool := openPool(t, primaryURL)
	settle(t, pool, time.Minute, nil)
	r.hooks.verifyDelivered(t, pool) // and each request under one webhook-id
	r.hooks.mu.Lock()
	twice := 0
	for id, v := range rerun {
		got := r.hooks.values[id]
		if len(got) == 0 || !jsonEqual(json.RawMessage(got[len(got)-1]), v) {
			t.Errorf("request %s run again: the webhook receiver processed %v, last not the new receipt's %s", id, got, v)
		}
		if len(got) > 1 && got[0] != got[len(got)-1] {
			twice++
		}
	}
	r.hooks.mu.Unlock()
	t.Logf("%d of the %d requests run again reached the webhook receiver with the lost value, then the new one, under one webhook-id", twice, len(rerun))
	rep, err := check.Run(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Errorf("checker: %s", v)
	}
	t.Logf("after the asynchronous failover: %v; chatd check found %d violations", outcome, len(rep.Violations))
}
