package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/testenv"
)

// benchStream is an open stream whose events a reader goroutine of its own
// takes as they arrive, stamping each with its arrival time: a delivery is
// timed where it arrives, and timing it starts no goroutine (the 1,000
// goroutines a round started and woke used to compete, inside the timed
// window, with the delivery they timed).
type benchStream struct {
	s   *client.Stream
	evs chan stamped
}

type stamped struct {
	ev  client.StreamEvent
	at  time.Time
	err error
}

// next returns the stream's next event and when it arrived.
func (bs *benchStream) next() stamped { return <-bs.evs }

// openStreams opens n streams on chat and waits for each one's initial
// status event.
func openStreams(b *testing.B, c *client.Client, chat uuid.UUID, n int) []*benchStream {
	b.Helper()
	streams := make([]*benchStream, n)
	for i := range streams {
		bs := &benchStream{s: c.Stream(context.Background(), chat, 0), evs: make(chan stamped, 64)}
		streams[i] = bs
		go func() {
			for {
				ev, err := bs.s.Next()
				at := time.Now()
				if err != nil {
					select { // nobody may be reading any more: the stream was closed
					case bs.evs <- stamped{err: err}:
					default:
					}
					return
				}
				bs.evs <- stamped{ev: ev, at: at}
			}
		}()
	}
	each(b, streams, func(ev client.StreamEvent) bool { return ev.Type == client.EventStatus })
	return streams
}

// BenchmarkReceiptDelivery measures how long a committed receipt takes to
// reach every open stream of its chat, next to the floor measured in the
// same run (rounds alternating): one op is a queued structured request
// deleted in the store (its cancelled receipt committed) and delivered to
// all streams, and one floor delivery (BenchmarkReceiptDeliveryFloor).
// A delivery is timed from the receipt's commit, as a client sees it:
// from the moment chatd sends the deleting transaction's COMMIT, and the
// floor its autocommitted pg_notify (each including its commit's round
// trip). p50/p99 are over all deliveries; p99_vs_floor is the ratio of the
// p99s; tx_p50_ms and tx_p99_ms time chatd's deliveries from the start of
// the deleting transaction instead (its statements included). The queued
// message is delivered to every stream before the timed delete, so that a
// delivery is timed alone, as the floor's is; one untimed op on each side
// first warms the backends the ops use.
func BenchmarkReceiptDelivery(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			cfg := dbtest.Config(b)
			clock := &commitClock{watch: map[*pgx.Conn]bool{}}
			cfg.ConnConfig.Tracer = clock
			env := testenv.OnPool(b, dbtest.NewPool(b, cfg), testenv.Options{NoRunner: true, MaxStreamsPerUser: -1})
			chatd := chatdDelivery(b, env, clock, n)
			floor := floorDelivery(b, env, n)
			defer chatd.close()
			defer floor.close()
			chatd.op(-1)
			floor.op(-1)
			var lat, txLat, flat []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%2 == 0 {
					chatd.timed(i, &lat, &txLat)
					floor.timed(i, &flat, nil)
				} else {
					floor.timed(i, &flat, nil)
					chatd.timed(i, &lat, &txLat)
				}
			}
			b.StopTimer()
			reportLatency(b, txLat, "tx_")
			p50, p99 := reportLatency(b, lat, "")
			f50, f99 := reportLatency(b, flat, "floor_")
			if f50 > 0 && f99 > 0 {
				b.ReportMetric(p50/f50, "p50_vs_floor")
				b.ReportMetric(p99/f99, "p99_vs_floor")
			}
		})
	}
}

// BenchmarkReceiptDeliveryFloor is the least a delivery can cost, alone
// (BenchmarkReceiptDelivery measures it beside chatd's): one NOTIFY
// committed in PostgreSQL, heard by one listener, and the events chatd
// sends for the same change, pre-rendered, written to n open streams and
// read by the same client.
func BenchmarkReceiptDeliveryFloor(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			env := testenv.New(b, testenv.Options{NoRunner: true, MaxStreamsPerUser: -1})
			floor := floorDelivery(b, env, n)
			defer floor.close()
			floor.op(-1)
			var lat []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				floor.timed(i, &lat, nil)
			}
			b.StopTimer()
			reportLatency(b, lat, "")
		})
	}
}

// delivery is n open streams and op, which commits one receipt and
// returns when it reached each stream, when its commit was sent and when
// the transaction that committed it began.
type delivery struct {
	op    func(i int) (arrived []time.Time, commit, begin time.Time)
	close func()
}

