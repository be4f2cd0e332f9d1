package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/prom"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/tracing"
)

// Options shape a Deliverer; zero values take the defaults.
type Options struct {
	Logger  *slog.Logger
	Metrics *prometheus.Registry
	// Render turns a finished request into the payload's data: the receipt
	// as the API's lookup renders it (httpapi.RenderResult).
	Render func(store.RequestState) (any, error)
	// Wake fires when requests finished (notify.Hub.Finished); the
	// Deliverer also polls every Poll (default 5s).
	Wake <-chan struct{}
	Poll time.Duration
	// Backoff is the first retry's delay (default 5s); each failure
	// doubles it, up to MaxBackoff (default 1h), with jitter.
	Backoff, MaxBackoff time.Duration
	// Concurrency bounds the POSTs in flight (default 8).
	Concurrency int
	// Transport carries the POSTs (default: a copy of
	// http.DefaultTransport keeping Concurrency idle connections per host,
	// where it keeps 2: POSTs in flight to one endpoint beyond 2 closed
	// their connections and dialed, and shook hands, again).
	Transport http.RoundTripper
}

// Deliverer sends the outbox's due rows to their endpoints.
type Deliverer struct {
	st        *store.Store
	endpoints map[string]endpoint
	names     []string
	lease     time.Duration
	o         Options
	client    *http.Client
	total     *prometheus.CounterVec
}

