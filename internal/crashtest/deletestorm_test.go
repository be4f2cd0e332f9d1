package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/store"
)

// orphanQueries find, per table, rows whose chat (or message, or request)
// is gone: what a delete must not leave behind.
var orphanQueries = map[string]string{
	"chats": `SELECT count(*) FROM chats c WHERE c.parent_chat_id IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM chats p WHERE p.id = c.parent_chat_id)`,
	"chat_messages":        `SELECT count(*) FROM chat_messages m WHERE NOT EXISTS (SELECT 1 FROM chats c WHERE c.id = m.chat_id)`,
	"chat_queued_messages": `SELECT count(*) FROM chat_queued_messages q WHERE NOT EXISTS (SELECT 1 FROM chats c WHERE c.id = q.chat_id)`,
	"structured_requests":  `SELECT count(*) FROM structured_requests r WHERE NOT EXISTS (SELECT 1 FROM chats c WHERE c.id = r.chat_id)`,
	"stream_tickets":       `SELECT count(*) FROM stream_tickets s WHERE NOT EXISTS (SELECT 1 FROM chats c WHERE c.id = s.chat_id)`,
	"idempotency_keys": `SELECT count(*) FROM idempotency_keys k WHERE k.chat_id IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM chats c WHERE c.id = k.chat_id)`,
	"mcp_calls": `SELECT count(*) FROM mcp_calls x WHERE NOT EXISTS (SELECT 1 FROM chat_messages m WHERE m.id = x.message_id)`,
	"webhook_deliveries": `SELECT count(*) FROM webhook_deliveries d
		WHERE NOT EXISTS (SELECT 1 FROM structured_requests r WHERE r.request_id = d.request_id)
		  AND NOT EXISTS (SELECT 1 FROM request_tombstones t WHERE t.request_id = d.request_id)`,
	"request_tombstones": `SELECT count(*) FROM request_tombstones t
		WHERE NOT EXISTS (SELECT 1 FROM chat_tombstones c WHERE c.chat_id = t.chat_id)`,
	"chat_followers": `SELECT count(*) FROM chat_followers f WHERE f.chat_id <> '00000000-0000-0000-0000-000000000000'
		AND NOT EXISTS (SELECT 1 FROM chats c WHERE c.id = f.chat_id)`,
}

// deletions are the chats the storm deleted, with what each deletion
// cancelled.
type deletions struct {
	mu        sync.Mutex
	chats     map[uuid.UUID]bool
	cancelled []uuid.UUID
	edited    map[uuid.UUID]bool
}

// pick is a random chat the drivers made that is not deleted, or Nil.
func (d *deletions) pick(rng *rand.Rand, sent *journal) uuid.UUID {
	sent.mu.Lock()
	defer sent.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	for range 10 {
		if len(sent.inputs) == 0 {
			break
		}
		in := sent.inputs[rng.IntN(len(sent.inputs))]
		if in.Known && in.Chat != uuid.Nil && !d.chats[in.Chat] {
			return in.Chat
		}
	}
	return uuid.Nil
}

