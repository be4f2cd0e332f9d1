package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testenv"
)

// openTicketStream opens GET .../stream?ticket= without a token and returns
// the status and, on 200, the first event's name.
func openTicketStream(t *testing.T, base, chat, ticket string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/chats/"+chat+"/stream?ticket="+ticket, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return resp.StatusCode, ""
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			return 200, name
		}
	}
	return 200, ""
}

// TestStreamTickets: a ticket opens one stream of its chat, once, on any
// replica; it is refused for another chat, twice, or unknown.
func TestStreamTickets(t *testing.T) {
	t.Parallel()
	a := testenv.New(t, testenv.Options{})
	b := testenv.Reopen(t, a, testenv.Options{}) // a second replica on the same database
	alice, bob := a.Client("alice"), a.Client("bob")
	ctx := t.Context()
	mk := func(c *client.Client) string {
		res, err := c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Chat.ID.String()
	}
	chat, other := mk(alice), mk(alice)
	ticket := func(chat string) string {
		tk, err := alice.CreateStreamTicket(ctx, mustUUID(t, chat))
		if err != nil || !strings.HasPrefix(tk.Ticket, "cst_") || tk.ExpiresAt.IsZero() {
			t.Fatalf("ticket: %+v %v", tk, err)
		}
		return tk.Ticket
	}

	tk := ticket(chat)
	// Issued by replica a, redeemed by replica b: the stream opens.
	if code, first := openTicketStream(t, b.API.URL, chat, tk); code != 200 || first != "message" {
		t.Fatalf("ticket on another replica: %d %q", code, first)
	}
	// Single use.
	if code, _ := openTicketStream(t, a.API.URL, chat, tk); code != 401 {
		t.Fatalf("a used ticket: %d", code)
	}
	// For its chat only, and used up by the attempt.
	tk2 := ticket(chat)
	if code, _ := openTicketStream(t, a.API.URL, other, tk2); code != 401 {
		t.Fatalf("a ticket for another chat: %d", code)
	}
	if code, _ := openTicketStream(t, a.API.URL, chat, tk2); code != 401 {
		t.Fatalf("a ticket tried on another chat stays used: %d", code)
	}
	if code, _ := openTicketStream(t, a.API.URL, chat, "cst_nonsense"); code != 401 {
		t.Fatalf("an unknown ticket: %d", code)
	}
	// Not for another user's chat, and a ticket is no token elsewhere.
	var apiErr *client.APIError
	if _, err := bob.CreateStreamTicket(ctx, mustUUID(t, chat)); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("bob's ticket for alice's chat: %v", err)
	}
	tk3 := ticket(chat)
	resp, err := http.Get(a.API.URL + "/api/v1/chats/" + chat + "/messages?ticket=" + tk3)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 && resp.StatusCode != 400 {
		t.Fatalf("a ticket on another route: %d", resp.StatusCode)
	}
}

func mustUUID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
