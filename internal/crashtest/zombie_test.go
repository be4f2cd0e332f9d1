package crashtest

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mockllm"
)

// TestZombieServerCannotCommit freezes (SIGSTOP) a server while its
// provider call is in flight, lets its lease run out on the database clock,
// and starts a second server, which takes the chat over and finishes the
// request. Then the first server's provider answer is delivered while it is
// still frozen, and it is thawed (SIGCONT) and stopped: whatever it does —
// its heartbeat finds the lease gone, its step watcher hears of the
// takeover, or it reaches its commit and misses the fence, whichever runs
// first — its value reaches neither the history nor the receipt. (The
// commit fence on its own is tested deterministically in internal/store.)
func TestZombieServerCannotCommit(t *testing.T) {
	t.Parallel()
	db := dbtest.NewURL(t)
	pool := openPool(t, db)
	release := make(chan struct{})
	entered := make(chan struct{})
	var enteredOnce sync.Once
	mock := mockllm.New(mockllm.Options{
		BeforeRespond: func(ctx context.Context, r *mockllm.Request) error {
			if r.Header.Get(procHeader) == "zombie" {
				enteredOnce.Do(func() { close(entered) })
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		},
		StepFor: func(r *mockllm.Request) (mockllm.Step, bool) {
			if r.Header.Get(procHeader) == "zombie" {
				return mockllm.Step{Value: json.RawMessage(`{"title":"zombie","count":1}`)}, true
			}
			return mockllm.Step{Value: json.RawMessage(`{"title":"successor","count":2}`)}, true
		},
	})
	mockSrv := httptest.NewServer(mock)
	t.Cleanup(mockSrv.Close)

	zombie := startServer(t, serverOpts{Name: "zombie", DB: db, Config: writeConfig(t, mockSrv.URL, "", "zombie"), Workers: 1,
		Lease: 2 * time.Second, Extra: []string{"--log-level", "debug"}})
	token := newToken(t, db, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	created, err := zombie.client(token).CreateChat(ctx, client.CreateChatRequest{Content: text("Report."), ResponseFormat: structured()})
	if err != nil {
		t.Fatal(err)
	}
	req := *created.Messages[0].StructuredOutputRequestID
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the first server never called the provider")
	}
	zombie.signal(syscall.SIGSTOP)
	poll(t, 30*time.Second, "the frozen server's lease to expire", func() bool {
		var expired bool
		err := pool.QueryRow(ctx, `SELECT lease_expires_at < now() FROM chats WHERE id = $1`, created.Chat.ID).Scan(&expired)
		return err == nil && expired
	})

	successor := startServer(t, serverOpts{Name: "successor", DB: db, Config: writeConfig(t, mockSrv.URL, "", "successor"), Workers: 1})
	res, err := successor.client(token).WaitStructuredOutput(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != client.OutputSucceeded || !strings.Contains(string(res.Value), "successor") {
		t.Fatalf("result %+v %s", res, res.Value)
	}

	// The zombie's answer arrives while it is frozen; then it runs again
	// and finishes what it was doing, then stops.
	close(release)
	zombie.signal(syscall.SIGCONT)
	zombie.signal(syscall.SIGTERM)
	if code, ok := zombie.wait(60 * time.Second); !ok || code != 0 {
		t.Fatalf("zombie exit %d (exited %v)", code, ok)
	}

	var zombieRows, receipts, steps int
	err = pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM chat_messages WHERE chat_id = $1 AND content::text LIKE '%zombie%'),
			(SELECT count(*) FROM chat_messages WHERE chat_id = $1 AND kind = 'receipt'),
			(SELECT steps FROM structured_requests WHERE request_id = $2)`, created.Chat.ID, req).Scan(&zombieRows, &receipts, &steps)
	if err != nil {
		t.Fatal(err)
	}
	if zombieRows != 0 || receipts != 1 || steps != 1 {
		t.Fatalf("after the zombie woke: %d rows with its value, %d receipts, %d steps", zombieRows, receipts, steps)
	}
	if n := len(mock.Requests()); n != 2 {
		t.Fatalf("%d provider calls, want the zombie's and the successor's", n)
	}
	stepped := strings.Contains(tailFile(zombie.LogPath, 200), `"msg":"provider step"`)
	t.Logf("the zombie finished its provider step and went on to its commit: %v", stepped)
	auditRequests(t, pool, nil)
}
