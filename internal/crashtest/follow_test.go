package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
)

// follower is a client that follows one chat with a stream and sends the
// chat a new structured message whenever it is idle. It keeps what the
// stream delivered, upserting by message id as clients do.
type follower struct {
	t      *testing.T
	cl     *client.Client
	chat   uuid.UUID
	stream *client.Stream
	stop   context.CancelFunc
	wg     sync.WaitGroup // the stream's reader

	mu         sync.Mutex
	msgs       map[int64]client.ChatMessage
	deliveries int
}

// follow creates the chat through cl and starts following it; it sends until
// ctx ends, in a goroutine of senders (so that waiting for senders covers
// it). idle waits for the chat to be idle (false: ctx ended). A message
// refused by a server that is down is sent again; one whose answer was lost
// is recorded as unknown.
func follow(t *testing.T, ctx context.Context, senders *sync.WaitGroup, cl *client.Client, id int,
	idle func(context.Context, uuid.UUID) bool, record func(input)) *follower {
	t.Helper()
	f := &follower{t: t, cl: cl, msgs: map[int64]client.ChatMessage{}}
	var created client.CreateChatResponse
	txt := fmt.Sprintf("[c%d m1] Report.", id)
	poll(t, 60*time.Second, "the followed chat to be created", func() bool {
		var err error
		created, err = cl.CreateChat(ctx, client.CreateChatRequest{Content: text(txt), ResponseFormat: structured()})
		return err == nil
	})
	f.chat = created.Chat.ID
	record(input{Chat: f.chat, Text: txt, Request: *created.Messages[0].StructuredOutputRequestID, Known: true})

	streamCtx, stop := context.WithCancel(context.Background())
	f.stop = stop
	f.stream = cl.Stream(streamCtx, f.chat, 0)
	f.wg.Go(func() {
		for {
			ev, err := f.stream.Next()
			if err != nil {
				return
			}
			if ev.Type == client.EventMessage {
				f.mu.Lock()
				f.msgs[ev.Message.ID] = *ev.Message
				f.deliveries++
				f.mu.Unlock()
			}
		}
	})
	senders.Go(func() {
		for i := 2; idle(ctx, f.chat); i++ {
			txt := fmt.Sprintf("[c%d m%d] Report again.", id, i)
			req := client.SendMessageRequest{Content: text(txt), ResponseFormat: structured()}
			res, err := cl.SendMessage(ctx, f.chat, req)
			for errors.Is(err, syscall.ECONNREFUSED) && ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond) // the server is restarting: poll it
				res, err = cl.SendMessage(ctx, f.chat, req)
			}
			if err != nil {
				record(input{Chat: f.chat, Text: txt})
				continue
			}
			in := input{Chat: f.chat, Text: txt, Known: true}
			if res.Message != nil && res.Message.StructuredOutputRequestID != nil {
				in.Request = *res.Message.StructuredOutputRequestID
			}
			record(in)
		}
	})
	return f
}

// verify waits until the stream has delivered every message of the chat as
// REST lists it now, then stops the stream. Call it after the traffic
// settled.
func (f *follower) verify() {
	f.t.Helper()
	var rest client.ListMessagesResponse
	poll(f.t, 30*time.Second, "the stream to deliver every message of its chat", func() bool {
		var err error
		if rest, err = f.cl.ListMessages(context.Background(), f.chat, 0, 1000); err != nil {
			return false
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, m := range rest.Messages {
			got, ok := f.msgs[m.ID]
			x, _ := json.Marshal(got)
			y, _ := json.Marshal(m)
			if !ok || !bytes.Equal(x, y) {
				return false
			}
		}
		return true
	})
	f.stop()
	f.wg.Wait()
	f.t.Logf("the stream delivered the %d messages of its chat in %d message events, reconnecting %d times",
		len(rest.Messages), f.deliveries, f.stream.Reconnects)
}
