package httpapi

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/store"
)

// feeds share one database read per chat change among all the streams of
// that chat on this server. A feed reads the rows changed above its own
// watermark (one snapshot, no lock: store.ReadStream) and hands the result to every
// subscribed stream; each stream keeps only rows above its own watermark,
// so a message event is sent once per revision however the reads line up.
type feeds struct {
	s  *Server
	mu sync.Mutex
	m  map[uuid.UUID]*feed
}

type feed struct {
	chatID, owner uuid.UUID
	wake          chan struct{}
	stop          context.CancelFunc

	mu        sync.Mutex
	watermark int64
	subs      map[*feedSub]struct{}
}

// feedSub receives a feed's reads; a stream that falls behind is told to
// read for itself (lost).
type feedSub struct {
	ch   chan *rendered
	mu   sync.Mutex
	lost bool
}

func (fs *feedSub) takeLost() bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	l := fs.lost
	fs.lost = false
	return l
}

// join subscribes a stream whose own read reached snapshot from. It returns
// whether the stream must catch up by itself: the feed had already moved
// past from, and reads it handed out earlier were not seen by this stream.
func (f *feeds) join(chatID, owner uuid.UUID, from int64) (*feedSub, *feed, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fd := f.m[chatID]
	if fd == nil {
		ctx, cancel := context.WithCancel(context.Background())
		fd = &feed{chatID: chatID, owner: owner, wake: make(chan struct{}, 1), stop: cancel,
			watermark: from, subs: map[*feedSub]struct{}{}}
		f.m[chatID] = fd
		go fd.run(ctx, f.s)
	}
	sub := &feedSub{ch: make(chan *rendered, 16)}
	fd.mu.Lock()
	catchUp := fd.watermark > from
	fd.subs[sub] = struct{}{}
	fd.mu.Unlock()
	fd.kick() // notifications may have passed before this stream joined
	return sub, fd, catchUp
}

func (f *feeds) leave(fd *feed, sub *feedSub) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fd.mu.Lock()
	delete(fd.subs, sub)
	empty := len(fd.subs) == 0
	fd.mu.Unlock()
	if empty && f.m[fd.chatID] == fd {
		delete(f.m, fd.chatID)
		fd.stop()
	}
}

func (fd *feed) kick() {
	select {
	case fd.wake <- struct{}{}:
	default:
	}
}

func (fd *feed) run(ctx context.Context, s *Server) {
	sub := s.hub.Subscribe(fd.chatID)
	defer sub.Close()
	resync := time.NewTicker(streamResync)
	defer resync.Stop()
	var retry readRetry // a failed read is tried again soon, not at the resync
	defer retry.stop()
	// Registered before the first read (the kick of the first join): the
	// chat's changes are announced only to registered followers. Until a
	// registration succeeds the feed still reads at each resync.
	var unfollow func()
	defer func() {
		if unfollow != nil {
			unfollow()
		}
	}()
	for {
		if unfollow == nil {
			var err error
			if unfollow, err = s.hub.Follow(ctx, fd.owner, fd.chatID); err != nil && ctx.Err() == nil {
				s.log.Warn("registering a stream's follow failed", slog.String("chat_id", fd.chatID.String()), slog.String("error", err.Error()))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-sub.C():
			ev, _ := sub.Next()
			fd.mu.Lock()
			stale := ev.Snapshot > notify.SnapshotDeleted && ev.Snapshot <= fd.watermark
			fd.mu.Unlock()
			if stale {
				continue
			}
		case <-fd.wake:
		case <-resync.C:
		case <-retry.c:
		}
		if fd.read(ctx, s) {
			retry.stop()
		} else {
			retry.arm()
		}
	}
}

// read reads the changes after the feed's watermark and hands them out;
// false when the read failed (the watermark stays: nothing is skipped).
func (fd *feed) read(ctx context.Context, s *Server) bool {
	fd.mu.Lock()
	from := fd.watermark
	fd.mu.Unlock()
	// Not cancelled mid-flight (a cancelled query costs the connection):
	// the last stream leaving stops the feed after this read.
	rd, err := s.readStream(context.WithoutCancel(ctx), fd.owner, StreamQuery{ChatID: fd.chatID, Watermark: from, Feed: true}, 0)
	if err != nil {
		if isNotFound(err) {
			// The chat is gone: hand out an empty read with the chat's id
			// unset so streams end.
			fd.broadcast(&rendered{}, from)
			return true
		}
		return false // transient (the database restarts): read again soon
	}
	if rd.Chat.SnapshotVersion > from {
		fd.broadcast(render(rd), rd.Chat.SnapshotVersion)
	}
	return true
}

// readStream makes one read of a chat stream (store.ReadStream), through
// TestSignals.StreamRead when a test set it.
func (s *Server) readStream(ctx context.Context, owner uuid.UUID, q StreamQuery, afterID int64) (store.StreamRead, error) {
	read := func(ctx context.Context) (store.StreamRead, error) {
		return s.store.ReadStream(ctx, owner, q.ChatID, q.Watermark, afterID, q.Full)
	}
	if s.signals.StreamRead != nil {
		return s.signals.StreamRead(ctx, q, read)
	}
	return read(ctx)
}

// Retry delays of a failed stream read: from readRetryBase, doubling, at
// most readRetryMax plus a quarter of jitter. A stream therefore catches up
// within about half a second of the database answering again instead of
// at the next change or resync (10 s), and the feeds of many chats do not
// retry in step.
const (
	readRetryBase = 25 * time.Millisecond
	readRetryMax  = 400 * time.Millisecond
)

// readRetry times the next attempt of a failed read. c is nil while no
// retry is due, so a select on it waits for the other cases.
type readRetry struct {
	t *time.Timer
	c <-chan time.Time
	n int // failures in a row
}

// arm schedules the next attempt after one more failure.
func (r *readRetry) arm() {
	d := min(readRetryBase<<min(r.n, 8), readRetryMax)
	d += rand.N(d/4 + 1)
	r.n++
	if r.t == nil {
		r.t = time.NewTimer(d)
	} else {
		r.t.Reset(d)
	}
	r.c = r.t.C
}

// stop forgets the failures: the last read succeeded.
func (r *readRetry) stop() {
	r.n, r.c = 0, nil
	if r.t != nil {
		r.t.Stop()
	}
}

// due reports whether a failed read still has to be made again.
func (r *readRetry) due() bool { return r.c != nil }

// broadcast hands one rendered read to every stream of the feed.
func (fd *feed) broadcast(rd *rendered, watermark int64) {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	fd.watermark = max(fd.watermark, watermark)
	for sub := range fd.subs {
		select {
		case sub.ch <- rd:
		default:
			sub.mu.Lock()
			sub.lost = true
			sub.mu.Unlock()
		}
	}
}
