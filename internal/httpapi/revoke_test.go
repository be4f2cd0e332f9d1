package httpapi_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/testenv"
)

// tokenID is the id of the user's only token.
func tokenID(t *testing.T, env *testenv.Env, userName string) uuid.UUID {
	t.Helper()
	tokens, err := env.Store.ListTokens(t.Context(), userName)
	if err != nil || len(tokens) != 1 {
		t.Fatalf("tokens of %s: %+v %v", userName, tokens, err)
	}
	return tokens[0].ID
}

// ticketStream opens a chat's stream with a ticket, as EventSource does,
// and returns a channel of its event names (closed when it ends).
func ticketStream(t *testing.T, env *testenv.Env, c *client.Client, chat uuid.UUID) <-chan string {
	t.Helper()
	tk, err := c.CreateStreamTicket(t.Context(), chat)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", env.API.URL+"/api/v1/chats/"+chat.String()+"/stream?ticket="+tk.Ticket, nil)
	resp, err := env.API.Client().Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("ticket stream: %v %v", resp, err)
	}
	events := make(chan string, 64)
	go func() {
		defer close(events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				events <- name
			}
		}
	}()
	return events
}

// TestRevokedOrExpiredTokenEndsItsStreams: streams opened with a token,
// directly or through a ticket, end with an error event within
// store.TokenCacheTTL of the token's revocation or expiry, and reconnecting
// is refused (item 13).
func TestRevokedOrExpiredTokenEndsItsStreams(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	for _, how := range []string{"revoked", "expired"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			name := "user-" + how
			c := env.Client(name)
			id := tokenID(t, env, name)
			chat, err := c.CreateChat(t.Context(), client.CreateChatRequest{Content: text("hi")})
			if err != nil {
				t.Fatal(err)
			}
			stream := collect(t, c.Stream(t.Context(), chat.Chat.ID, 0))
			watch := collect(t, c.Watch(t.Context()))
			stream.until(t, "the status", func(ev client.StreamEvent) bool { return ev.Type == client.EventStatus })
			watch.until(t, "the chat", func(ev client.StreamEvent) bool { return ev.Type == client.EventChat })
			ticketed := ticketStream(t, env, c, chat.Chat.ID)
			for ev := range ticketed {
				if ev == "status" {
					break
				}
			}

			// Another user's streams are not affected.
			other := env.Client("bystander-" + how)
			otherWatch := collect(t, other.Watch(t.Context()))

			start := time.Now()
			if how == "revoked" {
				err = env.Store.RevokeToken(t.Context(), id)
			} else { // on the database clock
				_, err = env.Pool.Exec(t.Context(), `UPDATE api_tokens SET expires_at = now() WHERE id = $1`, id)
			}
			if err != nil {
				t.Fatal(err)
			}
			bound := store.TokenCacheTTL + 5*time.Second // the re-check interval, plus a loaded machine's slack
			for _, col := range []*collector{stream, watch} {
				// The stream ends, the client reconnects and is refused for
				// good...
				select {
				case err := <-col.errs:
					var ae *client.APIError
					if !errors.As(err, &ae) || ae.StatusCode != 401 {
						t.Fatalf("reconnect: %v", err)
					}
				case <-time.After(60 * time.Second):
					t.Fatal("the stream was not refused after its token went")
				}
				// ...and the last event it had was the error (the collector
				// queued every event before the end).
				var last client.StreamEvent
				for len(col.events) > 0 {
					last = <-col.events
				}
				if last.Error == nil || !strings.Contains(last.Error.Message, "revoked or has expired") {
					t.Fatalf("the last event: %+v", last)
				}
			}
			last := ""
			for ev := range ticketed {
				last = ev
			}
			took := time.Since(start)
			if last != "error" || took > bound {
				t.Fatalf("the ticket stream ended with %q after %s (bound %s)", last, took, bound)
			}
			t.Logf("%s: streams ended %s after the token went (re-check every %s)", how, took.Round(time.Millisecond), store.TokenCacheTTL)
			select {
			case err := <-otherWatch.errs:
				t.Fatalf("another user's watch ended: %v", err)
			default:
			}
		})
	}
}

// TestStreamsOfOneTokenShareTheRecheck: the streams and watches opened with
// one token are re-checked together, one query per interval, not one per
// stream: at 1,000 streams that was 200 queries a second.
func TestStreamsOfOneTokenShareTheRecheck(t *testing.T) {
	t.Parallel()
	signals := &httpapi.TestSignals{}
	signals.TokenChecked.Init()
	env := testenv.New(t, testenv.Options{NoRunner: true, APISignals: signals})
	checks := func() (n int) { // since the last call
		for {
			select {
			case <-signals.TokenChecked.C():
				n++
			default:
				return n
			}
		}
	}
	c := env.Client("sharer")
	id := tokenID(t, env, "sharer")
	chat, err := c.CreateChat(t.Context(), client.CreateChatRequest{Content: text("hi")})
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var cols []*collector
	for i := range n {
		if i == 0 {
			col := collect(t, c.Watch(t.Context()))
			col.until(t, "the chat", func(ev client.StreamEvent) bool { return ev.Type == client.EventChat })
			cols = append(cols, col)
			continue
		}
		col := collect(t, c.Stream(t.Context(), chat.Chat.ID, 0))
		col.until(t, "the status", func(ev client.StreamEvent) bool { return ev.Type == client.EventStatus })
		cols = append(cols, col)
	}
	checks()
	if err := env.Store.RevokeToken(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	for _, col := range cols {
		select {
		case err := <-col.errs:
			var ae *client.APIError
			if !errors.As(err, &ae) || ae.StatusCode != 401 {
				t.Fatalf("reconnect: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the stream was not refused after its token went")
		}
	}
	// One check may have found the token live just before the revocation;
	// the next found it gone and ended all n.
	if checks := checks(); checks > 2 {
		t.Fatalf("%d token checks ended %d streams of one token: want one per re-check interval", checks, n)
	}
}

// TestExpiringToken: a token created with an expiry works until then and is
// refused after, on the database clock.
func TestExpiringToken(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	token, expires, err := env.Store.CreateExpiringToken(t.Context(), "carol", time.Hour)
	if err != nil || expires == nil || time.Until(*expires) < 50*time.Minute || time.Until(*expires) > 70*time.Minute {
		t.Fatalf("%v %v", expires, err)
	}
	fresh, _, err := env.Store.CreateExpiringToken(t.Context(), "carol", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if r := call(t, env, token, "GET", "/api/v1/chats", ""); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	// Both expire; the one never used (so never cached) is refused at once.
	if _, err := env.Pool.Exec(t.Context(), `UPDATE api_tokens SET expires_at = now()`); err != nil {
		t.Fatal(err)
	}
	if r := call(t, env, fresh, "GET", "/api/v1/chats", ""); r.status != 401 {
		t.Fatalf("an expired token: %d %s", r.status, r.body)
	}
	tokens, err := env.Store.ListTokens(t.Context(), "carol")
	if err != nil || len(tokens) != 2 || !tokens[0].Expired || !tokens[1].Expired {
		b, _ := json.Marshal(tokens)
		t.Fatalf("%s %v", b, err)
	}
}