// New checks the configs, reading secret_env from the environment.
func New(st *store.Store, cfgs []config.Webhook, o Options) (*Deliverer, error) {
	eps, err := parse(cfgs, os.Getenv, true)
	if err != nil {
		return nil, err
	}
	if len(eps) > 0 && o.Render == nil {
		return nil, errors.New("webhooks: Options.Render is required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Poll <= 0 {
		o.Poll = 5 * time.Second
	}
	if o.Backoff <= 0 {
		o.Backoff = 5 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Hour
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = o.Concurrency
		o.Transport = t
	}
	d := &Deliverer{st: st, endpoints: map[string]endpoint{}, o: o,
		// A redirect is an answer other than 2xx: the configured URL is the
		// only address chatd posts receipts to.
		client: &http.Client{Transport: o.Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		total: prom.Counter(o.Metrics, "chatd_webhook_deliveries_total",
			"Webhook delivery attempts this process made, by endpoint and result: delivered (2xx), "+
				"failed (retried later) or dead (failed past the endpoint's retry_for).", "endpoint", "result"),
	}
	var maxTimeout time.Duration
	for _, e := range eps {
		d.endpoints[e.name] = e
		d.names = append(d.names, e.name)
		maxTimeout = max(maxTimeout, e.timeout)
	}
	// A claim outlives the POST and the two short statements around it;
	// after a crash the row is due again once the lease has run out.
	d.lease = maxTimeout + 5*time.Second
	return d, nil
}

// Subscriptions are the events each endpoint takes, for store.SyncWebhooks.
func (d *Deliverer) Subscriptions() map[string][]string {
	out := map[string][]string{}
	for n, e := range d.endpoints {
		out[n] = e.events
	}
	return out
}

// Run delivers until ctx ends. POSTs in flight then finish (each is
// bounded by its endpoint's timeout) and are recorded; database statements
// are never cancelled mid-flight.
func (d *Deliverer) Run(ctx context.Context) {
	if len(d.names) == 0 {
		return
	}
	db := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	freed := make(chan struct{}, d.o.Concurrency)
	busy := 0
	more := true // claim at start, after a wake-up, and while claims come back full
	timer := time.NewTimer(d.o.Poll)
	defer timer.Stop()
	for {
		if more && busy < d.o.Concurrency {
			free := d.o.Concurrency - busy
			rows, err := d.st.ClaimDeliveries(db, d.names, free, d.lease)
			if err != nil {
				d.o.Logger.Warn("webhook claim failed", slog.String("error", err.Error()))
			}
			for _, row := range rows {
				busy++
				wg.Go(func() {
					defer func() { freed <- struct{}{} }()
					d.deliver(db, row)
				})
			}
			// A full claim may have left due rows behind: claim again when
			// a slot frees up. Otherwise wait for a wake-up or the timer.
			more = err == nil && len(rows) == free
		}
		select {
		case <-ctx.Done():
			return
		case <-d.o.Wake:
			more = true
		case <-timer.C:
			more = true
			timer.Reset(d.o.Poll)
		case <-freed:
			busy--
		}
	}
}

// deliver makes one attempt and records it.
func (d *Deliverer) deliver(ctx context.Context, row store.Delivery) {
	e, ok := d.endpoints[row.Endpoint]
	if !ok {
		return // not claimed: ClaimDeliveries names only our endpoints
	}
	log := d.o.Logger.With(slog.String("webhook", e.name), slog.String("structured_request_id", row.RequestID.String()),
		slog.Int("attempt", int(row.Attempt)))
	status, err := d.post(ctx, e, row)
	if err == nil {
		ok, rerr := d.st.DeliveryDone(ctx, row, status)
		switch {
		case rerr != nil:
			// The POST was answered; the row stays claimed and is sent again
			// after the lease (at least once).
			log.Warn("webhook delivered but not recorded", slog.String("error", rerr.Error()))
		case !ok:
			log.Warn("webhook delivered after its claim was lost")
		default:
			d.total.WithLabelValues(e.name, "delivered").Inc()
		}
		return
	}
	backoff := d.backoff(row.Attempt)
	state, rerr := d.st.DeliveryFailed(ctx, row, status, truncate(err.Error(), 500), backoff, e.retryFor)
	if rerr != nil {
		log.Warn("webhook failure not recorded", slog.String("error", rerr.Error()))
		return
	}
	switch state {
	case store.DeliveryDead:
		d.total.WithLabelValues(e.name, "dead").Inc()
		log.Error("webhook delivery dead: retries exhausted", slog.Int("status", status), slog.String("error", err.Error()))
	case store.DeliveryPending:
		d.total.WithLabelValues(e.name, "failed").Inc()
		log.Warn("webhook delivery failed", slog.Int("status", status), slog.String("error", err.Error()),
			slog.Duration("retry_in", backoff))
	}
}

// backoff is the delay after the attempt-th failure: Backoff doubled per
// earlier failure, capped, and drawn from its upper half so that a burst
// of failures spreads out.
func (d *Deliverer) backoff(attempt int32) time.Duration {
	b := d.o.Backoff
	for i := int32(1); i < attempt && b < d.o.MaxBackoff; i++ {
		b *= 2
	}
	b = min(b, d.o.MaxBackoff)
	return b/2 + rand.N(b/2+1)
}

// Payload is the body of a delivery.
type Payload struct {
	// Type is the event, e.g. structured_output.succeeded.
	Type string `json:"type"`
	// Timestamp is when the request finished (its receipt committed).
	Timestamp time.Time `json:"timestamp"`
	// Data is the structured output as GET /api/v1/structured-outputs/{id}
	// returns it.
	Data any `json:"data"`
}

// post sends one delivery; nil error means a 2xx answer. status is the
// HTTP status, 0 when there was none.
func (d *Deliverer) post(ctx context.Context, e endpoint, row store.Delivery) (status int, err error) {
	st, err := d.st.RequestForDelivery(ctx, row.RequestID)
	if err != nil {
		return 0, fmt.Errorf("read receipt: %w", err)
	}
	// In the request's trace; the POST carries it (traceparent).
	ctx, span := tracing.StartWebhook(tracing.Resume(ctx, st.Request.TraceParent), e.name, row.RequestID.String(), int(row.Attempt))
	defer func() { tracing.EndWebhook(span, status, err) }()
	data, err := d.o.Render(st)
	if err != nil {
		return 0, fmt.Errorf("render receipt: %w", err)
	}
	p := Payload{Type: row.Event, Data: data}
	if st.Request.FinishedAt != nil {
		p.Timestamp = st.Request.FinishedAt.UTC()
	}
	body, err := json.Marshal(p)
	if err != nil {
		return 0, err
	}
	id := MessageID(row)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	rctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "chatd-webhooks")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", Sign(e.key, id, ts, body))
	tracing.Inject(rctx, req.Header)
	resp, err := d.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // without the URL, which may hold a token
		}
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// MessageID is a delivery's webhook-id: the same for every attempt of one
// receipt to one endpoint.
func MessageID(row store.Delivery) string { return row.RequestID.String() + "." + row.Endpoint }

// Sign returns the webhook-signature header value for key (the decoded
// secret): "v1," and the base64 HMAC-SHA256 of id.timestamp.body.
func Sign(key []byte, id, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + timestamp + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// truncate cuts s to at most n bytes, on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
