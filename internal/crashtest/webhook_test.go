package crashtest

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/webhooks"
)

// hookSecret signs the deliveries of the crash test's endpoint.
const hookSecret = "crash-test-webhook-secret-0123456789"

// hookReceiver is an idempotent webhook receiver: it verifies the
// signature, processes a receipt the first time its request id arrives and
// counts the repeats; it answers the first POST of every fourth request 500
// (once per request: refusing every fourth POST could refuse one request
// again and again when a few are retried in step, pushing its retry past
// the test's wait by exponential backoff), and when armed it processes the
// next POST, then holds it unanswered until chatd goes away.
type hookReceiver struct {
	t     *testing.T
	armed atomic.Bool
	held  chan struct{}

	mu      sync.Mutex
	posts   int
	failed  int
	tried   map[uuid.UUID]bool     // requests that came at least once
	seen    map[uuid.UUID]string   // request id -> webhook-id
	values  map[uuid.UUID][]string // request id -> the values processed, in order
	repeats int
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the sender died mid-body
	}
	id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
	if !hmac.Equal([]byte(r.Header.Get("webhook-signature")), []byte(webhooks.Sign([]byte(hookSecret), id, ts, body))) {
		h.t.Errorf("receiver: bad signature on %s", id)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var p struct {
		Type string                        `json:"type"`
		Data client.StructuredOutputResult `json:"data"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Data.RequestID == uuid.Nil || !strings.HasPrefix(p.Type, "structured_output.") {
		h.t.Errorf("receiver: payload %s: %v", body, err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	hold := h.armed.CompareAndSwap(true, false)
	h.mu.Lock()
	h.posts++
	again := h.tried[p.Data.RequestID]
	h.tried[p.Data.RequestID] = true
	if !hold && !again && len(h.tried)%4 == 0 {
		h.failed++
		h.mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	h.values[p.Data.RequestID] = append(h.values[p.Data.RequestID], string(p.Data.Value))
	// Idempotent by the receipt's request id: a repeat changes nothing.
	if prev, ok := h.seen[p.Data.RequestID]; ok {
		h.repeats++
		if prev != id {
			h.t.Errorf("receiver: request %s came as %s, then as %s", p.Data.RequestID, prev, id)
		}
	} else {
		h.seen[p.Data.RequestID] = id
	}
	h.mu.Unlock()
	if hold {
		h.held <- struct{}{}
		<-r.Context().Done() // processed, never answered: chatd is killed
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func newHookReceiver(t *testing.T) *hookReceiver {
	return &hookReceiver{t: t, held: make(chan struct{}, 1), tried: map[uuid.UUID]bool{}, seen: map[uuid.UUID]string{},
		values: map[uuid.UUID][]string{}}
}

// withWebhook adds an endpoint at url to the config file at path: every
// event, a 1 s timeout (a 6 s lease).
func withWebhook(t *testing.T, path, url string) {
	t.Helper()
	var cfg map[string]any
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg["webhooks"] = []map[string]any{{"name": "crash", "url": url + "/receipts", "secret": hookSecret, "timeout": "1s"}}
	if b, err = json.Marshal(cfg); err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// verifyDelivered waits until every finished request's outbox row is
// delivered, then checks that the receiver processed each of them.
func (h *hookReceiver) verifyDelivered(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var undelivered int
	poll(t, 3*time.Minute, "every receipt delivered", func() bool {
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM structured_requests r
			WHERE r.status <> 'pending' AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.request_id = r.request_id AND d.state = 'delivered')`).Scan(&undelivered)
		return err == nil && undelivered == 0
	})
	rows, err := pool.Query(context.Background(), `SELECT request_id FROM structured_requests WHERE status <> 'pending'`)
	if err != nil {
		t.Fatal(err)
	}
	finished, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var lost []uuid.UUID
	for _, id := range finished {
		if _, ok := h.seen[id]; !ok {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Errorf("the receiver processed %d of %d receipts; never got %v", len(finished)-len(lost), len(finished), lost)
	}
	t.Logf("webhooks: %d receipts delivered, %d POSTs (%d answered 500, %d repeats)", len(finished), h.posts, h.failed, h.repeats)
}

