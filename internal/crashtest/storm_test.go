package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/runner"
	"github.com/chatd/chatd/internal/testenv"
)

// stormTool is the client-executed tool the storm's chats may declare.
var stormTool = client.DynamicTool{Name: "lookup", Description: "Looks a word up. The client runs it.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}

// stormStep is chaosStep plus calls of the client tool when the chat
// declared it.
func stormStep(seed uint64) func(*mockllm.Request) (mockllm.Step, bool) {
	chaos := chaosStep(seed)
	return func(r *mockllm.Request) (mockllm.Step, bool) {
		if r.Tool(stormTool.Name) != nil && len(r.Messages) > 0 {
			last := r.Messages[len(r.Messages)-1]
			if last.Role == "user" && hash64(seed, "lookup", last.Content)%100 < 35 {
				return mockllm.Step{ToolCalls: []mockllm.ToolCall{{Name: stormTool.Name, Arguments: `{"q":"storm"}`}}}, true
			}
		}
		return chaos(r)
	}
}

// stormLog is what the storm's clients saw.
type stormLog struct {
	mu       sync.Mutex
	requests map[uuid.UUID]bool
	// streamed are terminal statuses receipts announced on streams.
	streamed map[uuid.UUID]client.RequestStatus
	chats    map[uuid.UUID]*client.Client
	ops      map[string]int
	statuses map[string]int
}

func (l *stormLog) request(id *uuid.UUID) {
	if id == nil {
		return
	}
	l.mu.Lock()
	l.requests[*id] = true
	l.mu.Unlock()
}

func (l *stormLog) messages(ms []client.ChatMessage) {
	for _, m := range ms {
		l.request(m.StructuredOutputRequestID)
		if so := m.StructuredOutput; so != nil {
			l.request(&so.RequestID)
		}
	}
}

func (l *stormLog) count(op string, err error) error {
	status := "ok"
	var ae *client.APIError
	switch {
	case errors.As(err, &ae):
		status = fmt.Sprint(ae.StatusCode)
	case err != nil:
		status = "transport"
	}
	l.mu.Lock()
	l.ops[op]++
	l.statuses[op+" "+status]++
	l.mu.Unlock()
	if status == "ok" || (ae != nil && ae.StatusCode < 500) {
		return nil // conflicts and vanished queue items are part of a storm
	}
	return fmt.Errorf("%s: %w", op, err)
}

// stormClient is one client of the storm: a user's API client, its chats,
// and a seeded sequence of operations on them.
type stormClient struct {
	id    int
	c     *client.Client
	rng   *rand.Rand
	log   *stormLog
	chats []uuid.UUID
	msg   int
}

func (s *stormClient) content() []client.MessagePart {
	s.msg++
	return text(fmt.Sprintf("[c%d m%d] Report, please.", s.id, s.msg))
}

func (s *stormClient) format() *client.ResponseFormat {
	if s.rng.IntN(100) < 70 {
		return structured()
	}
	return nil
}

func (s *stormClient) chat() uuid.UUID { return s.chats[s.rng.IntN(len(s.chats))] }

// op runs one operation; only server errors (5xx) and transport failures
// fail the storm.
func (s *stormClient) op(ctx context.Context) error {
	if len(s.chats) == 0 {
		return s.create(ctx)
	}
	switch n := s.rng.IntN(100); {
	case n < 8:
		return s.create(ctx)
	case n < 28:
		return s.send(ctx, client.BusyQueue)
	case n < 36:
		return s.send(ctx, client.BusyInterrupt)
	case n < 44:
		return s.edit(ctx)
	case n < 54:
		return s.deleteQueued(ctx)
	case n < 62:
		_, err := s.c.Interrupt(ctx, s.chat())
		return s.log.count("interrupt", err)
	case n < 80:
		return s.answerTools(ctx, s.chat())
	case n < 94:
		return s.readStream(ctx)
	default:
		return s.lookup(ctx)
	}
}

func (s *stormClient) create(ctx context.Context) error {
	req := client.CreateChatRequest{Content: s.content(), ResponseFormat: s.format()}
	if s.rng.IntN(2) == 0 {
		req.DynamicTools = []client.DynamicTool{stormTool}
	}
	res, err := s.c.CreateChat(ctx, req)
	if err == nil {
		s.chats = append(s.chats, res.Chat.ID)
		s.log.mu.Lock()
		s.log.chats[res.Chat.ID] = s.c
		s.log.mu.Unlock()
		s.log.messages(res.Messages)
	}
	return s.log.count("create", err)
}

func (s *stormClient) send(ctx context.Context, busy string) error {
	res, err := s.c.SendMessage(ctx, s.chat(), client.SendMessageRequest{Content: s.content(), ResponseFormat: s.format(), BusyBehavior: busy})
	if err == nil {
		if res.Message != nil {
			s.log.messages([]client.ChatMessage{*res.Message})
		}
		if res.QueuedMessage != nil {
			s.log.request(res.QueuedMessage.StructuredOutputRequestID)
		}
	}
	return s.log.count("send "+busy, err)
}

// history lists a chat's messages and queue, noting every request id.
func (s *stormClient) history(ctx context.Context, chat uuid.UUID) (client.ListMessagesResponse, error) {
	h, err := s.c.ListMessages(ctx, chat, 0, 200)
	if err == nil {
		s.log.messages(h.Messages)
		for _, q := range h.QueuedMessages {
			s.log.request(q.StructuredOutputRequestID)
		}
	}
	return h, s.log.count("list", err)
}

func (s *stormClient) edit(ctx context.Context) error {
	chat := s.chat()
	h, err := s.history(ctx, chat)
	if err != nil {
		return err
	}
	var users []client.ChatMessage
	for _, m := range h.Messages {
		if m.Role == client.RoleUser && m.StructuredOutput == nil {
			users = append(users, m)
		}
	}
	if len(users) == 0 {
		return nil
	}
	target := users[s.rng.IntN(len(users))]
	req := client.EditMessageRequest{Content: s.content()}
	switch s.rng.IntN(3) {
	case 0: // keep the format
	case 1:
		req.ResponseFormat = &client.ResponseFormat{Type: "text"}
	default:
		req.ResponseFormat = structured()
	}
	res, err := s.c.EditMessage(ctx, chat, target.ID, req)
	if err == nil {
		s.log.messages(res.Messages)
		s.log.messages([]client.ChatMessage{res.Message})
	}
	return s.log.count("edit", err)
}

func (s *stormClient) deleteQueued(ctx context.Context) error {
	chat := s.chat()
	h, err := s.history(ctx, chat)
	if err != nil || len(h.QueuedMessages) == 0 {
		return err
	}
	q := h.QueuedMessages[s.rng.IntN(len(h.QueuedMessages))]
	res, err := s.c.DeleteQueued(ctx, chat, q.ID)
	if err == nil {
		s.log.messages(res.Messages)
	}
	return s.log.count("delete queued", err)
}

// answerTools answers the chat's pending client tool calls, if it waits
// for any; sometimes with an error result.
func (s *stormClient) answerTools(ctx context.Context, chat uuid.UUID) error {
	ch, err := s.c.GetChat(ctx, chat)
	if err != nil || ch.Status != client.StatusRequiresAction {
		return s.log.count("get", err)
	}
	var results []client.ToolResult
	for _, call := range ch.PendingToolCalls {
		results = append(results, client.ToolResult{ToolCallID: call.ToolCallID, Output: json.RawMessage(`{"answer":"calm"}`),
			IsError: s.rng.IntN(5) == 0})
	}
	_, err = s.c.SubmitToolResults(ctx, chat, client.ToolResultsRequest{Results: results})
	return s.log.count("tool results", err)
}

// readStream follows a chat for a moment (a stream is open while other
// clients change the chat) and notes the receipts it sees.
func (s *stormClient) readStream(ctx context.Context) error {
	chat := s.chat()
	sctx, cancel := context.WithTimeout(ctx, time.Duration(100+s.rng.IntN(400))*time.Millisecond)
	defer cancel()
	st := s.c.Stream(sctx, chat, 0)
	defer st.Close()
	for {
		ev, err := st.Next()
		if err != nil {
			if sctx.Err() != nil && ctx.Err() == nil {
				return s.log.count("stream", nil) // read for as long as planned
			}
			return s.log.count("stream", err)
		}
		if ev.Message != nil {
			s.log.messages([]client.ChatMessage{*ev.Message})
			if so := ev.Message.StructuredOutput; so != nil {
				s.log.mu.Lock()
				s.log.streamed[so.RequestID] = so.Status
				s.log.mu.Unlock()
			}
		}
	}
}

func (s *stormClient) lookup(ctx context.Context) error {
	s.log.mu.Lock()
	var ids []uuid.UUID
	for id := range s.log.requests {
		ids = append(ids, id)
	}
	s.log.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	_, err := s.c.GetStructuredOutput(ctx, ids[s.rng.IntN(len(ids))], 0)
	var ae *client.APIError
	if errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound {
		err = nil // another user's request
	}
	return s.log.count("lookup", err)
}

// TestStorm: many clients at once create chats, send (queueing and
// interrupting), edit, delete queued requests, interrupt, answer client tool
// calls, read streams and look requests up, against one chatd with a few
// workers. Then every chat is brought to rest (pending tool calls answered),
// and: the checker is clean, every request UUID a client saw has exactly one
// receipt and a terminal lookup, and every receipt a stream showed agrees
// with it. CHATD_STORM_CLIENTS and CHATD_STORM_OPS size it; CHATD_CRASH_SEED
// replays it.
func TestStorm(t *testing.T) {
	t.Parallel()
	seed := seedFor(t)
	clients := envInt(t, "CHATD_STORM_CLIENTS", 24)
	ops := envInt(t, "CHATD_STORM_OPS", 25)
	env := testenv.New(t, testenv.Options{
		Mock:      mockllm.Options{Latency: 10 * time.Millisecond, ChunkDelay: 2 * time.Millisecond, StepFor: stormStep(seed)},
		Workspace: workspace(t),
		Runner:    runner.Options{MaxRunning: 4},
	})
	log := &stormLog{requests: map[uuid.UUID]bool{}, streamed: map[uuid.UUID]client.RequestStatus{}, chats: map[uuid.UUID]*client.Client{},
		ops: map[string]int{}, statuses: map[string]int{}}
	users := make([]*client.Client, 4)
	for i := range users {
		users[i] = env.Client(fmt.Sprintf("user%d", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute+time.Duration(ops)*3*time.Second)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for id := range clients {
		s := &stormClient{id: id, c: users[id%len(users)], rng: rand.New(rand.NewPCG(seed, uint64(id))), log: log}
		wg.Go(func() {
			for range ops {
				if err := s.op(ctx); err != nil {
					errs <- fmt.Errorf("client %d: %w", id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	storm := time.Since(start)

	// Bring every chat to rest: answer what waits for the client.
	rest := &stormClient{rng: rand.New(rand.NewPCG(seed, 1<<20)), log: log}
	waitForRest(t, env.Pool, func() bool {
		idle := true
		for chat, c := range log.chats {
			rest.c = c
			ch, err := c.GetChat(ctx, chat)
			if err != nil {
				t.Fatal(err)
			}
			switch ch.Status {
			case client.StatusWaiting, client.StatusError:
				continue
			case client.StatusRequiresAction:
				if err := rest.answerTools(ctx, chat); err != nil {
					t.Fatal(err)
				}
			}
			idle = false
		}
		return idle
	})

	// Every request a client saw: one receipt, a terminal lookup that agrees
	// with the ledger and with what streams showed.
	var seen []uuid.UUID
	for id := range log.requests {
		seen = append(seen, id)
	}
	outcomes := auditRequests(t, env.Pool, seen)
	owners := map[uuid.UUID]*client.Client{}
	rows, err := env.Pool.Query(ctx, `SELECT request_id, chat_id FROM structured_requests`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var req, chat uuid.UUID
		if err := rows.Scan(&req, &chat); err != nil {
			t.Fatal(err)
		}
		owners[req] = log.chats[chat]
	}
	for _, id := range seen {
		res, err := owners[id].GetStructuredOutput(ctx, id, 0)
		if err != nil {
			t.Errorf("lookup %s: %v", id, err)
			continue
		}
		var status client.RequestStatus
		var receipts int
		if err := env.Pool.QueryRow(ctx, `SELECT status, (SELECT count(*) FROM chat_messages WHERE structured_request_id = $1 AND kind = 'receipt')
			FROM structured_requests WHERE request_id = $1`, id).Scan(&status, &receipts); err != nil {
			t.Fatal(err)
		}
		if res.Status == client.OutputPending || res.Status != status || receipts != 1 || res.ReceiptMessageID == nil {
			t.Errorf("request %s: lookup %s (receipt %v), ledger %s, %d receipts", id, res.Status, res.ReceiptMessageID, status, receipts)
		}
		if s, ok := log.streamed[id]; ok && s != res.Status {
			t.Errorf("request %s: a stream showed %s, the lookup says %s", id, s, res.Status)
		}
	}
	var opsDone int
	for _, n := range log.ops {
		opsDone += n
	}
	t.Logf("%d clients, %d operations in %s (%d chats, %d requests seen, %d receipts on streams): %s",
		clients, opsDone, storm.Round(time.Millisecond), len(log.chats), len(seen), len(log.streamed), outcomeSummary(outcomes))
	t.Logf("answers: %s", outcomeSummary(log.statuses))
}

// waitForRest polls atRest until it holds. A large storm leaves a backlog
// that takes a while, so it fails only when no chat has changed for a
// minute, and then says which chats are not at rest and why.
func waitForRest(t *testing.T, pool *pgxpool.Pool, atRest func() bool) {
	t.Helper()
	ctx := context.Background()
	last, quietSince := int64(-1), time.Now()
	for !atRest() {
		var progress int64
		if err := pool.QueryRow(ctx, `SELECT coalesce(sum(snapshot_version), 0) FROM chats`).Scan(&progress); err != nil {
			t.Fatal(err)
		}
		if progress != last {
			last, quietSince = progress, time.Now()
		}
		if time.Since(quietSince) > time.Minute {
			rows, err := pool.Query(ctx, `SELECT c.id, c.status, c.worker_id IS NOT NULL, coalesce(c.lease_expires_at > now(), false),
				c.requires_action_deadline, (SELECT count(*) FROM chat_queued_messages q WHERE q.chat_id = c.id), now() - c.updated_at
				FROM chats c WHERE c.status NOT IN ('waiting', 'error') ORDER BY c.updated_at LIMIT 20`)
			if err != nil {
				t.Fatal(err)
			}
			var report []string
			for rows.Next() {
				var id uuid.UUID
				var status string
				var owned, live bool
				var deadline *time.Time
				var queued int
				var age time.Duration
				if err := rows.Scan(&id, &status, &owned, &live, &deadline, &queued, &age); err != nil {
					t.Fatal(err)
				}
				report = append(report, fmt.Sprintf("%s %s owned=%v lease_live=%v action_deadline=%v queued=%d unchanged_for=%s",
					id, status, owned, live, deadline, queued, age.Round(time.Millisecond)))
			}
			t.Fatalf("no chat changed for a minute; not at rest:\n%s", strings.Join(report, "\n"))
		}
		time.Sleep(20 * time.Millisecond) // polling the database, not synchronising goroutines
	}
}