// timed runs op i and appends its deliveries, timed from the commit, to
// lat, and from the transaction's start to txLat (when not nil).
func (d delivery) timed(i int, lat, txLat *[]time.Duration) {
	arrived, commit, begin := d.op(i)
	for _, at := range arrived {
		*lat = append(*lat, at.Sub(commit))
		if txLat != nil {
			*txLat = append(*txLat, at.Sub(begin))
		}
	}
}

// commitClock is a pgx tracer that notes when a connection that deleted a
// queued message (QueueDelete) next sends COMMIT: the receipt's commit.
type commitClock struct {
	mu    sync.Mutex
	watch map[*pgx.Conn]bool
	at    time.Time
}

func (c *commitClock) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case strings.HasPrefix(data.SQL, "-- name: QueueDelete "):
		c.watch[conn] = true
	case c.watch[conn] && strings.EqualFold(data.SQL, "commit"):
		delete(c.watch, conn)
		c.at = time.Now()
	}
	return ctx
}

func (c *commitClock) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the last commit noted and forgets it.
func (c *commitClock) take() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := c.at
	c.at = time.Time{}
	return at
}

// chatdDelivery opens n streams on a running chat of env (it has no
// workers, so it stays running and queues what is sent to it).
func chatdDelivery(b *testing.B, env *testenv.Env, clock *commitClock, n int) delivery {
	c := env.Client("alice")
	ctx := context.Background()
	chat, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("busy")}) // stays running: no workers
	if err != nil {
		b.Fatal(err)
	}
	streams := openStreams(b, c, chat.Chat.ID, n)
	owner := ownerOf(b, env, chat.Chat.ID)
	return delivery{
		op: func(int) ([]time.Time, time.Time, time.Time) {
			sent, err := c.SendMessage(ctx, chat.Chat.ID, client.SendMessageRequest{Content: text("q"), ResponseFormat: schemaFormat()})
			if err != nil {
				b.Fatal(err)
			}
			queued := sent.QueuedMessage.ID
			each(b, streams, func(ev client.StreamEvent) bool {
				return ev.Queue != nil && slices.ContainsFunc(ev.Queue.QueuedMessages, func(q client.QueuedMessage) bool { return q.ID == queued })
			})
			req := *sent.QueuedMessage.StructuredOutputRequestID
			begin := time.Now()
			arrived := deliver(b, streams, req, func() {
				if _, _, err := env.Store.DeleteQueued(ctx, owner, chat.Chat.ID, queued); err != nil {
					b.Fatal(err)
				}
			})
			commit := clock.take()
			if commit.IsZero() {
				b.Fatal("the deleting transaction's COMMIT was not seen")
			}
			return arrived, commit, begin
		},
		close: func() {
			for _, s := range streams {
				s.s.Close()
			}
		},
	}
}

// floorDelivery opens n streams on a server of its own that writes, on
// each NOTIFY that a connection of env's pool hears, the events chatd
// sends for its op (the receipt and the emptied queue), pre-rendered, to
// every stream: the client reads the same bytes from both.
func floorDelivery(b *testing.B, env *testenv.Env, n int) delivery {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu    sync.Mutex
		subs  []chan []byte
		event atomic.Pointer[[]byte]
	)
	status, _ := json.Marshal(client.Chat{Status: client.StatusRunning})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ch := make(chan []byte, 1)
		mu.Lock()
		subs = append(subs, ch)
		mu.Unlock()
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(append(append([]byte("event: status\ndata: "), status...), "\n\n"...))
		_ = rc.Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case ev := <-ch:
				if _, err := w.Write(ev); err != nil || rc.Flush() != nil {
					return
				}
			}
		}
	}))
	conn, err := env.Pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "LISTEN chatd_floor"); err != nil {
		b.Fatal(err)
	}
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		for {
			if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
				return
			}
			ev := *event.Load()
			mu.Lock()
			for _, ch := range subs {
				ch <- ev
			}
			mu.Unlock()
		}
	}()
	c := client.New(srv.URL, "", nil)
	chat := uuid.New()
	streams := openStreams(b, c, chat, n)
	return delivery{
		op: func(i int) ([]time.Time, time.Time, time.Time) {
			req := uuid.New()
			// The bytes chatd sends for its op: the receipt as chatd
			// renders it and the emptied queue.
			data, _ := json.Marshal(client.ChatMessage{ID: int64(i + 2), ChatID: chat, Role: client.RoleAssistant, CreatedAt: time.Now(),
				Content: []client.MessagePart{{Type: "text", Text: "Structured output request cancelled (queue_deleted): the queued message was deleted"}},
				StructuredOutput: &client.StructuredOutput{RequestID: req, Status: client.OutputCancelled, Usage: &client.Usage{},
					Error: &client.StructuredOutputError{Code: client.CodeQueueDeleted, Message: "the queued message was deleted"}}})
			ev := append(append([]byte(fmt.Sprintf("event: message\nid: %d\ndata: ", i+2)), data...), "\n\nevent: queue\ndata: {\"queued_messages\":[]}\n\n"...)
			event.Store(&ev)
			commit := time.Now()
			return deliver(b, streams, req, func() {
				if _, err := env.Pool.Exec(ctx, "SELECT pg_notify('chatd_floor', '')"); err != nil {
					b.Fatal(err)
				}
			}), commit, commit
		},
		close: func() {
			for _, s := range streams {
				s.s.Close()
			}
			srv.Close()
			cancel()
			<-listening
			conn.Release()
		},
	}
}