// TestDeleteStorm: two servers run the drivers' chats (structured turns,
// queued and interrupting messages, client tools) and are SIGKILLed and
// restarted at random moments, while other clients edit and interrupt
// chats and delete them (through the store, as a replica would), until
// the drivers made CHATD_DELETE_STORM_CHATS chats (40; `make crash-long`
// 200) and the servers were killed CHATD_DELETE_STORM_KILLS times (3;
// long: 20). Then: chatd check is clean, no table has a row whose chat
// (or message, or request) is gone, a deleted chat left only its
// tombstones, every request pending at its chat's deletion has its
// cancelled (chat_deleted) outcome, every request a client was told about
// is in the ledger or tombstoned, and every receipt reached the webhook.
func TestDeleteStorm(t *testing.T) {
	t.Parallel()
	seed := seedFor(t)
	target := envInt(t, "CHATD_DELETE_STORM_CHATS", 40)
	kills := envInt(t, "CHATD_DELETE_STORM_KILLS", 3)
	rng := rand.New(rand.NewPCG(seed, 0x64656c))
	db := dbtest.NewURL(t)
	pool := openPool(t, db)
	mock := mockllm.New(mockllm.Options{Latency: 15 * time.Millisecond, ChunkDelay: 3 * time.Millisecond, StepFor: stormStep(seed)})
	mockSrv := httptest.NewServer(mock)
	t.Cleanup(mockSrv.Close)
	recv := newHookReceiver(t)
	hookSrv := httptest.NewServer(recv)
	t.Cleanup(hookSrv.Close)
	c := &cluster{t: t, db: db, mockURL: mockSrv.URL, ws: workspace(t), workers: 2, procs: map[string]int{}, hookURL: hookSrv.URL}
	c.start(0)
	c.token = newToken(t, db, "alice")
	c.start(1)
	var owner uuid.UUID
	if err := pool.QueryRow(context.Background(), `SELECT id FROM users WHERE name = 'alice'`).Scan(&owner); err != nil {
		t.Fatal(err)
	}

	sent := &journal{}
	dels := &deletions{chats: map[uuid.UUID]bool{}, edited: map[uuid.UUID]bool{}}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	for id := range 8 {
		wg.Go(func() { c.drive(ctx, id, seed, sent.record) })
	}
	wg.Go(func() { stormDeleter(ctx, t, store.New(pool), owner, seed, sent, dels) })
	wg.Go(func() { stormEditor(ctx, c, seed, sent, dels) })

	start := time.Now()
	for killed := 0; killed < kills || chatsMade(sent) < target; {
		time.Sleep(time.Duration(300+rng.IntN(900)) * time.Millisecond) // the next kill's moment, not a synchronisation
		if killed < kills {
			slot := rng.IntN(2)
			c.server(slot).kill()
			c.start(slot)
			killed++
		}
		if time.Since(start) > 15*time.Minute {
			t.Fatalf("the drivers made %d chats in %s", chatsMade(sent), time.Since(start))
		}
	}
	stop()
	wg.Wait()
	storm := time.Since(start)
	answerRNG := rand.New(rand.NewPCG(seed, 98))
	settle(t, pool, 120*time.Second, func(chat uuid.UUID) { c.answer(context.Background(), chat, answerRNG) })
	auditDeleteStorm(t, pool, sent, dels)
	recv.verifyDelivered(t, pool)
	verifyTombstonesDelivered(t, pool, recv)
	if out, code := runChatd(t, "check", "--database-url", db); code != 0 || !strings.HasSuffix(out, " 0 violations\n") {
		t.Errorf("chatd check: exit %d\n%s", code, out)
	}
	t.Logf("%d chats made, %d deleted (%d requests cancelled by deletion), %d edited, %d kills in %s; %d messages sent; server errors: %v",
		chatsMade(sent), len(dels.chats), len(dels.cancelled), len(dels.edited), kills, storm.Round(time.Millisecond), len(sent.inputs),
		c.serverErrorReport())
}

func chatsMade(sent *journal) int {
	sent.mu.Lock()
	defer sent.mu.Unlock()
	chats := map[uuid.UUID]bool{}
	for _, in := range sent.inputs {
		if in.Known {
			chats[in.Chat] = true
		}
	}
	return len(chats)
}

// stormDeleter deletes a random chat of the drivers every 200-800 ms.
func stormDeleter(ctx context.Context, t *testing.T, st *store.Store, owner uuid.UUID, seed uint64, sent *journal, dels *deletions) {
	rng := rand.New(rand.NewPCG(seed, 0x646c74))
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(200+rng.IntN(600)) * time.Millisecond):
		}
		chat := dels.pick(rng, sent)
		if chat == uuid.Nil {
			continue
		}
		d, err := st.DeleteChat(context.WithoutCancel(ctx), owner, chat)
		if err != nil {
			t.Errorf("delete %s: %v", chat, err)
			return
		}
		dels.mu.Lock()
		dels.chats[chat] = true
		for _, r := range d.Cancelled {
			if r.Request.Status != client.OutputCancelled || r.Request.ErrorCode == nil || *r.Request.ErrorCode != client.CodeChatDeleted || r.Receipt == nil {
				t.Errorf("deleting %s cancelled %+v", chat, r.Request)
			}
			dels.cancelled = append(dels.cancelled, r.Request.RequestID)
		}
		dels.mu.Unlock()
	}
}

