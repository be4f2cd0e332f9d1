package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
)

// formatFlags are the structured-output flags of new and send.
type formatFlags struct {
	schema, name *string
}

func addFormatFlags(f *flagSet) formatFlags {
	return formatFlags{
		schema: f.String("schema", "", "ask for a JSON value valid against the JSON Schema in this file (- reads stdin)"),
		name:   f.String("name", "", "the schema's name (default: from the file name, else \"output\")"),
	}
}

var schemaNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// responseFormat reads the schema file; nil without --schema.
func (ff formatFlags) responseFormat(stdin io.Reader) (*client.ResponseFormat, error) {
	if *ff.schema == "" {
		if *ff.name != "" {
			return nil, usageError("--name needs --schema")
		}
		return nil, nil
	}
	var raw []byte
	var err error
	name := *ff.name
	if *ff.schema == "-" {
		raw, err = io.ReadAll(stdin)
	} else {
		raw, err = os.ReadFile(*ff.schema)
		if name == "" {
			base := strings.TrimSuffix(filepath.Base(*ff.schema), filepath.Ext(*ff.schema))
			name = strings.Map(func(r rune) rune {
				if r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
					return r
				}
				return '_'
			}, strings.TrimSuffix(base, ".schema"))
		}
	}
	if err != nil {
		return nil, usageError("--schema: %v", err)
	}
	if !json.Valid(raw) {
		return nil, usageError("--schema %s: not JSON", *ff.schema)
	}
	if name == "" || !schemaNameRE.MatchString(name) {
		if *ff.name != "" {
			return nil, usageError("--name %q: want 1 to 64 of A-Z a-z 0-9 _ -", name)
		}
		name = "output"
	}
	return &client.ResponseFormat{Type: "json_schema",
		JSONSchema: &client.JSONSchemaFormat{Name: name, Schema: json.RawMessage(raw)}}, nil
}

func chatNew(ctx context.Context, args []string, io IO) error {
	f := newFlagSet("new", "chatd chat new [--schema FILE] [--name NAME] [--model ID] [--title T] [--wait] TEXT", io)
	ff := addFormatFlags(f)
	model := f.String("model", "", "a model id of the server (default: its default model)")
	title := f.String("title", "", "the chat's title (default: the first line of TEXT)")
	wait := f.Bool("wait", false, "wait for the result and print it")
	pos, err := f.parse(args, 1, "the message TEXT")
	if err != nil {
		return err
	}
	rf, err := ff.responseFormat(io.Stdin)
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	req := client.CreateChatRequest{Content: []client.MessagePart{client.TextPart(pos[0])}, Model: *model,
		Title: *title, ResponseFormat: rf}
	res, err := retry(ctx, func(ctx context.Context) (client.CreateChatResponse, error) { return c.CreateChat(ctx, req) })
	if err != nil {
		return err
	}
	fmt.Fprintln(io.Stdout, res.Chat.ID)
	var requestID *uuid.UUID
	if len(res.Messages) > 0 {
		requestID = res.Messages[0].StructuredOutputRequestID
	}
	return afterSend(ctx, c, res.Chat.ID, requestID, *wait, io.Stdout, io.Stderr, 0)
}

func chatSend(ctx context.Context, args []string, io IO) error {
	f := newFlagSet("send", "chatd chat send [--schema FILE] [--name NAME] [--interrupt] [--wait] CHAT TEXT", io)
	ff := addFormatFlags(f)
	interrupt := f.Bool("interrupt", false, "interrupt the running turn (the message is queued after any queued before it)")
	wait := f.Bool("wait", false, "wait for the result and print it")
	pos, err := f.parse(args, 2, "CHAT and the message TEXT")
	if err != nil {
		return err
	}
	chat, err := parseChat(pos[0])
	if err != nil {
		return err
	}
	rf, err := ff.responseFormat(io.Stdin)
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	req := client.SendMessageRequest{Content: []client.MessagePart{client.TextPart(pos[1])}, ResponseFormat: rf}
	if *interrupt {
		req.BusyBehavior = client.BusyInterrupt
	}
	res, err := retry(ctx, func(ctx context.Context) (client.SendMessageResponse, error) { return c.SendMessage(ctx, chat, req) })
	if err != nil {
		return err
	}
	var requestID *uuid.UUID
	switch {
	case res.Message != nil:
		requestID = res.Message.StructuredOutputRequestID
	case res.QueuedMessage != nil:
		requestID = res.QueuedMessage.StructuredOutputRequestID
		fmt.Fprintf(io.Stderr, "chatd: the chat is busy: queued (queue id %d)\n", res.QueuedMessage.ID)
	}
	var after int64
	if res.Message != nil {
		after = res.Message.ID
	}
	if requestID == nil && *wait && res.QueuedMessage != nil {
		return usageError("--wait without --schema waits for an idle chat's reply; the message was queued")
	}
	return afterSend(ctx, c, chat, requestID, *wait, io.Stdout, io.Stderr, after)
}

