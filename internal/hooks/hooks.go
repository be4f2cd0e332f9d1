// Package hooks calls the server-configured stop hooks: webhooks that vet a
// structured request's candidate before its turn finishes, and may send the
// agent back to work with extra context.
//
// Hooks fail closed. A hook that cannot be reached, times out or answers
// something other than a decision is retried; when the retries are spent the
// candidate is not published unvetted: the caller fails the request
// (error code hook_failed).
package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Config is one hook in the server config file.
type Config struct {
	URL string `json:"url"`
	// Timeout per call, e.g. "10s" (default 10s).
	Timeout string `json:"timeout,omitempty"`
	// Events the hook receives; only "stop" exists.
	Events  []string          `json:"events,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// StopEvent is posted to a hook when a turn with a current candidate is
// about to finish.
type StopEvent struct {
	Event     string          `json:"event"` // "stop"
	ChatID    string          `json:"chat_id"`
	RequestID string          `json:"request_id"`
	Name      string          `json:"name"`
	Candidate json.RawMessage `json:"candidate"`
	// Continuations counts earlier "continue" decisions for this request.
	Continuations int `json:"continuations"`
}

// Decision is a hook's answer: {"decision":"finish"} or
// {"decision":"continue","model_context":"...","notice":"..."}.
type Decision struct {
	Decision     string `json:"decision"`
	ModelContext string `json:"model_context,omitempty"`
	// Notice is shown to clients on the control row; defaults to a generic
	// sentence.
	Notice string `json:"notice,omitempty"`
}

// Continue reports whether the hook sends the agent back to work.
func (d Decision) Continue() bool { return d.Decision == "continue" }

// Runner calls the configured hooks.
type Runner struct {
	hooks    []hook
	client   *http.Client
	attempts int
	backoff  time.Duration
}

type hook struct {
	cfg     Config
	timeout time.Duration
}

// New checks the configuration. client may be nil.
func New(cfgs []Config, client *http.Client) (*Runner, error) {
	if client == nil {
		client = &http.Client{}
	}
	r := &Runner{client: client, attempts: 3, backoff: 500 * time.Millisecond}
	for i, c := range cfgs {
		h := hook{cfg: c, timeout: 10 * time.Second}
		if c.URL == "" {
			return nil, fmt.Errorf("hooks[%d]: url is required", i)
		}
		if c.Timeout != "" {
			d, err := time.ParseDuration(c.Timeout)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("hooks[%d]: timeout %q is not a positive duration", i, c.Timeout)
			}
			h.timeout = d
		}
		for _, e := range c.Events {
			if e != "stop" {
				return nil, fmt.Errorf("hooks[%d]: unknown event %q (only \"stop\")", i, e)
			}
		}
		r.hooks = append(r.hooks, h)
	}
	return r, nil
}

// SetRetry changes how often and how fast an unreachable hook is retried.
func (r *Runner) SetRetry(attempts int, backoff time.Duration) {
	r.attempts, r.backoff = max(attempts, 1), backoff
}

// Enabled reports whether any stop hook is configured.
func (r *Runner) Enabled() bool { return r != nil && len(r.hooks) > 0 }

// ErrUnavailable wraps a hook that could not be reached or answered badly.
var ErrUnavailable = errors.New("stop hook unavailable")

// Stop asks each hook in order; the first "continue" wins.
func (r *Runner) Stop(ctx context.Context, ev StopEvent) (Decision, error) {
	ev.Event = "stop"
	body, err := json.Marshal(ev)
	if err != nil {
		return Decision{}, err
	}
	for _, h := range r.hooks {
		d, err := r.call(ctx, h, body)
		if err != nil {
			return Decision{}, err
		}
		if d.Continue() {
			return d, nil
		}
	}
	return Decision{Decision: "finish"}, nil
}

func (r *Runner) call(ctx context.Context, h hook, body []byte) (Decision, error) {
	var last error
	for attempt := 1; attempt <= r.attempts; attempt++ {
		if attempt > 1 {
			select {
			case <-ctx.Done():
				return Decision{}, ctx.Err()
			case <-time.After(r.backoff * time.Duration(1<<(attempt-2))):
			}
		}
		d, err := r.once(ctx, h, body)
		if err == nil {
			return d, nil
		}
		if ctx.Err() != nil {
			return Decision{}, ctx.Err()
		}
		last = err
	}
	return Decision{}, fmt.Errorf("%w: %v", ErrUnavailable, last)
}

func (r *Runner) once(ctx context.Context, h hook, body []byte) (Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return Decision{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return Decision{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return Decision{}, err
	}
	if resp.StatusCode/100 != 2 {
		return Decision{}, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var d Decision
	if err := json.Unmarshal(b, &d); err != nil {
		return Decision{}, fmt.Errorf("the answer is not a decision: %v", err)
	}
	switch d.Decision {
	case "finish":
	case "continue":
		if d.ModelContext == "" {
			return Decision{}, errors.New(`"continue" needs model_context`)
		}
	default:
		return Decision{}, fmt.Errorf(`decision must be "finish" or "continue", not %q`, d.Decision)
	}
	return d, nil
}
