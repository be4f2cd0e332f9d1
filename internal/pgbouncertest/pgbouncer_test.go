package pgbouncertest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/proctest"
)

// TestTwoReplicasThroughPgBouncer: two chatd servers reach PostgreSQL
// through PgBouncer 1.18 in transaction pooling mode, with their listeners
// and migrations on --direct-database-url. Structured turns admitted on one
// replica are long-polled on the other and all succeed; a stream on one
// replica sees the receipt of a turn admitted on the other; and PostgreSQL
// sees no more connections than PgBouncer's pool and the two listeners.
func TestTwoReplicasThroughPgBouncer(t *testing.T) {
	t.Parallel()
	direct := dbtest.EmptyURL(t) // the replicas migrate it
	const poolSize = 4
	pgb := startPgBouncer(t, direct, poolSize)
	mock := proctest.Mockllm(t, "--latency", "20ms")
	args := []string{"server", "--listen", "127.0.0.1:0", "--database-url", pgb.URL, "--direct-database-url", direct, "--migrate",
		"--config", writeConfig(t, mock.URL), "--experiments", "chat-structured-output", "--db-max-conns", "8", "--log-format", "json"}
	a, b := startChatd(t, true, args...), startChatd(t, true, args...)
	token := run(t, "token", "create", "--user", "alice", "--database-url", pgb.URL, "--direct-database-url", direct)
	ca, cb := newClient(a, token), newClient(b, token)
	// Each part takes well under a second. The bound stays below a long
	// poll's 30 s, at which it answers from a read without notification.
	const bound = 25 * time.Second
	t.Run("stream", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), bound)
		defer cancel()
		streamSeesReceipt(ctx, t, ca, cb)
	})
	t.Run("turns", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), bound)
		defer cancel()
		turnsAcrossReplicas(ctx, t, [2]*client.Client{ca, cb}, 8)
	})

	ctx := t.Context()
	conn, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var sessions int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&sessions); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d PostgreSQL sessions on the database: PgBouncer's pool of %d and the listeners", sessions, poolSize)
	if sessions > poolSize+2 {
		t.Errorf("%d PostgreSQL sessions, want at most %d (PgBouncer's pool) + 2 (the listeners)", sessions, poolSize)
	}
}

// streamSeesReceipt: a stream on one replica follows a chat while a
// structured turn admitted on the other runs; its receipt reaches the
// stream, which learns of it only by notification.
func streamSeesReceipt(ctx context.Context, t *testing.T, admit, follow *client.Client) {
	created, err := admit.CreateChat(ctx, client.CreateChatRequest{Content: text("hello")})
	if err != nil {
		t.Fatal(err)
	}
	stream := follow.Stream(ctx, created.Chat.ID, 0)
	defer stream.Close()
	if ev, err := stream.Next(); err != nil || ev.Type != client.EventMessage {
		t.Fatalf("the stream's first event: %+v %v, want the first message", ev, err)
	}
	sent, err := admit.SendMessage(ctx, created.Chat.ID, client.SendMessageRequest{Content: text("report"), ResponseFormat: structured()})
	if err != nil {
		t.Fatal(err)
	}
	req := requestOf(sent)
	for {
		ev, err := stream.Next()
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if ev.Type == client.EventMessage && ev.Message.StructuredOutput != nil && ev.Message.StructuredOutput.RequestID == req {
			if ev.Message.StructuredOutput.Status != client.OutputSucceeded {
				t.Fatalf("receipt %+v, want succeeded", ev.Message.StructuredOutput)
			}
			return
		}
	}
}

// turnsAcrossReplicas runs chats structured turns at once, two each: each
// admitted on one replica and long-polled on the other.
func turnsAcrossReplicas(ctx context.Context, t *testing.T, cs [2]*client.Client, chats int) {
	var wg sync.WaitGroup
	errs := make(chan error, chats)
	for i := range chats {
		here, there := cs[i%2], cs[1-i%2]
		wg.Go(func() {
			created, err := here.CreateChat(ctx, client.CreateChatRequest{Content: text(fmt.Sprintf("report %d", i)), ResponseFormat: structured()})
			if err != nil {
				errs <- err
				return
			}
			if err := waitSucceeded(ctx, there, *created.Messages[0].StructuredOutputRequestID); err != nil {
				errs <- err
				return
			}
			sent, err := there.SendMessage(ctx, created.Chat.ID, client.SendMessageRequest{Content: text("again"), ResponseFormat: structured()})
			if err != nil {
				errs <- err
				return
			}
			errs <- waitSucceeded(ctx, here, requestOf(sent))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// requestOf is the structured request a sent message started or queued.
func requestOf(r client.SendMessageResponse) uuid.UUID {
	switch {
	case r.Message != nil && r.Message.StructuredOutputRequestID != nil:
		return *r.Message.StructuredOutputRequestID
	case r.QueuedMessage != nil && r.QueuedMessage.StructuredOutputRequestID != nil:
		return *r.QueuedMessage.StructuredOutputRequestID
	}
	return uuid.Nil
}

// TestWithoutDirectURL: behind PgBouncer in transaction pooling mode and
// without --direct-database-url, the server and `chatd migrate up` exit at
// start-up saying that notifications do not reach the listener and which
// flag to set; nothing was migrated through the pooler.
func TestWithoutDirectURL(t *testing.T) {
	t.Parallel()
	direct := dbtest.EmptyURL(t)
	pgb := startPgBouncer(t, direct, 2)
	procs := []*chatd{
		startChatd(t, false, "server", "--listen", "127.0.0.1:0", "--database-url", pgb.URL, "--migrate", "--log-format", "json"),
		startChatd(t, false, "migrate", "up", "--database-url", pgb.URL),
	}
	for _, c := range procs {
		err := c.wait(t, 30*time.Second)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("chatd %v: %v, want exit 1", c.cmd.Args[1:3], err)
		}
		for _, want := range []string{"notifications sent through --database-url do not reach the listening connection", "set --direct-database-url"} {
			if !strings.Contains(c.Stderr(), want) {
				t.Errorf("chatd %v: stderr does not say %q:\n%s", c.cmd.Args[1:3], want, c.Stderr())
			}
		}
	}
	conn, err := pgx.Connect(t.Context(), direct)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var tables int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("%d tables (%v): the refused commands migrated through the pooler", tables, err)
	}
}
