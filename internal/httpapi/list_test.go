package httpapi_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testenv"
)

func TestListChatsPages(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	alice, bob := env.Client("alice"), env.Client("bob")
	var created []uuid.UUID // oldest first
	for range 5 {
		res, err := alice.CreateChat(ctx, client.CreateChatRequest{Content: text("hi")})
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, res.Chat.ID)
	}
	if _, err := bob.CreateChat(ctx, client.CreateChatRequest{Content: text("not alice's")}); err != nil {
		t.Fatal(err)
	}

	var got []uuid.UUID
	var sizes []int
	cursor := ""
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatal("the pages never end")
		}
		res, err := alice.ListChats(ctx, 2, cursor)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(res.Chats))
		for _, c := range res.Chats {
			got = append(got, c.ID)
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	if len(sizes) != 3 || sizes[0] != 2 || sizes[1] != 2 || sizes[2] != 1 {
		t.Fatalf("page sizes %v, want [2 2 1]", sizes)
	}
	for i, id := range got {
		if want := created[len(created)-1-i]; id != want {
			t.Fatalf("chat %d is %s, want %s (newest first, each once): %v", i, id, want, got)
		}
	}

	// A page that ends exactly at the last chat says so.
	if res, err := alice.ListChats(ctx, 5, ""); err != nil || len(res.Chats) != 5 || res.NextCursor != "" {
		t.Fatalf("limit 5: %d chats, next_cursor %q, %v", len(res.Chats), res.NextCursor, err)
	}

	for _, bad := range []string{"x", "!!!", "bm90IGEgY3Vyc29y", "MjAyNi0xMS0zMFQwMDowMDowMFp8bm90LWEtdXVpZA"} {
		var apiErr *client.APIError
		_, err := alice.ListChats(ctx, 2, bad)
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest ||
			len(apiErr.Body.Validations) != 1 || apiErr.Body.Validations[0].Field != "cursor" {
			t.Fatalf("cursor %q: %v, want a 400 naming cursor", bad, err)
		}
	}
}

// The watch starts with every chat of the caller, however many pages of
// the list that takes.
func TestWatchStartsWithEveryChat(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	c := env.Client("alice")
	const n = 1100 // more than two of the watch's pages
	if _, err := env.Pool.Exec(ctx, `INSERT INTO chats (owner_id, model, updated_at)
		SELECT u.id, 'mock/model', now() - g * interval '1 second' FROM users u, generate_series(1, $1::int) g
		WHERE u.name = 'alice'`, n); err != nil {
		t.Fatal(err)
	}
	w := c.Watch(ctx)
	defer w.Close()
	seen := map[uuid.UUID]bool{}
	for len(seen) < n {
		ev, err := w.Next()
		if err != nil {
			t.Fatalf("after %d chats: %v", len(seen), err)
		}
		if ev.Type == client.EventChat {
			seen[ev.Chat.ID] = true
		}
	}
}
