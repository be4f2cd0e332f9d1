package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/store"
)

// Stream timing. The resync covers notifications lost while the listener
// reconnected; the keep-alive keeps proxies from closing idle streams.
const (
	streamKeepAlive = 15 * time.Second
	streamResync    = 10 * time.Second
)

// sse writes Server-Sent Events. Events are written as they come and
// flushed once per batch (flush): one read's events leave in one write to
// the connection, not one each.
type sse struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	lastID int64 // the highest message id sent
	// The stream's position in the preview: after fragment seq of
	// generation h/a (seq 0: before its first), once it sent a fragment
	// or a preview_reset of it (pos).
	pos   bool
	h     int64
	a     int32
	seq   int64
	buf   []byte
	dirty bool
}

// send writes one event whose data is already JSON. id > 0 is a message
// id: the highest one sent goes out in the event id, so Last-Event-ID on
// reconnect resumes after it.
func (s *sse) send(name string, id int64, data []byte) error {
	b := append(s.buf[:0], "event: "...)
	b = append(b, name...)
	b = append(b, '\n')
	if id > s.lastID {
		s.lastID = id
		b = s.appendID(b)
	}
	return s.write(b, data)
}

// sendCursor writes a preview event that moves the stream's position to
// fragment seq of generation h/a, in its event id.
func (s *sse) sendCursor(name string, data []byte, h int64, a int32, seq int64) error {
	s.pos, s.h, s.a, s.seq = true, h, a, seq
	b := append(s.buf[:0], "event: "...)
	b = append(b, name...)
	b = append(b, '\n')
	return s.write(s.appendID(b), data)
}

// appendID appends the event id: the highest message id sent and, once
// the stream has a position in the generation it follows, its
// history:attempt:seq. A preview_reset that starts a generation is at seq
// 0 of it, so its id differs from the message event's before it: no two
// events of a stream share an id.
func (s *sse) appendID(b []byte) []byte {
	b = append(b, "id: "...)
	b = strconv.AppendInt(b, s.lastID, 10)
	if s.pos {
		b = append(b, ':')
		b = strconv.AppendInt(b, s.h, 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(s.a), 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, s.seq, 10)
	}
	return append(b, '\n')
}

func (s *sse) write(b, data []byte) error {
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	s.buf = b
	s.dirty = true
	_, err := s.w.Write(b)
	return err
}

// event marshals v and sends it (not flushed).
func (s *sse) event(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var id int64
	if m, ok := v.(client.ChatMessage); ok {
		id = m.ID
	}
	return s.send(name, id, data)
}

// flush sends what was written since the last flush.
func (s *sse) flush() error {
	if !s.dirty {
		return nil
	}
	s.dirty = false
	return s.rc.Flush()
}

func (s *sse) comment(text string) error {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	s.dirty = false
	return s.rc.Flush()
}

// streamSlot takes one of the caller's MaxStreamsPerUser stream slots
// (429 when none is free); release gives it back.
func (s *Server) streamSlot(w http.ResponseWriter, owner uuid.UUID) (release func(), err error) {
	s.userStreamMu.Lock()
	defer s.userStreamMu.Unlock()
	if s.maxStreams > 0 && s.userStreams[owner] >= s.maxStreams {
		w.Header().Set("Retry-After", "5")
		return nil, errorf(http.StatusTooManyRequests, "Too many open streams: this user has %d on this server, the limit. "+
			"Close one (a chat stream or a watch) before opening another.", s.userStreams[owner])
	}
	s.userStreams[owner]++
	return func() {
		s.userStreamMu.Lock()
		defer s.userStreamMu.Unlock()
		if s.userStreams[owner]--; s.userStreams[owner] <= 0 {
			delete(s.userStreams, owner)
		}
	}, nil
}

// openSSE starts an event stream response; done must be called when it ends.
func (s *Server) openSSE(w http.ResponseWriter, lastID int64) (*sse, func()) {
	s.streams.Add(1)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // no proxy buffering
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w), lastID: lastID}, func() { s.streams.Add(-1) }
}