// afterSend prints the request id of a structured message and, with wait,
// its result (or the reply to an ordinary message after message id after).
// While it waits, provider retries are said on errOut.
func afterSend(ctx context.Context, c *client.Client, chat uuid.UUID, requestID *uuid.UUID, wait bool, out, errOut io.Writer, after int64) error {
	if requestID != nil {
		fmt.Fprintln(out, *requestID)
		if !wait {
			return nil
		}
		watchCtx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			sayRetries(watchCtx, c, chat, after, errOut)
		}()
		res, err := c.WaitStructuredOutput(ctx, *requestID)
		stopWatch()
		<-watched
		if err != nil {
			return err
		}
		return printResult(res, out)
	}
	if !wait {
		return nil
	}
	return waitReply(ctx, c, chat, after, out, errOut)
}

// sayRetries follows the chat and says each provider retry on errOut until
// ctx ends (the stream's own failures end it quietly: the wait reports).
func sayRetries(ctx context.Context, c *client.Client, chat uuid.UUID, after int64, errOut io.Writer) {
	s := c.Stream(ctx, chat, after)
	defer s.Close()
	for {
		ev, err := s.Next()
		if err != nil {
			return
		}
		if ev.Retry != nil {
			sayRetry(ev.Retry, errOut)
		}
	}
}

// sayRetry tells the user that the model provider failed and is tried
// again: chatd waits it out, so without this line the wait looks stuck.
func sayRetry(r *client.ProviderRetry, errOut io.Writer) {
	in := time.Until(r.NextTryAt).Round(100 * time.Millisecond)
	fmt.Fprintf(errOut, "chatd: attempt %d of %d to call the model failed: %s; retrying in %s\n",
		r.Attempt, r.MaxAttempts, r.LastError, max(in, 0))
}

// waitReply follows the chat until its turn ends and prints the assistant
// text it produced.
func waitReply(ctx context.Context, c *client.Client, chat uuid.UUID, after int64, out, errOut io.Writer) error {
	s := c.Stream(ctx, chat, after)
	defer s.Close()
	var reply []string
	for {
		ev, err := s.Next()
		if err != nil {
			return err
		}
		switch {
		case ev.Retry != nil:
			sayRetry(ev.Retry, errOut)
		case ev.Message != nil && ev.Message.Role == client.RoleAssistant:
			for _, p := range ev.Message.Content {
				if p.Type == "text" && p.Text != "" {
					reply = append(reply, p.Text)
				}
			}
		case ev.Type == client.EventStatus && ev.Chat != nil:
			switch ev.Chat.Status {
			case client.StatusWaiting:
				fmt.Fprintln(out, strings.Join(reply, "\n"))
				return nil
			case client.StatusError:
				return &exit{code: ExitFailed, msg: "the turn failed: " + describeError(ev.Chat.LastError)}
			case client.StatusRequiresAction:
				return &exit{code: ExitFailed, msg: "the turn waits for client tool results (chatd chat show " + chat.String() + ")"}
			}
		}
	}
}

func describeError(e *client.StreamError) string {
	if e == nil {
		return "no reason given"
	}
	if e.Code != "" {
		return string(e.Code) + ": " + e.Message
	}
	return e.Message
}

// printResult prints a structured result as one JSON line and maps its
// status to the exit status.
func printResult(res client.StructuredOutputResult, out io.Writer) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, string(b))
	switch res.Status {
	case client.OutputSucceeded:
		return nil
	case client.OutputPending:
		return &exit{code: ExitPending}
	}
	return &exit{code: ExitFailed}
}

