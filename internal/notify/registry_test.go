package notify_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/notify"
)

// announced runs change, then returns the chatd_chat payloads committed by
// it, read on a listening connection of its own up to a marker sent after
// (notifications arrive in commit order).
func announced(t *testing.T, pool *pgxpool.Pool, change func()) []string {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN chatd_chat"); err != nil {
		t.Fatal(err)
	}
	change()
	marker := uuid.NewString()
	if _, err := pool.Exec(ctx, "SELECT pg_notify('chatd_chat', $1)", marker); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n.Payload == marker {
			return got
		}
		got = append(got, n.Payload)
	}
}

func newOwner(t *testing.T, pool *pgxpool.Pool) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	if err := pool.QueryRow(t.Context(), `INSERT INTO users (name) VALUES ($1) RETURNING id`, "u"+strings.ReplaceAll(uuid.NewString(), "-", "")[:12]).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func newChat(t *testing.T, pool *pgxpool.Pool, owner uuid.UUID) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	if err := pool.QueryRow(t.Context(), `INSERT INTO chats (owner_id, model) VALUES ($1, 'm') RETURNING id`, owner).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// TestChangesAreAnnouncedToFollowersOnly: a chat's changes go out on
// chatd_chat when its owner is watched, when the chat itself is streamed,
// or when a worker owns it, and not otherwise.
func TestChangesAreAnnouncedToFollowersOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.New(t)
	hub := notify.New(pool, nil)
	retitle := func(chat uuid.UUID) func() {
		return func() { exec(t, pool, `UPDATE chats SET title = title || 'x' WHERE id = $1`, chat) }
	}
	count := func(payloads []string, chat uuid.UUID) int {
		n := 0
		for _, p := range payloads {
			if strings.HasPrefix(p, chat.String()+" ") {
				n++
			}
		}
		return n
	}

	// Nobody follows.
	alone := newOwner(t, pool)
	var chat uuid.UUID
	if got := announced(t, pool, func() { chat = newChat(t, pool, alone) }); len(got) != 0 {
		t.Errorf("a new chat nobody watches: announced %q", got)
	}
	if got := announced(t, pool, retitle(chat)); len(got) != 0 {
		t.Errorf("a change nobody follows: announced %q", got)
	}

	// Owned by a worker: announced (an interrupt must reach it), followed or
	// not, unless the transaction made the worker the owner: that worker
	// starts from what it wrote (an admission's hand-off).
	claim := `UPDATE chats SET status = 'running', worker_id = gen_random_uuid(), lease_expires_at = now() + interval '1 minute' WHERE id = $1`
	handedOver := newChat(t, pool, alone)
	if got := announced(t, pool, func() {
		exec(t, pool, `BEGIN; `+strings.Replace(claim, "$1", "'"+handedOver.String()+"'", 1)+`;
			UPDATE chats SET title = 'handed over' WHERE id = '`+handedOver.String()+`'; COMMIT`)
	}); len(got) != 0 {
		t.Errorf("a change by the transaction that claimed the chat: announced %q", got)
	}
	exec(t, pool, claim, chat)
	if got := announced(t, pool, retitle(chat)); count(got, chat) != 1 {
		t.Errorf("a change of an owned chat: announced %q", got)
	}

	// A stream follows one chat of the owner: that chat's changes only.
	streamed, other := newChat(t, pool, alone), newChat(t, pool, alone)
	unfollow, err := hub.Follow(ctx, alone, streamed)
	if err != nil {
		t.Fatal(err)
	}
	got := announced(t, pool, func() { retitle(streamed)(); retitle(other)(); newChat(t, pool, alone) })
	if len(got) != 1 || count(got, streamed) != 1 {
		t.Errorf("one chat streamed, three changes: announced %q", got)
	}
	unfollow()

	// A watch follows the owner: every chat of theirs, new ones included,
	// and no one else's.
	watched := newOwner(t, pool)
	if _, err := hub.Follow(ctx, watched, uuid.Nil); err != nil {
		t.Fatal(err)
	}
	var fresh uuid.UUID
	if got := announced(t, pool, func() { fresh = newChat(t, pool, watched) }); count(got, fresh) != 1 || len(got) != 1 {
		t.Errorf("a new chat of a watched owner: announced %q", got)
	}
	if got := announced(t, pool, func() { retitle(fresh)(); retitle(other)() }); count(got, fresh) != 1 || len(got) != 1 {
		t.Errorf("a watched owner's change and another's: announced %q", got)
	}
}