// streamState is what one stream has told its client.
type streamState struct {
	watermark int64 // snapshot_version of the last successful read
	history   int64
	attempt   int32
	status    client.ChatStatus
	queue     []byte // data of the queue event last sent (a feed's shared bytes: never written to)
	action    int64  // history_version whose action_required was sent
	errorSent int64  // history_version whose error was sent
	retry     []byte // the chat's provider_retry last seen
	partials  partials

	// The preview (preview.go).
	lastSeq int64           // the last fragment sent
	held    []notify.Delta  // fragments past a gap, in order, waiting for a catch-up
	askedAt time.Time       // when the stream asked for a catch-up not yet applied
	reasked bool            // and asked again after waiting catchUpWait
	primeTo int64           // resumed: fragments the client had, for the catch-up to feed the partials
	ahead   []notify.Delta  // fragments of a generation no read told of yet
	aheadCU *notify.CatchUp // a catch-up of such a generation
	wait    *time.Timer     // until held fragments stop waiting (waitC non-nil while they do)
	waitC   <-chan time.Time
}

// stream serves GET /api/v1/chats/{chat}/stream: the committed messages
// after after_id (or Last-Event-ID), the queue and the status, then live
// events until the client leaves or the server shuts down.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) error {
	chatID, err := pathUUID(r, "chat")
	if err != nil {
		return err
	}
	cur, err := streamCursor(r)
	if err != nil {
		return err
	}
	u := currentUser(r)
	release, err := s.streamSlot(w, u.ID)
	if err != nil {
		return err
	}
	defer release()
	revoked, unwatch := s.watchToken(u)
	defer unwatch()

	// Deltas are subscribed before the first read, so a step's preview is
	// not missed; committed changes come from the chat's shared feed.
	dsub := s.hub.SubscribeDeltas(chatID)
	defer dsub.Close()

	// The stream's reads are not cancelled mid-flight when the client
	// leaves (a cancelled query costs the connection).
	first, err := s.readStream(context.WithoutCancel(r.Context()), u.ID, StreamQuery{ChatID: chatID, Full: true}, cur.msg)
	if err != nil {
		return err // 404 and friends, before any byte is written
	}
	out, done := s.openSSE(w, cur.msg)
	defer done()
	st := &streamState{}
	defer st.stopWait()
	if s.apply(out, st, render(first), true) != nil || s.join(out, st, chatID, cur, first.Chat.Status) != nil ||
		st.partials.due(out, st) != nil || out.flush() != nil {
		return nil // the client went away
	}
	sub, fd, behind := s.feeds.join(chatID, u.ID, st.watermark)
	defer s.feeds.leave(fd, sub)
	ls := &liveStream{s: s, ctx: r.Context(), out: out, st: st, chatID: chatID, owner: u.ID, sub: sub, fd: fd, dsub: dsub}
	defer ls.retry.stop()
	if behind && (ls.ownRead() != nil || out.flush() != nil) {
		return nil
	}
	defer st.partials.stop()
	ls.run(revoked)
	return nil
}

// errStreamChatGone ends a live stream whose chat no longer exists.
var errStreamChatGone = errors.New("the chat no longer exists")

// liveStream is a stream past its first read: the chat's feed, its deltas
// and the reads it makes for itself.
type liveStream struct {
	s      *Server
	ctx    context.Context
	out    *sse
	st     *streamState
	chatID uuid.UUID
	owner  uuid.UUID
	sub    *feedSub
	fd     *feed
	dsub   *notify.DeltaSub
	// Until one of its own reads succeeds the stream is behind
	// (retry.due): the feed's reads may start above what it missed, so
	// they are not applied, and the read is tried again soon.
	retry readRetry
}

// ownRead reads for this stream alone: after joining a feed that had moved
// on, or after missing some of its reads.
func (ls *liveStream) ownRead() error {
	rd, err := ls.s.readStream(context.WithoutCancel(ls.ctx), ls.owner, StreamQuery{ChatID: ls.chatID, Watermark: ls.st.watermark}, 0)
	if isNotFound(err) {
		_ = ls.out.event("error", errChatGone)
		_ = ls.out.flush()
		return err
	}
	if err != nil {
		ls.retry.arm()
		return nil //nolint:nilerr // transient (the database restarts): read again soon
	}
	ls.retry.stop()
	return ls.s.apply(ls.out, ls.st, render(rd), false)
}