// Result runs `chatd result REQUEST_ID [--wait]`.
func Result(ctx context.Context, args []string, io IO) int {
	f := newFlagSet("result", "chatd result [--wait] REQUEST_ID", io)
	wait := f.Bool("wait", false, "wait until the request is terminal")
	run := func() error {
		pos, err := f.parse(args, 1, "a REQUEST_ID")
		if err != nil {
			return err
		}
		id, err := uuid.Parse(pos[0])
		if err != nil {
			return usageError("%q is not a request id (a UUID)", pos[0])
		}
		c, err := f.client()
		if err != nil {
			return err
		}
		var res client.StructuredOutputResult
		if *wait {
			res, err = c.WaitStructuredOutput(ctx, id)
		} else {
			res, err = c.GetStructuredOutput(ctx, id, 0)
		}
		if err != nil {
			return err
		}
		return printResult(res, io.Stdout)
	}
	return status(run(), io.Stderr)
}

func chatList(ctx context.Context, args []string, io IO) error {
	f := newFlagSet("list", "chatd chat list [--limit N] [--cursor C]", io)
	limit := f.Int("limit", 50, "how many chats (1 to 200)")
	cursor := f.String("cursor", "", "the next page's cursor, as printed at the end of a page")
	if _, err := f.parse(args, 0, "no arguments"); err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	res, err := c.ListChats(ctx, *limit, *cursor)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tUPDATED\tTITLE")
	for _, ch := range res.Chats {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ch.ID, ch.Status.Word(), ch.UpdatedAt.Local().Format(time.DateTime), oneLine(ch.Title, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.NextCursor != "" {
		fmt.Fprintf(io.Stderr, "chatd: more chats: chatd chat list --cursor %s\n", res.NextCursor)
	}
	return nil
}

func chatShow(ctx context.Context, args []string, io IO) error {
	f := newFlagSet("show", "chatd chat show [--json] CHAT", io)
	asJSON := f.Bool("json", false, "print {chat, messages, queued_messages} as JSON")
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
	ch, err := c.GetChat(ctx, chat)
	if err != nil {
		return err
	}
	var msgs []client.ChatMessage
	var queue []client.QueuedMessage
	for after := int64(0); ; {
		page, err := c.ListMessages(ctx, chat, after, 1000)
		if err != nil {
			return err
		}
		msgs, queue = append(msgs, page.Messages...), page.QueuedMessages
		if !page.HasMore || len(page.Messages) == 0 {
			break
		}
		after = page.Messages[len(page.Messages)-1].ID
	}
	if *asJSON {
		enc := json.NewEncoder(io.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"chat": ch, "messages": msgs, "queued_messages": queue})
	}
	fmt.Fprint(io.Stdout, renderChat(ch))
	for _, m := range msgs {
		fmt.Fprint(io.Stdout, renderMessage(m))
	}
	fmt.Fprint(io.Stdout, renderQueue(queue))
	return nil
}

func chatInterrupt(ctx context.Context, args []string, io IO) error {
	f := newFlagSet("interrupt", "chatd chat interrupt CHAT", io)
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
	ch, err := c.Interrupt(ctx, chat)
	if err != nil {
		return err
	}
	fmt.Fprint(io.Stdout, renderChat(ch))
	return nil
}

func chatDelete(ctx context.Context, args []string, io IO) error {
	f := newFlagSet("delete", "chatd chat delete CHAT", io)
	c, chat, err := f.chatArg(args)
	if err != nil {
		return err
	}
	res, err := c.DeleteChat(ctx, chat)
	if err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "deleted %d chat(s)", len(res.DeletedChatIDs))
	if n := len(res.CancelledRequestIDs); n > 0 {
		fmt.Fprintf(io.Stdout, "; cancelled %d structured request(s) (chat_deleted)", n)
	}
	fmt.Fprintln(io.Stdout)
	return nil
}

func chatExport(ctx context.Context, args []string, io IO) error {
	f := newFlagSet("export", "chatd chat export CHAT", io)
	c, chat, err := f.chatArg(args)
	if err != nil {
		return err
	}
	return c.ExportChat(ctx, chat, io.Stdout)
}

// chatArg parses a command whose one argument is a chat id, and makes its
// client.
func (f *flagSet) chatArg(args []string) (*client.Client, uuid.UUID, error) {
	pos, err := f.parse(args, 1, "a CHAT id")
	if err != nil {
		return nil, uuid.Nil, err
	}
	chat, err := parseChat(pos[0])
	if err != nil {
		return nil, uuid.Nil, err
	}
	c, err := f.client()
	return c, chat, err
}
