package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/export"
)

// exportContentType is the media type of an export (JSON Lines).
const exportContentType = "application/x-ndjson"

// deleteChat deletes the caller's chat with its descendants: pending
// requests get their cancelled receipt (chat_deleted) first, in the same
// transaction. A chat deleted before is a 404 that says so.
func (s *Server) deleteChat(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "chat")
	if err != nil {
		return err
	}
	d, err := s.store.DeleteChat(r.Context(), currentUser(r).ID, id)
	if err != nil {
		return err
	}
	out := client.DeleteChatResponse{DeletedChatIDs: d.Chats, CancelledRequestIDs: make([]uuid.UUID, 0, len(d.Cancelled))}
	for _, c := range d.Cancelled {
		out.CancelledRequestIDs = append(out.CancelledRequestIDs, c.Request.RequestID)
	}
	s.log.InfoContext(r.Context(), "chat deleted", slog.String("chat_id", id.String()),
		slog.Int("chats", len(d.Chats)), slog.Int("cancelled_requests", len(d.Cancelled)))
	writeJSON(w, http.StatusOK, out)
	return nil
}

// exportChat writes the caller's chat and its descendants in the export
// format, read in one snapshot.
func (s *Server) exportChat(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "chat")
	if err != nil {
		return err
	}
	u := currentUser(r)
	tree, err := s.store.ExportChat(r.Context(), u.ID, id)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", exportContentType)
	wr, err := export.NewWriter(w, u.Name, time.Now())
	if err == nil {
		err = wr.Chats(tree)
	}
	if err == nil {
		_, err = wr.Close()
	}
	if err != nil {
		s.cutExport(r, err)
	}
	return nil
}

// eraseUser erases the named user and everything of theirs (chatd user
// erase) and answers what went.
func (s *Server) eraseUser(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("user")
	e, err := s.store.EraseUser(r.Context(), name)
	if isNotFound(err) {
		return errorf(http.StatusNotFound, "No such user.")
	}
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "user erased", slog.String("erased_user_id", e.UserID.String()),
		slog.Int64("chats", e.Chats), slog.Int64("cancelled_requests", e.Cancelled))
	writeJSON(w, http.StatusOK, e.Report())
	return nil
}

// exportUser writes every chat of the named user in the export format, a
// page of chats at a time (chatd export --user).
func (s *Server) exportUser(w http.ResponseWriter, r *http.Request) error {
	u, err := s.store.FindUser(r.Context(), r.PathValue("user"))
	if isNotFound(err) {
		return errorf(http.StatusNotFound, "No such user.")
	}
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", exportContentType)
	cw := &countingWriter{w: w}
	if _, err := export.User(r.Context(), s.store, u.ID, u.Name, cw); err != nil {
		if cw.n == 0 {
			w.Header().Del("Content-Type")
			return err // the first read failed: nothing was sent
		}
		s.cutExport(r, err)
	}
	return nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// cutExport ends an export that failed after its status was sent: the
// connection is cut, so that the client sees an error (and the export
// lacks its end line) rather than a short file.
func (s *Server) cutExport(r *http.Request, err error) {
	if r.Context().Err() == nil {
		s.log.WarnContext(r.Context(), "export failed", slog.String("error", err.Error()))
	}
	panic(http.ErrAbortHandler)
}