// stormEditor edits a user message of a random chat, or interrupts it,
// every 100-400 ms; conflicts, 404s and dead servers are part of the storm.
func stormEditor(ctx context.Context, c *cluster, seed uint64, sent *journal, dels *deletions) {
	rng := rand.New(rand.NewPCG(seed, 0x656474))
	n := 0
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(100+rng.IntN(300)) * time.Millisecond):
		}
		chat := dels.pick(rng, sent)
		if chat == uuid.Nil {
			continue
		}
		cl := c.chatClient(chat, rng.Uint64())
		if rng.IntN(2) == 0 {
			_, _ = cl.Interrupt(ctx, chat)
			continue
		}
		h, err := cl.ListMessages(ctx, chat, 0, 200)
		if err != nil {
			continue
		}
		var users []client.ChatMessage
		for _, m := range h.Messages {
			if m.Role == client.RoleUser && m.StructuredOutput == nil {
				users = append(users, m)
			}
		}
		if len(users) == 0 {
			continue
		}
		n++
		target := users[rng.IntN(len(users))]
		dels.mu.Lock()
		dels.edited[chat] = true // before the edit: its fate is unknown if the answer is lost
		dels.mu.Unlock()
		_, _ = cl.EditMessage(ctx, chat, target.ID, client.EditMessageRequest{Content: text(fmt.Sprintf("[edit %d] Report again.", n))})
	}
}

// auditDeleteStorm checks what the deletions left, and the rest of the
// ledger and histories.
func auditDeleteStorm(t *testing.T, pool *pgxpool.Pool, sent *journal, dels *deletions) {
	t.Helper()
	ctx := context.Background()
	for table, q := range orphanQueries {
		var n int
		if err := pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if n > 0 {
			t.Errorf("%s: %d rows of deleted chats", table, n)
		}
	}
	for chat := range dels.chats {
		var tombstone bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM chat_tombstones WHERE chat_id = $1)`, chat).Scan(&tombstone); err != nil || !tombstone {
			t.Errorf("deleted chat %s has no tombstone (%v)", chat, err)
		}
		if n := chatRowsLeft(t, pool, chat); n > 0 {
			t.Errorf("deleted chat %s left %d rows", chat, n)
		}
	}
	rows, err := pool.Query(ctx, `SELECT request_id FROM request_tombstones
		WHERE request_id = ANY($1) AND status = 'cancelled' AND error_code = 'chat_deleted'`, dels.cancelled)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil || len(cancelled) != len(dels.cancelled) {
		t.Errorf("%d of the %d requests pending at deletion are tombstoned cancelled/chat_deleted (%v)", len(cancelled), len(dels.cancelled), err)
	}
	var live []uuid.UUID
	var inputs []input
	for _, in := range sent.inputs {
		if in.Chat != uuid.Nil && dels.chats[in.Chat] {
			if in.Request != uuid.Nil {
				var found bool
				if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM request_tombstones WHERE request_id = $1)`, in.Request).Scan(&found); err != nil || !found {
					t.Errorf("request %s of deleted chat %s has no tombstone (%v)", in.Request, in.Chat, err)
				}
			}
			continue
		}
		if in.Request != uuid.Nil {
			live = append(live, in.Request)
		}
		if !dels.edited[in.Chat] {
			inputs = append(inputs, in)
		}
	}
	auditRequests(t, pool, live)
	auditInputs(t, pool, inputs)
}

// verifyTombstonesDelivered waits until the receipts of deleted chats'
// requests owed a webhook are delivered, and checks the receiver got each.
func verifyTombstonesDelivered(t *testing.T, pool *pgxpool.Pool, recv *hookReceiver) {
	t.Helper()
	poll(t, 3*time.Minute, "every deleted chat's receipt delivered", func() bool {
		var undelivered int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_deliveries d
			JOIN request_tombstones r ON r.request_id = d.request_id WHERE d.state <> 'delivered'`).Scan(&undelivered)
		return err == nil && undelivered == 0
	})
	rows, err := pool.Query(context.Background(), `SELECT d.request_id FROM webhook_deliveries d JOIN request_tombstones r ON r.request_id = d.request_id`)
	if err != nil {
		t.Fatal(err)
	}
	owed, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		t.Fatal(err)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	for _, id := range owed {
		if _, ok := recv.seen[id]; !ok {
			t.Errorf("the receipt of deleted request %s never reached the webhook", id)
		}
	}
	t.Logf("%d receipts of deleted chats' requests delivered", len(owed))
}
