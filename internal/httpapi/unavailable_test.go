package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/testenv"
)

// A database that drops its connections and refuses new ones (as during a
// restart or failover) gives clients 503 with Retry-After, never 500, and
// the API recovers by itself once the database is back.
func TestDatabaseUnavailableIs503(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	c := env.Client("alice")
	bob := env.Token("bob")
	if _, err := c.ListChats(ctx, 0, ""); err != nil {
		t.Fatal(err)
	}

	var db string
	if err := env.Pool.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, dbtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	allow := func(on bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" ALLOW_CONNECTIONS "+map[bool]string{true: "true", false: "false"}[on]); err != nil {
			t.Fatal(err)
		}
	}
	allow(false)
	t.Cleanup(func() { allow(true) })
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, db); err != nil {
		t.Fatal(err)
	}

	calls := map[string]func() error{
		"list": func() error { _, err := c.ListChats(ctx, 0, ""); return err },
		"create": func() error {
			_, err := c.CreateChat(ctx, client.CreateChatRequest{Content: text("hi")})
			return err
		},
	}
	for name, call := range calls {
		var apiErr *client.APIError
		if err := call(); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s with the database gone: %v, want HTTP 503\n%s", name, err, env.Logs())
		}
	}
	// The header, seen on a raw request.
	req, _ := http.NewRequestWithContext(ctx, "GET", env.API.URL+"/api/v1/chats", nil)
	req.Header.Set("Authorization", "Bearer "+bob)
	resp, err := env.API.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	allow(true)
	for name, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("%s after the database came back: %v", name, err)
		}
	}
}
