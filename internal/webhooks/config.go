// Package webhooks delivers structured-request receipts to the endpoints
// the operator configured (never the API: users cannot make the server call
// an address of their choosing). The outbox is a table: the transaction
// that commits a receipt writes one webhook_deliveries row per subscribed
// endpoint (sql/triggers/050_webhooks.sql), and every replica's Deliverer
// claims due rows with a lease, POSTs them signed in the Standard Webhooks
// style, and records the outcome. Delivery is at least once: receivers
// deduplicate on the webhook-id header (or the receipt's request_id).
package webhooks

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/chatd/chatd/internal/config"
)

// Events a webhook can take: a structured request finished with a receipt.
const (
	EventSucceeded = "structured_output.succeeded"
	EventFailed    = "structured_output.failed"
	EventCancelled = "structured_output.cancelled"
)

// Events lists every event, in the order the docs give them.
var Events = []string{EventSucceeded, EventFailed, EventCancelled}

// Defaults of an endpoint's knobs.
const (
	DefaultTimeout  = 10 * time.Second
	DefaultRetryFor = 24 * time.Hour
)

// Secret lengths: a whsec_ secret is the base64 of 24 to 64 bytes (as
// Standard Webhooks libraries generate them); another is used as is and
// needs at least 32 characters.
const (
	minKeyBytes    = 24
	maxKeyBytes    = 64
	minPlainSecret = 32
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// endpoint is a checked config.Webhook.
type endpoint struct {
	name     string
	url      string
	key      []byte
	events   []string
	timeout  time.Duration
	retryFor time.Duration
}

// Check checks the configs as the config file states them, without reading
// the environment, so that a bad file fails before anything starts.
func Check(cfgs []config.Webhook) error {
	_, err := parse(cfgs, func(string) string { return "" }, false)
	return err
}

// parse checks the configs; with resolve, secret_env is read through getenv
// and must hold a valid secret.
func parse(cfgs []config.Webhook, getenv func(string) string, resolve bool) ([]endpoint, error) {
	seen := map[string]bool{}
	out := make([]endpoint, 0, len(cfgs))
	for i, c := range cfgs {
		where := fmt.Sprintf("webhooks[%d]", i)
		if !nameRE.MatchString(c.Name) {
			return nil, fmt.Errorf("%s.name %q: use 1 to 63 lower-case letters, digits, - and _", where, c.Name)
		}
		where = fmt.Sprintf("webhook %q", c.Name)
		if seen[c.Name] {
			return nil, fmt.Errorf("%s is defined twice", where)
		}
		seen[c.Name] = true
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s: url %q must be an absolute http or https URL", where, c.URL)
		}
		if u.User != nil {
			return nil, fmt.Errorf("%s: url must not carry credentials; the signature authenticates chatd", where)
		}
		e := endpoint{name: c.Name, url: c.URL, timeout: DefaultTimeout, retryFor: DefaultRetryFor}
		switch {
		case (c.Secret == "") == (c.SecretEnv == ""):
			return nil, fmt.Errorf("%s: set exactly one of secret and secret_env", where)
		case c.Secret != "":
			if e.key, err = decodeSecret(c.Secret); err != nil {
				return nil, fmt.Errorf("%s: secret: %w", where, err)
			}
		case resolve:
			v := getenv(c.SecretEnv)
			if v == "" {
				return nil, fmt.Errorf("%s: secret_env: the environment variable %s is empty or unset", where, c.SecretEnv)
			}
			if e.key, err = decodeSecret(v); err != nil {
				return nil, fmt.Errorf("%s: secret_env %s: %w", where, c.SecretEnv, err)
			}
		}
		e.events = c.Events
		if len(e.events) == 0 {
			e.events = Events
		}
		for _, ev := range e.events {
			if !slices.Contains(Events, ev) {
				return nil, fmt.Errorf("%s: unknown event %q (%s)", where, ev, strings.Join(Events, ", "))
			}
		}
		e.events = slices.Compact(slices.Sorted(slices.Values(e.events)))
		if e.timeout, err = duration(c.Timeout, DefaultTimeout, time.Second, 5*time.Minute); err != nil {
			return nil, fmt.Errorf("%s: timeout: %w", where, err)
		}
		if e.retryFor, err = duration(c.RetryFor, DefaultRetryFor, time.Second, 30*24*time.Hour); err != nil {
			return nil, fmt.Errorf("%s: retry_for: %w", where, err)
		}
		out = append(out, e)
	}
	return out, nil
}

func duration(s string, def, lo, hi time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi {
		return 0, fmt.Errorf("%q must be a duration from %s to %s", s, lo, hi)
	}
	return d, nil
}

// decodeSecret returns the signing key: the bytes of a whsec_ secret, or a
// plain secret as is.
func decodeSecret(s string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(s, "whsec_"); ok {
		k, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, fmt.Errorf("whsec_ must be followed by standard base64")
		}
		if len(k) < minKeyBytes || len(k) > maxKeyBytes {
			return nil, fmt.Errorf("a whsec_ secret must decode to %d to %d bytes, not %d", minKeyBytes, maxKeyBytes, len(k))
		}
		return k, nil
	}
	if len(s) < minPlainSecret {
		return nil, fmt.Errorf("must be at least %d characters (or whsec_ and base64)", minPlainSecret)
	}
	return []byte(s), nil
}