// each reads every stream until it sees an event matching done.
func each(b *testing.B, streams []*benchStream, done func(client.StreamEvent) bool) {
	for _, s := range streams {
		for {
			e := s.next()
			if e.err != nil {
				b.Fatal(e.err)
			}
			if done(e.ev) {
				break
			}
		}
	}
}

// deliver runs commit and returns when the receipt of req reached each
// stream.
func deliver(b *testing.B, streams []*benchStream, req uuid.UUID, commit func()) []time.Time {
	arrived := make([]time.Time, 0, len(streams))
	commit()
	for _, s := range streams {
		for {
			e := s.next()
			if e.err != nil {
				b.Fatal(e.err)
			}
			if isReceipt(req)(e.ev) {
				arrived = append(arrived, e.at)
				break
			}
		}
	}
	return arrived
}

// reportLatency reports the p50 and p99 (nearest rank) of lat in ms, as
// <prefix>p50_ms and <prefix>p99_ms, and returns them.
func reportLatency(b *testing.B, lat []time.Duration, prefix string) (p50, p99 float64) {
	slices.Sort(lat)
	if len(lat) == 0 {
		return 0, 0
	}
	p50 = float64(lat[len(lat)/2].Microseconds()) / 1000
	p99 = float64(lat[len(lat)*99/100].Microseconds()) / 1000
	b.ReportMetric(p50, prefix+"p50_ms")
	b.ReportMetric(p99, prefix+"p99_ms")
	return p50, p99
}

func ownerOf(b *testing.B, env *testenv.Env, chat uuid.UUID) uuid.UUID {
	var owner uuid.UUID
	if err := env.Pool.QueryRow(context.Background(), `SELECT owner_id FROM chats WHERE id = $1`, chat).Scan(&owner); err != nil {
		b.Fatal(err)
	}
	return owner
}

// openIdleStreams opens n streams on chat, waits for each one's initial
// status event and leaves them idle (no reader goroutine of the benchmark).
func openIdleStreams(b *testing.B, c *client.Client, chat uuid.UUID, n int) []*client.Stream {
	b.Helper()
	streams := make([]*client.Stream, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range streams {
		streams[i] = c.Stream(context.Background(), chat, 0)
		wg.Go(func() {
			for {
				ev, err := streams[i].Next()
				if err != nil {
					errs <- err
					return
				}
				if ev.Type == client.EventStatus {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return streams
}

// BenchmarkIdleStreamMemory reports the heap and goroutines one idle stream
// costs (server handler and client reader, both in this process).
func BenchmarkIdleStreamMemory(b *testing.B) {
	const n = 1000
	env := testenv.New(b, testenv.Options{NoRunner: true, MaxStreamsPerUser: -1})
	c := env.Client("alice")
	chat, err := c.CreateChat(context.Background(), client.CreateChatRequest{Content: text("idle")})
	if err != nil {
		b.Fatal(err)
	}
	var before, after runtime.MemStats
	for i := 0; i < b.N; i++ {
		runtime.GC()
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		streams := openIdleStreams(b, c, chat.Chat.ID, n)
		runtime.GC()
		runtime.ReadMemStats(&after)
		g1 := runtime.NumGoroutine()
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/n, "heap_B/stream")
		b.ReportMetric(float64(g1-g0)/n, "goroutines/stream")
		for _, s := range streams {
			s.Close()
		}
		if env.Server.Streams() > n {
			b.Fatalf("%d streams open", env.Server.Streams())
		}
	}
	_ = http.StatusOK
}
