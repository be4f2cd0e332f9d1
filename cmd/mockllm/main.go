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
	fs := flag.NewFlagSet("mockllm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", envOr("MOCKLLM_LISTEN", "127.0.0.1:9999"), "address to listen on (env MOCKLLM_LISTEN)")
	script := fs.String("script", os.Getenv("MOCKLLM_SCRIPT"), "JSON script of canned responses (env MOCKLLM_SCRIPT)")
	mode := fs.String("mode", os.Getenv("MOCKLLM_MODE"), "unscripted answers: valid, invalid or text (env MOCKLLM_MODE)")
	chunkDelay := fs.String("chunk-delay", envOr("MOCKLLM_CHUNK_DELAY", "0s"), "delay between stream chunks (env MOCKLLM_CHUNK_DELAY)")
	latency := fs.String("latency", envOr("MOCKLLM_LATENCY", "0s"), "delay before every response (env MOCKLLM_LATENCY)")
	chunks := fs.String("stream-chunks", envOr("MOCKLLM_STREAM_CHUNKS", "0"),
		"send each streamed answer in this many chunks, --chunk-delay apart (0: event by event) (env MOCKLLM_STREAM_CHUNKS)")
	format := fs.String("format", envOr("MOCKLLM_FORMAT", "all"), "wire format served: openai, responses, anthropic, gemini or all (env MOCKLLM_FORMAT)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: mockllm [flags]

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
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mockllm: unexpected arguments: %v\n", fs.Args())
		return 2
	}

	log := slog.New(slog.NewTextHandler(stderr, nil))
	opts := mockllm.Options{Mode: *mode, Logger: log}
	switch *format {
	case mockllm.FormatOpenAI, mockllm.FormatResponses, mockllm.FormatAnthropic, mockllm.FormatGemini:
		opts.Formats = []string{*format}
	case "all":
	default:
		fmt.Fprintf(stderr, "mockllm: --format must be openai, responses, anthropic, gemini or all, not %q\n", *format)
		return 2
	}
	switch *mode {
	case "", mockllm.ModeValid, mockllm.ModeInvalid, mockllm.ModeText:
	default:
		fmt.Fprintf(stderr, "mockllm: --mode must be valid, invalid or text, not %q\n", *mode)
		return 2
	}
	var err error
	if opts.ChunkDelay, err = parseDuration("chunk-delay", *chunkDelay); err == nil {
		opts.Latency, err = parseDuration("latency", *latency)
	}
	if err == nil {
		opts.StreamChunks, err = parseCount("stream-chunks", *chunks)
	}
	if err == nil && *script != "" {
		opts.Script, err = mockllm.LoadScript(*script)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Error("cannot listen", "addr", *listen, "error", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	mock := mockllm.New(opts)
	srv := &http.Server{Handler: mock, ReadHeaderTimeout: 10 * time.Second}
	// The first line is the base URL to configure; Anthropic's SDK adds
	// /v1 itself, Google's /v1beta.
	switch *format {
	case mockllm.FormatAnthropic, mockllm.FormatGemini:
		fmt.Fprintf(stdout, "mockllm listening on http://%s\n", ln.Addr())
	case "all":
		fmt.Fprintf(stdout, "mockllm listening on http://%s/v1\n", ln.Addr())
		fmt.Fprintf(stdout, "anthropic and google base URL: http://%s\n", ln.Addr())
	default:
		fmt.Fprintf(stdout, "mockllm listening on http://%s/v1\n", ln.Addr())
	}
	log.Info("started", "addr", ln.Addr().String(), "format", *format, "mode", *mode, "script", *script,
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