// TestWebhookDeliveryAcrossKills: a server is SIGKILLed while it delivers a
// receipt webhook (the receiver has processed the POST but not answered),
// three times, while turns run and the receiver fails some POSTs. After
// the last restart every finished request is delivered at least once, its
// outbox row delivered, the killed deliveries were sent again (the
// receiver deduplicated them by request id), and `chatd check` is clean.
func TestWebhookDeliveryAcrossKills(t *testing.T) {
	t.Parallel()
	db := dbtest.NewURL(t)
	pool := openPool(t, db)
	mock := mockllm.New(mockllm.Options{Latency: 20 * time.Millisecond})
	mockSrv := httptest.NewServer(mock)
	t.Cleanup(mockSrv.Close)
	recv := newHookReceiver(t)
	hookSrv := httptest.NewServer(recv)
	t.Cleanup(hookSrv.Close)

	// The config of writeConfig, with the endpoint. A 1 s timeout makes
	// the lease 6 s: a killed server's delivery is sent again after that.
	cfgPath := writeConfig(t, mockSrv.URL, "", "hooks")
	withWebhook(t, cfgPath, hookSrv.URL)

	start := func(n int) *server {
		return startServer(t, serverOpts{Name: fmt.Sprintf("hooks%d", n), DB: db, Config: cfgPath, Workers: 2})
	}
	s := start(0)
	token := newToken(t, db, "alice")
	const kills, perRound = 3, 6
	var requests []uuid.UUID
	for round := range kills + 1 {
		c := s.client(token)
		for i := range perRound {
			res, err := c.CreateChat(t.Context(), client.CreateChatRequest{
				Content: text(fmt.Sprintf("round %d chat %d: report", round, i)), ResponseFormat: structured()})
			if err != nil {
				t.Fatal(err)
			}
			requests = append(requests, *res.Messages[0].StructuredOutputRequestID)
		}
		if round == kills {
			break
		}
		// Kill the server in the middle of a delivery.
		recv.armed.Store(true)
		select {
		case <-recv.held:
		case <-time.After(2 * time.Minute):
			t.Fatalf("round %d: no delivery reached the receiver", round)
		}
		s.kill()
		s = start(round + 1)
	}

	settle(t, pool, 3*time.Minute, nil)
	recv.verifyDelivered(t, pool)
	recv.mu.Lock()
	seen, repeats, posts, failed := len(recv.seen), recv.repeats, recv.posts, recv.failed
	recv.mu.Unlock()
	if seen != len(requests) {
		t.Errorf("the receiver processed %d receipts, want %d", seen, len(requests))
	}
	// Each held delivery was processed, then sent again after the kill.
	if repeats < kills {
		t.Errorf("%d repeated deliveries, want at least the %d cut off by a kill", repeats, kills)
	}
	rows, err := pool.Query(context.Background(), `SELECT state, count(*), sum(attempts) FROM webhook_deliveries GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type stateCount struct {
		State    string
		N        int
		Attempts int
	}
	states, err := pgx.CollectRows(rows, pgx.RowToStructByPos[stateCount])
	if err != nil || len(states) != 1 || states[0].State != "delivered" || states[0].N != len(requests) {
		t.Errorf("outbox states %+v (%v), want %d delivered", states, err, len(requests))
	}
	if out, code := runChatd(t, "check", "--database-url", db); code != 0 {
		t.Errorf("chatd check: exit %d\n%s", code, out)
	}
	t.Logf("%d receipts, %d POSTs (%d answered 500, %d repeats after kills or failures), outbox %+v", len(requests), posts, failed, repeats, states)
}
