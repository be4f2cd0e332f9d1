package httpapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
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
			stale := ev.Snapshot > 0 && ev.Snapshot <= fd.watermark
			fd.mu.Unlock()
			if stale {
				continue
			}
		case <-fd.wake:
		case <-resync.C:
		}
		fd.read(ctx, s)
	}
}

func (fd *feed) read(ctx context.Context, s *Server) {
	fd.mu.Lock()
	from := fd.watermark
	fd.mu.Unlock()
	// Not cancelled mid-flight (a cancelled query costs the connection):
	// the last stream leaving stops the feed after this read.
	rd, err := s.store.ReadStream(context.WithoutCancel(ctx), fd.owner, fd.chatID, from, 0, false)
	if err != nil {
		if isNotFound(err) {
			// The chat is gone: hand out an empty read with the chat's id
			// unset so streams end.
			fd.broadcast(&rendered{}, from)
		}
		return // transient: the next wake-up or resync reads again
	}
	if rd.Chat.SnapshotVersion <= from {
		return
	}
	fd.broadcast(render(rd), rd.Chat.SnapshotVersion)
}

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
