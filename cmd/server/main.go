// Command chatd is the chatd server and its operator tools:
//
//	chatd server            run the HTTP API and the workers
//	chatd migrate up|down|status
//	chatd token create|list|revoke
//	chatd check             report invariant violations (sql/check.sql)
//	chatd chat ...          use chats over HTTP (internal/cli)
//	chatd result REQUEST_ID a structured request's result
//	chatd version
//
// Every flag has an environment twin (CHATD_*); see `chatd <command> --help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/cli"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/tracing"
)

const usage = `chatd: a durable agent-chat backend on PostgreSQL.

Usage:
  chatd server [flags]                 run the HTTP API and the workers
  chatd migrate up|down|status [flags] manage the database schema
  chatd token create --user NAME       create a user if needed and print a new API token
  chatd token list|revoke ...          list tokens; revoke one by its id
  chatd check [flags]                  check the database's invariants; exit 1 on violations
  chatd user erase NAME                delete a user and everything of theirs; print what went
  chatd export --user NAME             write a user's chats as JSON Lines
  chatd import FILE|-                  read an export into the database
  chatd chat new|send|list|show|tail|interrupt ...
                                       use chats on a server (CHATD_URL, CHATD_TOKEN)
  chatd result [--wait] REQUEST_ID     print a structured request's result
  chatd version                        module version, commit, Go version
  chatd openapi                        print the API's OpenAPI document

Run "chatd <command> --help" for the flags of a command.
`

func main() {
	// SIGHUP (the terminal closed) drains like SIGINT and SIGTERM.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) && !errors.Is(err, errReported) {
			fmt.Fprintln(os.Stderr, "chatd:", err)
		}
		os.Exit(exitCode(err))
	}
}

// exitError carries a specific exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// errReported ends a command that printed its own error.
var errReported = errors.New("reported")

// cliStatus turns an exit status of package cli into run's error.
func cliStatus(code int) error {
	if code == 0 {
		return nil
	}
	return &exitError{code: code, err: errReported}
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 1
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &exitError{code: 2, err: errors.New("a command is required")}
	}
	switch args[0] {
	case "server":
		return cmdServer(ctx, args[1:], stderr)
	case "migrate":
		return cmdMigrate(ctx, args[1:], stdout, stderr)
	case "token":
		return cmdToken(ctx, args[1:], stdout, stderr)
	case "check":
		return cmdCheck(ctx, args[1:], stdout, stderr)
	case "user":
		return cmdUser(ctx, args[1:], stdout, stderr)
	case "export":
		return cmdExport(ctx, args[1:], stdout, stderr)
	case "import":
		return cmdImport(ctx, args[1:], stdout, stderr)
	case "chat":
		return cliStatus(cli.Chat(ctx, args[1:], cli.IO{Stdin: os.Stdin, Stdout: stdout, Stderr: stderr, Getenv: os.Getenv}))
	case "result":
		return cliStatus(cli.Result(ctx, args[1:], cli.IO{Stdin: os.Stdin, Stdout: stdout, Stderr: stderr, Getenv: os.Getenv}))
	case "openapi":
		_, err := stdout.Write(append(httpapi.New(httpapi.Options{}).OpenAPIDocument(), '\n'))
		return err
	case "version", "--version":
		cli.PrintVersion(stdout)
		return nil
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return &exitError{code: 2, err: fmt.Errorf("unknown command %q", args[0])}
}

// flags wraps a FlagSet whose flags default to their CHATD_* environment
// twins. An environment value is parsed by the flag itself, so a malformed
// one (CHATD_WORKERS=abc) is an error, exactly like a malformed flag.
type flags struct {
	*flag.FlagSet
	envErrs []error
	// docs are the flags in the order defined, for the reference
	// (docs/flags.md); --help prints the same help texts.
	docs []flagDoc
}

// flagDoc is one flag as the reference documents it.
type flagDoc struct {
	name, env, help string
}

func newFlags(name, synopsis string, stderr io.Writer) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &flags{FlagSet: fs}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags (each also read from the environment variable shown):\n", synopsis)
		fs.PrintDefaults()
	}
	return f
}