// run sends live events until the client leaves, the server shuts down or
// the credential is revoked.
func (ls *liveStream) run(revoked <-chan struct{}) {
	out, st := ls.out, ls.st
	keepAlive := time.NewTicker(streamKeepAlive)
	defer keepAlive.Stop()
	for {
		var err error
		select {
		case <-ls.ctx.Done():
			return
		case <-ls.s.shutdown:
			_ = out.comment("server shutting down")
			return
		case <-keepAlive.C:
			err = out.comment("keep-alive")
		case <-revoked:
			_ = out.event("error", errTokenGone)
			return
		case <-st.partials.c:
			if err = st.partials.fire(out, st); err == nil {
				err = out.flush()
			}
		case <-ls.retry.c:
			if err = ls.ownRead(); err == nil {
				err = out.flush()
			}
		case rd := <-ls.sub.ch:
			err = ls.read(rd)
		case ds := <-ls.dsub.C():
			err = ls.s.deltas(out, st, ls.chatID, ls.fd, ds, ls.dsub.Lost())
			err = ls.afterEvent(err)
		case <-st.waitC:
			err = ls.afterEvent(ls.s.waited(out, st, ls.chatID))
		}
		if err != nil {
			return
		}
	}
}

// read applies one of the feed's reads, or reads for itself when it has
// fallen behind.
func (ls *liveStream) read(rd *rendered) error {
	if ls.sub.takeLost() || ls.retry.due() {
		if err := ls.ownRead(); err != nil {
			return err
		}
		if ls.retry.due() {
			return nil // still behind: rd could skip what the stream missed
		}
	}
	if rd.Chat.ID == uuid.Nil {
		_ = ls.out.event("error", errChatGone)
		_ = ls.out.flush()
		return errStreamChatGone
	}
	// Deltas can overtake the read that tells this stream about their
	// generation; they waited (bounded) for it.
	if err := ls.s.apply(ls.out, ls.st, rd, false); err != nil {
		return err
	}
	return ls.afterEvent(ls.s.flushAhead(ls.out, ls.st, ls.chatID))
}

// afterEvent sends the partial values that fell due and flushes, unless
// err already ended the stream.
func (ls *liveStream) afterEvent(err error) error {
	if err != nil {
		return err
	}
	if err := ls.st.partials.due(ls.out, ls.st); err != nil {
		return err
	}
	return ls.out.flush()
}

// apply sends the events a read implies and advances the watermark; the
// caller flushes.
func (s *Server) apply(out *sse, st *streamState, rd *rendered, initial bool) error {
	if rd.err != nil {
		return rd.err
	}
	c := rd.Chat
	if !initial && c.SnapshotVersion <= st.watermark {
		return nil
	}
	if rd.Reset {
		if err := out.event("history_reset", struct{}{}); err != nil {
			return err
		}
	}
	for i, row := range rd.Changed {
		// A feed's read may start below this stream's watermark: rows this
		// stream already sent at their revision are skipped.
		if row.Deleted || (!initial && !rd.Reset && row.Revision <= st.watermark) {
			continue
		}
		if err := out.send("message", rd.ids[i], rd.messages[i]); err != nil {
			return err
		}
	}
	// Previews follow execution history only: a receipt-only change does
	// not reset them. Only a newer generation resets: a feed's read can be
	// older than what a stream's own read already applied.
	if c.HistoryVersion != st.history || c.GenerationAttempt != st.attempt {
		st.newGeneration(out)
		st.history, st.attempt = c.HistoryVersion, c.GenerationAttempt
		if !initial {
			if err := s.resetPreview(out, st, 0); err != nil {
				return err
			}
		}
	}

	if initial || !bytes.Equal(rd.queue, st.queue) {
		st.queue = rd.queue
		if err := out.send("queue", 0, rd.queue); err != nil {
			return err
		}
	}
	if initial || c.Status != st.status {
		st.status = c.Status
		if err := out.send("status", 0, rd.status); err != nil {
			return err
		}
	}
	if !bytes.Equal(c.ProviderRetry, st.retry) {
		st.retry = c.ProviderRetry
		if r := providerRetry(c); r != nil {
			if err := out.event("provider_retry", r); err != nil {
				return err
			}
		}
	}
	if c.Status == client.StatusRequiresAction && st.action != c.HistoryVersion {
		st.action = c.HistoryVersion
		if err := out.send("action_required", 0, rd.action); err != nil {
			return err
		}
	}
	if c.Status == client.StatusError && st.errorSent != c.HistoryVersion {
		st.errorSent = c.HistoryVersion
		if err := out.send("error", 0, rd.failure); err != nil {
			return err
		}
	}
	st.watermark = max(st.watermark, c.SnapshotVersion)
	return nil
}

