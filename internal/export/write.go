package export

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/store"
)

// PageSize is how many top-level chats (each with its descendants) an
// export reads per transaction.
const PageSize = 100

// Writer writes an export: the header when made, chats, then the end line
// at Close.
type Writer struct {
	buf *bufio.Writer
	enc *json.Encoder
	n   Counts
}

// NewWriter writes the header of user's export to w.
func NewWriter(w io.Writer, user string, at time.Time) (*Writer, error) {
	buf := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	wr := &Writer{buf: buf, enc: enc}
	return wr, enc.Encode(Header{Type: TypeHeader, Version: Version, User: user, ExportedAt: at.UTC()})
}

// Chats writes chats (each after its parent), and flushes them.
func (w *Writer) Chats(chats []store.ChatExport) error {
	for _, c := range chats {
		for _, l := range lines(c) {
			if err := w.enc.Encode(l); err != nil {
				return err
			}
		}
		w.n.add(c)
	}
	return w.buf.Flush()
}

// Close writes the end line and flushes; it returns what was written.
func (w *Writer) Close() (Counts, error) {
	if err := w.enc.Encode(End{Type: TypeEnd, Counts: w.n}); err != nil {
		return w.n, err
	}
	return w.n, w.buf.Flush()
}

// User writes the export of every chat of the owner (named name), a page
// of PageSize top-level chats per read.
func User(ctx context.Context, st *store.Store, owner uuid.UUID, name string, w io.Writer) (Counts, error) {
	wr, err := NewWriter(w, name, time.Now())
	if err != nil {
		return Counts{}, err
	}
	after := uuid.Nil
	for {
		page, err := st.ExportPage(ctx, owner, after, PageSize)
		if err != nil {
			return wr.n, err
		}
		if len(page) == 0 {
			return wr.Close()
		}
		if err := wr.Chats(page); err != nil {
			return wr.n, err
		}
		for _, c := range page {
			if !c.Chat.ParentChatID.Valid {
				after = c.Chat.ID // the page's last top-level chat
			}
		}
	}
}