// fromEnv records the flag just defined and sets it from its environment
// variable.
func (f *flags) fromEnv(name, env, help string) {
	f.docs = append(f.docs, flagDoc{name: name, env: env, help: help})
	if v, ok := os.LookupEnv(env); ok {
		if err := f.FlagSet.Set(name, v); err != nil {
			f.envErrs = append(f.envErrs, fmt.Errorf("%s=%q: %w", env, v, err))
		}
	}
}

// Parse refuses malformed environment values, then parses args.
func (f *flags) Parse(args []string) error {
	if err := errors.Join(f.envErrs...); err != nil {
		fmt.Fprintln(f.Output(), err)
		return err
	}
	return f.FlagSet.Parse(args)
}

func (f *flags) String(name, env, def, help string) *string {
	p := f.FlagSet.String(name, def, help+" (env "+env+")")
	f.fromEnv(name, env, help)
	return p
}

func (f *flags) Int(name, env string, def int, help string) *int {
	p := f.FlagSet.Int(name, def, help+" (env "+env+")")
	f.fromEnv(name, env, help)
	return p
}

func (f *flags) Duration(name, env string, def time.Duration, help string) *time.Duration {
	p := f.FlagSet.Duration(name, def, help+" (env "+env+")")
	f.fromEnv(name, env, help)
	return p
}

func (f *flags) Bool(name, env string, def bool, help string) *bool {
	p := f.FlagSet.Bool(name, def, help+" (env "+env+")")
	f.fromEnv(name, env, help)
	return p
}

// databaseFlags are shared by every command that opens the database.
type databaseFlags struct {
	url     *string
	direct  *string // --direct-database-url: url is a transaction pooler
	dataDir *string
	// createCluster and announce, for the tools (token, check): with no
	// --database-url they say on announce which local cluster they use and
	// refuse to create one unless --create-cluster. The server and migrate
	// (nil announce) create it as needed.
	createCluster *bool
	announce      io.Writer
}

// validate parses --database-url and --direct-database-url, so that a
// malformed one is refused before anything else happens.
func (df databaseFlags) validate() error {
	if *df.direct != "" && *df.url == "" {
		return errors.New("--direct-database-url needs --database-url: the direct URL is for a database reached through a transaction pooler, not for the local cluster")
	}
	for _, u := range []struct{ flag, url string }{{"--database-url", *df.url}, {"--direct-database-url", *df.direct}} {
		if u.url == "" {
			continue
		}
		if _, err := pgxpool.ParseConfig(u.url); err != nil {
			return fmt.Errorf("%s: %w", u.flag, err) // pgconn redacts a password
		}
	}
	return nil
}

// addToolDatabaseFlags is addDatabaseFlags plus --create-cluster.
func addToolDatabaseFlags(f *flags, stderr io.Writer) databaseFlags {
	df := addDatabaseFlags(f)
	df.createCluster = f.Bool("create-cluster", "CHATD_CREATE_CLUSTER", false,
		"with no --database-url, create the local PostgreSQL cluster under --data-dir if there is none (otherwise refuse)")
	df.announce = stderr
	return df
}

func addDatabaseFlags(f *flags) databaseFlags {
	return databaseFlags{
		url: f.String("database-url", "CHATD_DATABASE_URL", "",
			"PostgreSQL URL; when empty, chatd runs its own PostgreSQL under --data-dir. One that does not parse stops the command at once (password redacted)"),
		direct: f.String("direct-database-url", "CHATD_DIRECT_DATABASE_URL", "",
			"a session connection to the same database, not through a pooler: set it when --database-url is a transaction pooler "+
				"(PgBouncer pool_mode=transaction). The notification listener and migrations use it; the pool then uses no prepared statements. "+
				"Needs --database-url (docs/operations.md#pgbouncer)"),
		dataDir: f.String("data-dir", "CHATD_DATA_DIR", ".chatd", "directory for the local PostgreSQL cluster (as root, when the postgres account cannot enter it, under /var/lib/chatd/)"),
	}
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(format) {
	case "json":
		return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, opts))), nil
	case "text":
		return slog.New(tracing.LogHandler(slog.NewTextHandler(w, opts))), nil
	}
	return nil, fmt.Errorf("--log-format must be json or text, not %q", format)
}