func chatError(c store.Chat) client.StreamError {
	e := client.StreamError{Message: "The last turn failed."}
	var le struct {
		Code    client.ErrorCode
		Message string
	}
	if json.Unmarshal(c.LastError, &le) == nil && le.Message != "" {
		e.Code, e.Message = le.Code, le.Message
	}
	return e
}

// watch serves GET /api/v1/chats/watch: every chat of the caller, then the
// chat again after each committed change (coalesced: a reader sees the
// latest state, not every intermediate one).
func (s *Server) watch(w http.ResponseWriter, r *http.Request) error {
	u := currentUser(r)
	ctx := r.Context()
	release, err := s.streamSlot(w, u.ID)
	if err != nil {
		return err
	}
	defer release()
	revoked, unwatch := s.watchToken(u)
	defer unwatch()
	sub := s.hub.SubscribeOwner(u.ID)
	defer sub.Close()
	unfollow, err := s.hub.Follow(ctx, u.ID, uuid.Nil) // before the first read
	if err != nil {
		return err
	}
	defer unfollow()
	chats, err := s.allChats(ctx, u.ID)
	if err != nil {
		return err
	}
	out, done := s.openSSE(w, 0)
	defer done()
	wt := &chatWatch{s: s, out: out, owner: u.ID, seen: map[uuid.UUID]int64{}}
	if wt.sendAll(chats) != nil {
		return nil
	}
	keepAlive := time.NewTicker(streamKeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.shutdown:
			_ = out.comment("server shutting down")
			return nil
		case <-keepAlive.C:
			if out.comment("keep-alive") != nil {
				return nil
			}
		case <-revoked:
			_ = out.event("error", errTokenGone)
			return nil
		case <-sub.C():
			ev, _ := sub.Next()
			if wt.changed(ctx, ev) != nil {
				return nil
			}
		}
	}
}

// chatWatch is a watch stream's state: the latest version of each chat
// it reported.
type chatWatch struct {
	s     *Server
	out   *sse
	owner uuid.UUID
	seen  map[uuid.UUID]int64
}

func (wt *chatWatch) send(c store.Chat) error {
	if wt.seen[c.ID] >= c.SnapshotVersion {
		return nil // coalesced: this change was already reported
	}
	wt.seen[c.ID] = c.SnapshotVersion
	return wt.out.event("chat", toChat(c))
}

func (wt *chatWatch) sendAll(chats []store.Chat) error {
	for _, c := range chats {
		if err := wt.send(c); err != nil {
			return err
		}
	}
	return wt.out.flush()
}

// changed reports the chat of one notification, or re-reads every chat
// after a resync. A failed read is skipped: the next change reads again.
func (wt *chatWatch) changed(ctx context.Context, ev notify.Event) error {
	if ev.Snapshot == notify.SnapshotResync {
		cs, err := wt.s.allChats(ctx, wt.owner)
		if err != nil {
			return nil //nolint:nilerr // transient: the next change reads again
		}
		return wt.sendAll(cs)
	}
	c, err := wt.s.store.GetChat(ctx, wt.owner, ev.ChatID)
	if err != nil {
		return nil //nolint:nilerr // transient or gone: the next change reads again
	}
	if err := wt.send(c); err != nil {
		return err
	}
	return wt.out.flush()
}

// allChats reads every chat of owner, a page at a time, newest activity
// first. A chat that changes meanwhile moves ahead of the pages and may be
// missed by them; its change notification reaches the watch instead (the
// watch subscribes before it reads).
func (s *Server) allChats(ctx context.Context, owner uuid.UUID) ([]store.Chat, error) {
	const page = 500
	var all []store.Chat
	var before *store.Chat
	for {
		cs, err := s.store.ListChats(ctx, owner, page, before, uuid.NullUUID{})
		if err != nil {
			return nil, err
		}
		all = append(all, cs...)
		if len(cs) < page {
			return all, nil
		}
		before = &cs[len(cs)-1]
	}
}

// Shutdown ends every open stream cleanly (call before http.Server.Shutdown,
// which does not wait for or cancel long-lived responses itself).
func (s *Server) Shutdown() {
	s.shutdownOnce.Do(func() { close(s.shutdown) })
}

// Streams reports the number of open streams.
func (s *Server) Streams() int64 { return s.streams.Load() }

// errChatGone ends the streams of a chat that was deleted.
var errChatGone = client.StreamError{Code: client.CodeChatDeleted, Message: "The chat was deleted."}
