// Package cli is the chats command line of the chatd binary: `chatd chat
// new|send|list|show|tail|interrupt`, `chatd result` and `chatd version`.
// It talks HTTP to a server through the public Go client (package client):
// --server or CHATD_URL names it, CHATD_TOKEN carries the token.
//
// Exit statuses: 0 done (a structured result succeeded), 1 a structured
// result failed or was cancelled, 2 a usage error, a transport error or an
// error answer of the server, 3 a result still pending (`result` without
// --wait).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
)

// Exit statuses.
const (
	ExitOK      = 0
	ExitFailed  = 1 // a failed or cancelled structured result
	ExitUsage   = 2 // bad arguments, an unreachable server or an error answer
	ExitPending = 3 // a structured result that is still pending
)

// DefaultServer is the server's address when neither --server nor
// CHATD_URL says otherwise: where `make run` listens.
const DefaultServer = "http://127.0.0.1:8080"

// IO is what a command reads and writes.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv reads the environment (CHATD_URL, CHATD_TOKEN).
	Getenv func(string) string
	// HTTP is the client's transport (nil: http.DefaultClient).
	HTTP *http.Client
}

// exit is an error that ends a command with a status; msg, if not empty,
// is printed to stderr.
type exit struct {
	code int
	msg  string
}

func (e *exit) Error() string { return e.msg }

func usageError(format string, args ...any) error {
	return &exit{code: ExitUsage, msg: fmt.Sprintf(format, args...)}
}

// status turns a command's error into its exit status, printing it.
func status(err error, stderr io.Writer) int {
	if err == nil {
		return ExitOK
	}
	var e *exit
	if errors.As(err, &e) {
		if e.msg != "" {
			fmt.Fprintln(stderr, "chatd:", e.msg)
		}
		return e.code
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	fmt.Fprintln(stderr, "chatd:", strings.TrimPrefix(err.Error(), "chatd: "))
	return ExitUsage
}

const chatUsage = `Usage: chatd chat COMMAND [flags] [args]

Commands (the server is --server or CHATD_URL, default ` + DefaultServer + `;
the token is CHATD_TOKEN, from "chatd token create --user NAME"):
  new [--schema FILE] [--name NAME] [--model ID] [--title T] [--wait] TEXT
        create a chat; prints its id, then the structured request's id (with
        --schema), then with --wait the result (the receipt as JSON, or the
        reply's text)
  send [--schema FILE] [--name NAME] [--interrupt] [--wait] CHAT TEXT
        send a message; prints the request id (with --schema), then with
        --wait the result
  list [--limit N] [--cursor C]
        the chats, most recently active first
  show [--json] CHAT
        a chat, its messages and its queue
  tail [--after ID] [--until-idle] CHAT
        follow a chat live, reconnecting after a dropped connection
  interrupt CHAT
        stop the running turn
  delete CHAT
        delete a chat and its child chats (pending structured requests are
        cancelled, code chat_deleted); prints what went
  export CHAT
        the chat and its child chats as JSON Lines (what chatd import reads)

Exit status: 0 done (a result succeeded), 1 a result failed or was cancelled,
2 a usage, connection or server error.
`

// Chat runs `chatd chat ARGS...` and returns its exit status.
func Chat(ctx context.Context, args []string, io IO) int {
	if len(args) == 0 {
		fmt.Fprint(io.Stderr, chatUsage)
		return ExitUsage
	}
	cmds := map[string]func(context.Context, []string, IO) error{
		"new": chatNew, "send": chatSend, "list": chatList, "show": chatShow, "tail": chatTail,
		"interrupt": chatInterrupt, "delete": chatDelete, "export": chatExport,
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(io.Stdout, chatUsage)
		return ExitOK
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprint(io.Stderr, chatUsage)
		return status(usageError("chat: unknown command %q", args[0]), io.Stderr)
	}
	return status(cmd(ctx, args[1:], io), io.Stderr)
}

// flagSet is a command's flags plus --server.
type flagSet struct {
	*flag.FlagSet
	server *string
	io     IO
}

func newFlagSet(name, synopsis string, io IO) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(io.Stderr, "Usage: %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	def := io.Getenv("CHATD_URL")
	if def == "" {
		def = DefaultServer
	}
	return &flagSet{FlagSet: fs, server: fs.String("server", def, "the chatd server's URL (env CHATD_URL)"), io: io}
}

// parse parses flags wherever they stand among the arguments and checks
// the number of positional arguments.
func (f *flagSet) parse(args []string, want int, names string) ([]string, error) {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &exit{code: ExitUsage}
		}
		if f.NArg() == 0 {
			break
		}
		pos = append(pos, f.Arg(0))
		args = f.Args()[1:]
	}
	if len(pos) != want {
		f.Usage()
		return nil, usageError("%s: want %s", f.Name(), names)
	}
	return pos, nil
}

// client returns a client of the server the flags name.
func (f *flagSet) client() (*client.Client, error) {
	server := strings.TrimRight(*f.server, "/")
	if !strings.HasPrefix(server, "http://") && !strings.HasPrefix(server, "https://") {
		return nil, usageError("--server %q: want an http:// or https:// URL", server)
	}
	token := f.io.Getenv("CHATD_TOKEN")
	if token == "" {
		return nil, usageError(`CHATD_TOKEN is not set (create a token with "chatd token create --user NAME")`)
	}
	return client.New(server, token, f.io.HTTP), nil
}

// parseChat reads a chat id argument.
func parseChat(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, usageError("%q is not a chat id (a UUID)", s)
	}
	return id, nil
}

// retry runs a create or send: it retries, with the same Idempotency-Key, a
// call that failed with a 503 or without an answer (the request may or may
// not have been applied; the key makes the retry safe).
func retry[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	ctx = client.WithIdempotencyKey(ctx, uuid.NewString())
	backoff := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		out, err := call(ctx)
		if err == nil || attempt == 4 || !retryable(err) || ctx.Err() != nil {
			return out, err
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

func retryable(err error) bool {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.StatusCode == http.StatusServiceUnavailable
	}
	return true // no answer: a connection error
}
