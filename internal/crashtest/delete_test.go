package crashtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/check"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/store"
)

// postCounter is a webhook receiver that counts the POSTs of each request
// and answers 204.
type postCounter struct {
	mu    sync.Mutex
	posts map[uuid.UUID][]string // request -> events
}

func (p *postCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var v struct {
		Type string `json:"type"`
		Data struct {
			RequestID uuid.UUID `json:"request_id"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &v)
	p.mu.Lock()
	p.posts[v.Data.RequestID] = append(p.posts[v.Data.RequestID], v.Type)
	p.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (p *postCounter) of(req uuid.UUID) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.posts[req]...)
}

// chatRowsLeft counts what is left of a chat outside its tombstones.
func chatRowsLeft(t *testing.T, pool *pgxpool.Pool, chat uuid.UUID) int {
	t.Helper()
	var n int
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM chats WHERE id = $1) + (SELECT count(*) FROM chat_messages WHERE chat_id = $1) +
		(SELECT count(*) FROM chat_queued_messages WHERE chat_id = $1) + (SELECT count(*) FROM structured_requests WHERE chat_id = $1) +
		(SELECT count(*) FROM stream_tickets WHERE chat_id = $1) + (SELECT count(*) FROM idempotency_keys WHERE chat_id = $1)`, chat).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func checkClean(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	rep, err := check.Run(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Errorf("chatd check: %v", v)
	}
}

// TestDeleteOnAnotherReplica: server A runs a structured turn, its provider
// call in flight, when the chat is deleted from elsewhere (the test's own
// store, as another replica would) — while A is frozen (SIGSTOP) and then
// thawed, so that its answer arrives after the deletion; with A SIGKILLed
// right after the deletion; and with A SIGKILLed before it. Each time no
// row of the chat comes back (A thawed, or restarted), the request is
// cancelled with chat_deleted, server B delivers its webhook exactly once,
// and chatd check is clean.
func TestDeleteOnAnotherReplica(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"frozen", "killed after", "killed before"} {
		t.Run(strings.ReplaceAll(how, " ", "_"), func(t *testing.T) {
			t.Parallel()
			deleteOnAnotherReplica(t, how)
		})
	}
}

func deleteOnAnotherReplica(t *testing.T, how string) {
	db := dbtest.NewURL(t)
	pool := openPool(t, db)
	release, entered := make(chan struct{}), make(chan struct{})
	var once sync.Once
	mock := mockllm.New(mockllm.Options{
		BeforeRespond: func(ctx context.Context, r *mockllm.Request) error {
			if r.Header.Get(procHeader) == "a" {
				once.Do(func() { close(entered) })
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		},
		StepFor: func(*mockllm.Request) (mockllm.Step, bool) {
			return mockllm.Step{Value: json.RawMessage(`{"title":"late","count":1}`)}, true
		},
	})
	mockSrv := httptest.NewServer(mock)
	t.Cleanup(mockSrv.Close)
	hooks := &postCounter{posts: map[uuid.UUID][]string{}}
	hookSrv := httptest.NewServer(hooks)
	t.Cleanup(hookSrv.Close)
	cfgA := writeConfig(t, mockSrv.URL, "", "a")
	a := startServer(t, serverOpts{Name: "a", DB: db, Config: cfgA, Workers: 1, Extra: []string{"--log-level", "debug"}})
	cfgB := writeConfig(t, mockSrv.URL, "", "b")
	withWebhook(t, cfgB, hookSrv.URL)
	startServer(t, serverOpts{Name: "b", DB: db, Config: cfgB, Workers: 1})
	token := newToken(t, db, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	created, err := a.client(token).CreateChat(ctx, client.CreateChatRequest{Content: text("Report."), ResponseFormat: structured()})
	if err != nil {
		t.Fatal(err)
	}
	chat, req := created.Chat.ID, *created.Messages[0].StructuredOutputRequestID
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("server A never called the provider")
	}
	var owner uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT owner_id FROM chats WHERE id = $1`, chat).Scan(&owner); err != nil {
		t.Fatal(err)
	}

	switch how {
	case "frozen":
		a.signal(syscall.SIGSTOP)
	case "killed before":
		a.kill()
	}
	d, err := store.New(pool).DeleteChat(ctx, owner, chat)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Cancelled) != 1 || d.Cancelled[0].Request.RequestID != req {
		t.Fatalf("deletion %+v", d)
	}
	switch how {
	case "frozen":
		close(release) // the answer is there when A wakes up
		a.signal(syscall.SIGCONT)
		poll(t, 60*time.Second, "A to stop the deleted chat's turn", func() bool {
			return strings.Contains(tailFile(a.LogPath, 400), "chat deleted: its turn stops")
		})
	case "killed after":
		a.kill()
	}
	if how != "frozen" {
		a = startServer(t, serverOpts{Name: "a2", DB: db, Config: cfgA, Workers: 1})
		if !a.ready(ctx) {
			t.Fatal("A did not come back")
		}
	}

	poll(t, 60*time.Second, "the cancellation's webhook to be delivered", func() bool {
		var delivered bool
		err := pool.QueryRow(ctx, `SELECT state = 'delivered' FROM webhook_deliveries WHERE request_id = $1`, req).Scan(&delivered)
		return err == nil && delivered
	})
	if got := hooks.of(req); len(got) != 1 || got[0] != "structured_output.cancelled" {
		t.Errorf("webhooks for the request: %v, want one structured_output.cancelled", got)
	}
	if n := chatRowsLeft(t, pool, chat); n != 0 {
		t.Errorf("%d rows of the deleted chat", n)
	}
	var status, code string
	if err := pool.QueryRow(ctx, `SELECT status, error_code FROM request_tombstones WHERE request_id = $1`, req).Scan(&status, &code); err != nil ||
		status != string(client.OutputCancelled) || code != string(client.CodeChatDeleted) {
		t.Errorf("the request's tombstone: %s %s %v", status, code, err)
	}
	// The lookup answers from the tombstone, on either server.
	res, err := a.client(token).GetStructuredOutput(ctx, req, 0)
	if err != nil || res.Status != client.OutputCancelled {
		t.Errorf("lookup: %+v %v", res, err)
	}
	checkClean(t, pool)
}
