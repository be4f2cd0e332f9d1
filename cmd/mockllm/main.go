// Command mockllm serves fake LLM provider APIs for chatd's tests, demos
// and benchmarks: OpenAI Chat Completions, OpenAI Responses, Anthropic
// Messages and Gemini, each in its real wire format (--format chooses). See package
// internal/mockllm for the behaviour and the script format.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/chatd/chatd/internal/mockllm"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fl, code, ok := parseFlags(args, stderr)
	if !ok {
		return code
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	opts, err := fl.options(log)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	return serve(fl, opts, stdout, log)
}

// flags are the command line, each flag also read from the environment.
type flags struct {
	listen, script, mode, chunkDelay, latency, chunks, format string
}

// usage heads the --help text, before the flags.
const usage = `Usage: mockllm [flags]

Serves LLM provider APIs with scripted or generated answers, in their real wire
formats: --format openai is Chat Completions (POST /v1/chat/completions, chatd
provider types openai-compatible and openai-chat), responses is the OpenAI
Responses API (POST /v1/responses, type openai), anthropic is the Anthropic
Messages API (POST /v1/messages, type anthropic, base URL without /v1), gemini
is the Gemini API (POST /v1beta/models/MODEL:streamGenerateContent and
:generateContent, type google, base URL without /v1beta), and all serves the
four. GET /v1/models answers too. Without a script, a request
offering the coder_structured_output tool gets one call of it with a value
generated from its output schema; any other request gets a short text echo.

Flags (each also read from the environment variable named):
`

// parseFlags reads the command line; when it is not to run (--help, a bad
// flag), ok is false and code the exit code.
func parseFlags(args []string, stderr io.Writer) (fl flags, code int, ok bool) {
	fs := flag.NewFlagSet("mockllm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&fl.listen, "listen", envOr("MOCKLLM_LISTEN", "127.0.0.1:9999"), "address to listen on (env MOCKLLM_LISTEN)")
	fs.StringVar(&fl.script, "script", os.Getenv("MOCKLLM_SCRIPT"), "JSON script of canned responses (env MOCKLLM_SCRIPT)")
	fs.StringVar(&fl.mode, "mode", os.Getenv("MOCKLLM_MODE"), "unscripted answers: valid, invalid or text (env MOCKLLM_MODE)")
	fs.StringVar(&fl.chunkDelay, "chunk-delay", envOr("MOCKLLM_CHUNK_DELAY", "0s"), "delay between stream chunks (env MOCKLLM_CHUNK_DELAY)")
	fs.StringVar(&fl.latency, "latency", envOr("MOCKLLM_LATENCY", "0s"), "delay before every response (env MOCKLLM_LATENCY)")
	fs.StringVar(&fl.chunks, "stream-chunks", envOr("MOCKLLM_STREAM_CHUNKS", "0"),
		"send each streamed answer in this many chunks, --chunk-delay apart (0: event by event) (env MOCKLLM_STREAM_CHUNKS)")
	fs.StringVar(&fl.format, "format", envOr("MOCKLLM_FORMAT", "all"), "wire format served: openai, responses, anthropic, gemini or all (env MOCKLLM_FORMAT)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return fl, 0, false
		}
		return fl, 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mockllm: unexpected arguments: %v\n", fs.Args())
		return fl, 2, false
	}
	return fl, 0, true
}

// options checks the flags' values and makes the server's options.
func (fl flags) options(log *slog.Logger) (mockllm.Options, error) {
	opts := mockllm.Options{Mode: fl.mode, Logger: log}
	switch fl.format {
	case mockllm.FormatOpenAI, mockllm.FormatResponses, mockllm.FormatAnthropic, mockllm.FormatGemini:
		opts.Formats = []string{fl.format}
	case "all":
	default:
		return opts, fmt.Errorf("mockllm: --format must be openai, responses, anthropic, gemini or all, not %q", fl.format)
	}
	switch fl.mode {
	case "", mockllm.ModeValid, mockllm.ModeInvalid, mockllm.ModeText:
	default:
		return opts, fmt.Errorf("mockllm: --mode must be valid, invalid or text, not %q", fl.mode)
	}
	var err error
	if opts.ChunkDelay, err = parseDuration("chunk-delay", fl.chunkDelay); err == nil {
		opts.Latency, err = parseDuration("latency", fl.latency)
	}
	if err == nil {
		opts.StreamChunks, err = parseCount("stream-chunks", fl.chunks)
	}
	if err == nil && fl.script != "" {
		opts.Script, err = mockllm.LoadScript(fl.script)
	}
	return opts, err
}

// serve listens, prints the base URL, and serves until SIGINT or SIGTERM,
// then lets held requests go and streams finish for a few seconds.
func serve(fl flags, opts mockllm.Options, stdout io.Writer, log *slog.Logger) int {
	ln, err := net.Listen("tcp", fl.listen)
	if err != nil {
		log.Error("cannot listen", "addr", fl.listen, "error", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	mock := mockllm.New(opts)
	srv := &http.Server{Handler: mock, ReadHeaderTimeout: 10 * time.Second}
	printBaseURL(stdout, fl.format, ln.Addr())
	log.Info("started", "addr", ln.Addr().String(), "format", fl.format, "mode", fl.mode, "script", fl.script,
		"chunk_delay", opts.ChunkDelay, "latency", opts.Latency, "stream_chunks", opts.StreamChunks)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		log.Error("server stopped", "error", err)
		return 1
	case <-ctx.Done():
	}
	log.Info("shutting down")
	mock.Release() // held requests are answered now, not cut off
	// Streams still being written get a few seconds to finish, then are cut.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("forced shutdown", "error", err)
		_ = srv.Close()
	}
	log.Info("stopped")
	return 0
}

// printBaseURL prints the base URL to configure first; Anthropic's SDK
// adds /v1 itself, Google's /v1beta.
func printBaseURL(stdout io.Writer, format string, addr net.Addr) {
	switch format {
	case mockllm.FormatAnthropic, mockllm.FormatGemini:
		fmt.Fprintf(stdout, "mockllm listening on http://%s\n", addr)
	case "all":
		fmt.Fprintf(stdout, "mockllm listening on http://%s/v1\n", addr)
		fmt.Fprintf(stdout, "anthropic and google base URL: http://%s\n", addr)
	default:
		fmt.Fprintf(stdout, "mockllm listening on http://%s/v1\n", addr)
	}
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

func parseDuration(name, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("mockllm: --%s must be a non-negative duration like 20ms, not %q", name, s)
	}
	return d, nil
}

func parseCount(name, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("mockllm: --%s must be a non-negative number, not %q", name, s)
	}
	return n, nil
}