// TestFollowWaitsForAWriterThatMissedIt: a transaction that created a chat
// before anyone watched its owner announced nothing; a watch registering
// meanwhile must wait for it to commit, so that the watch's first read
// sees the chat. Without the follow lock the registration returns at once
// and the read misses a chat whose creation was never announced.
func TestFollowWaitsForAWriterThatMissedIt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.New(t)
	hub := notify.New(pool, nil)
	owner := newOwner(t, pool)

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // committed below
	var chat uuid.UUID
	if err := tx.QueryRow(ctx, `INSERT INTO chats (owner_id, model) VALUES ($1, 'm') RETURNING id`, owner).Scan(&chat); err != nil {
		t.Fatal(err)
	}

	followed := make(chan error, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		_, err := hub.Follow(ctx, owner, uuid.Nil)
		followed <- err
	})
	// The registration waits for the writer's follow lock.
	for waiting := false; !waiting; {
		select {
		case err := <-followed:
			t.Fatalf("the registration returned (%v) while a writer that did not see it was in flight", err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(5 * time.Millisecond): // polling PostgreSQL
		}
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event = 'advisory' AND query LIKE '%chat_followers%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-followed; err != nil {
		t.Fatal(err)
	}
	var seen bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM chats WHERE id = $1)`, chat).Scan(&seen); err != nil || !seen {
		t.Fatalf("the first read after the registration: chat seen %v (%v)", seen, err)
	}
}

// TestFollowersShareARegistration: one row per process and key however
// many follow it, kept while any does.
func TestFollowersShareARegistration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.New(t)
	hub := notify.New(pool, nil)
	owner := newOwner(t, pool)
	chat := newChat(t, pool, owner)
	var unfollows []func()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			u, err := hub.Follow(ctx, owner, chat)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			unfollows = append(unfollows, u)
			mu.Unlock()
		})
	}
	wg.Wait()
	rows := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM chat_followers WHERE owner_id = $1 AND chat_id = $2`, owner, chat).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rows(); n != 1 {
		t.Fatalf("%d rows for 20 followers in one process", n)
	}
	for _, u := range unfollows {
		u()
		u() // a second call is a no-op
	}
	if got := announced(t, pool, func() { exec(t, pool, `UPDATE chats SET title = 'y' WHERE id = $1`, chat) }); len(got) != 1 {
		t.Errorf("until it is swept, the row still announces: %q", got)
	}
}

// TestRegistryRefresh: a refresh sweeps rows nobody refreshed, and
// registers again a row of this process's that was swept all the same,
// telling its followers to re-read (announcements were skipped meanwhile).
func TestRegistryRefresh(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.New(t)
	hub := notify.New(pool, nil)
	owner, gone := newOwner(t, pool), newOwner(t, pool)
	chat := newChat(t, pool, owner)
	sub := hub.Subscribe(chat)
	defer sub.Close()
	if _, err := hub.Follow(ctx, owner, chat); err != nil {
		t.Fatal(err)
	}
	exec(t, pool, `INSERT INTO chat_followers (owner_id, chat_id, hub_id, seen_at) VALUES ($1, $2, gen_random_uuid(), now() - interval '1 hour')`, gone, uuid.Nil)
	exec(t, pool, `DELETE FROM chat_followers WHERE owner_id = $1`, owner)
	if err := hub.RefreshRegistry(ctx); err != nil {
		t.Fatal(err)
	}
	var mine, stale int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE owner_id = $1 AND chat_id = $2), count(*) FILTER (WHERE owner_id = $3)
		FROM chat_followers`, owner, chat, gone).Scan(&mine, &stale); err != nil {
		t.Fatal(err)
	}
	if mine != 1 || stale != 0 {
		t.Errorf("after a refresh: %d rows of this process's key (want 1), %d stale rows (want 0)", mine, stale)
	}
	select {
	case <-sub.C():
		if ev, _ := sub.Next(); ev.Snapshot != -1 {
			t.Errorf("event %+v, want a re-read (-1)", ev)
		}
	default:
		t.Error("the followers of a key registered again were not told to re-read")
	}
}
