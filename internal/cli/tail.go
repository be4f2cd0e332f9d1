package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/chatd/chatd/client"
)

// chatTail follows a chat's stream and prints it for people; the client's
// stream reconnects with Last-Event-ID after a dropped connection.
func chatTail(ctx context.Context, args []string, io IO) error {
	f := newFlagSet("tail", "chatd chat tail [--after ID] [--until-idle] CHAT", io)
	after := f.Int64("after", 0, "start after this message id (default: the whole history)")
	untilIdle := f.Bool("until-idle", false, "stop once the chat is idle (waiting or error) or waits for tool results")
	pos, err := f.parse(args, 1, "a CHAT id")
	if err != nil {
		return err
	}
	chat, err := parseChat(pos[0])
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	s := c.Stream(ctx, chat, *after)
	defer s.Close()
	var status client.ChatStatus
	reconnects := 0
	for {
		resumedAfter := s.LastID() // what a reconnection inside Next resumes after
		ev, err := s.Next()
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return nil // interrupted by the user
			}
			return err
		}
		if s.Reconnects != reconnects {
			reconnects = s.Reconnects
			fmt.Fprintf(io.Stderr, "chatd: reconnected after message %d\n", resumedAfter)
		}
		switch ev.Type {
		case client.EventMessage:
			fmt.Fprint(io.Stdout, renderMessage(*ev.Message))
		case client.EventStatus:
			if ev.Chat.Status != status {
				status = ev.Chat.Status
				fmt.Fprintf(io.Stdout, "-- %s\n", status.Word())
			}
			if *untilIdle && (status == client.StatusWaiting || status == client.StatusError || status == client.StatusRequiresAction) {
				return nil
			}
		case client.EventQueue:
			fmt.Fprintf(io.Stdout, "-- queue: %d message(s)\n", len(ev.Queue.QueuedMessages))
			fmt.Fprint(io.Stdout, renderQueue(ev.Queue.QueuedMessages))
		case client.EventActionRequired:
			for _, tc := range ev.Action.ToolCalls {
				fmt.Fprintf(io.Stdout, "-- waiting for tool %s(%s)  [%s]\n", tc.ToolName, oneLine(string(tc.Args), 200), tc.ToolCallID)
			}
		case client.EventHistoryReset:
			fmt.Fprintln(io.Stdout, "-- history changed (an edit): messages after it were replaced")
		case client.EventError:
			fmt.Fprintf(io.Stdout, "-- error: %s\n", describeError(ev.Error))
		}
	}
}
