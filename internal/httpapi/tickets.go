package httpapi

import (
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/store"
)

// streamTicketTTL is how long a stream ticket may wait to be used.
const streamTicketTTL = 60 * time.Second

// streamRoute is the route that accepts a ticket instead of a token.
const streamRoute = "GET /api/v1/chats/{chat}/stream"

// streamTicket issues a single-use ticket to open the chat's stream
// without the Authorization header (for EventSource).
func (s *Server) streamTicket(w http.ResponseWriter, r *http.Request) error {
	chatID, err := pathUUID(r, "chat")
	if err != nil {
		return err
	}
	u := currentUser(r)
	holder := store.TicketHolder{UserID: u.ID, TokenID: u.TokenID, ValidUntil: u.ValidUntil}
	ticket, expires, err := s.store.CreateStreamTicket(r.Context(), holder, chatID, streamTicketTTL)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, client.StreamTicket{Ticket: ticket, ExpiresAt: expires})
	return nil
}

// ticketUser redeems the ?ticket= of a stream request: whom it was issued
// to, or false when the request carries none.
func (s *Server) ticketUser(r *http.Request) (store.TicketHolder, bool, error) {
	ticket := r.URL.Query().Get("ticket")
	if r.Pattern != streamRoute || ticket == "" || r.Header.Get("Authorization") != "" {
		return store.TicketHolder{}, false, nil
	}
	chatID, err := uuid.Parse(r.PathValue("chat"))
	if err != nil {
		return store.TicketHolder{}, true, errorf(http.StatusNotFound, "No such chat.")
	}
	h, err := s.store.RedeemStreamTicket(r.Context(), ticket, chatID)
	if err == nil && h.TokenID != uuid.Nil && s.tokenGone(r.Context(), h.TokenID) {
		err = store.ErrNotFound // its token expired since it was issued
	}
	if isNotFound(err) {
		return store.TicketHolder{}, true, errorf(http.StatusUnauthorized, "The stream ticket is not valid (unknown, used, expired, for another chat, or its token was revoked or expired).")
	}
	return h, true, err
}
