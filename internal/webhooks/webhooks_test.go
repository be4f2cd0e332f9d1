package webhooks_test

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/prom"
	"github.com/chatd/chatd/internal/testenv"
	"github.com/chatd/chatd/internal/webhooks"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const reportSchema = `{"type":"object","properties":{"command":{"type":"string","minLength":1}},"required":["command"],"additionalProperties":false}`

// The secret in the Standard Webhooks form: whsec_ and the base64 of the key.
var (
	key    = []byte("0123456789abcdef0123456789abcdef")
	secret = "whsec_" + base64.StdEncoding.EncodeToString(key)
)

// delivery is one POST a receiver accepted as authentic.
type delivery struct {
	ID      string
	Payload struct {
		Type      string                        `json:"type"`
		Timestamp time.Time                     `json:"timestamp"`
		Data      client.StructuredOutputResult `json:"data"`
	}
	Raw []byte
}

// receiver is an endpoint that verifies the signature as a Standard
// Webhooks receiver would, answers with answer(n) (n counts the POSTs, from
// 1), and records the deliveries it answered 2xx, by webhook-id.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	answer func(ctx context.Context, n int) int

	mu      sync.Mutex
	posts   int
	got     map[string][]delivery // by webhook-id, every 2xx one
	arrived chan struct{}
}

func newReceiver(t *testing.T, answer func(ctx context.Context, n int) int) *receiver {
	r := &receiver{t: t, answer: answer, got: map[string][]delivery{}, arrived: make(chan struct{}, 1)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	id, ts, sig := req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp"), req.Header.Get("webhook-signature")
	if err := verify(id, ts, sig, body); err != nil {
		r.t.Errorf("receiver: %v", err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/json" {
		r.t.Errorf("receiver: Content-Type %q", ct)
	}
	r.mu.Lock()
	r.posts++
	n := r.posts
	r.mu.Unlock()
	status := http.StatusNoContent
	if r.answer != nil {
		status = r.answer(req.Context(), n)
	}
	if status >= 200 && status < 300 {
		d := delivery{ID: id, Raw: body}
		if err := json.Unmarshal(body, &d.Payload); err != nil {
			r.t.Errorf("receiver: payload %s: %v", body, err)
		}
		r.mu.Lock()
		r.got[id] = append(r.got[id], d)
		r.mu.Unlock()
	}
	w.WriteHeader(status)
	select {
	case r.arrived <- struct{}{}:
	default:
	}
}

// verify checks a delivery's headers: v1 and the base64 HMAC-SHA256 of
// id.timestamp.body under the secret's key, a timestamp within 5 minutes.
func verify(id, ts, sig string, body []byte) error {
	if id == "" || ts == "" || sig == "" {
		return fmt.Errorf("missing headers: id %q timestamp %q signature %q", id, ts, sig)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return fmt.Errorf("webhook-timestamp %q is not a current unix time", ts)
	}
	want := webhooks.Sign(key, id, ts, body)
	for s := range strings.FieldsSeq(sig) { // several signatures may be sent
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("webhook-signature %q does not verify", sig)
}

// deliveries returns what the receiver accepted so far.
func (r *receiver) deliveries() map[string][]delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]delivery, len(r.got))
	for k, v := range r.got {
		out[k] = append([]delivery(nil), v...)
	}
	return out
}

func (r *receiver) postCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.posts
}

// waitFor waits until cond holds, re-checking when a POST arrives and
// every 100 ms (database state changes after the answer).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

func structured() *client.ResponseFormat {
	return &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report", Schema: json.RawMessage(reportSchema)}}
}

func create(t *testing.T, c *client.Client, text string) (uuid.UUID, uuid.UUID) {
	t.Helper()
	res, err := c.CreateChat(t.Context(), client.CreateChatRequest{
		Content: []client.MessagePart{client.TextPart(text)}, ResponseFormat: structured()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages[0].StructuredOutputRequestID == nil {
		t.Fatal("no structured_output_request_id")
	}
	return res.Chat.ID, *res.Messages[0].StructuredOutputRequestID
}

func wait(t *testing.T, c *client.Client, req uuid.UUID) client.StructuredOutputResult {
	t.Helper()
	res, err := c.WaitStructuredOutput(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// row is a delivery's outbox row.
type row struct {
	State      string
	Attempts   int
	LastStatus *int
	LastError  *string
	Delivered  bool
}

func outbox(t *testing.T, env *testenv.Env, req uuid.UUID, endpoint string) (row, bool) {
	t.Helper()
	var r row
	err := env.Pool.QueryRow(t.Context(), `SELECT state, attempts, last_status, last_error, delivered_at IS NOT NULL
		FROM webhook_deliveries WHERE request_id = $1 AND endpoint = $2`, req, endpoint).
		Scan(&r.State, &r.Attempts, &r.LastStatus, &r.LastError, &r.Delivered)
	if err != nil {
		return r, false
	}
	return r, true
}

// metric reads a counter of env's registry by endpoint and result.
func metric(t *testing.T, env *testenv.Env, name, endpoint, result string) float64 {
	t.Helper()
	s, err := prom.Gather(env.Metrics)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := s.Get(name, "endpoint", endpoint, "result", result)
	return v
}

// A succeeded receipt goes to every endpoint taking the event, signed, with
// the body the lookup API returns; the webhook-id is the request and the
// endpoint; the row says delivered.
func TestReceiptDeliveredSigned(t *testing.T) {
	t.Parallel()
	recv := newReceiver(t, nil)
	other := newReceiver(t, nil)
	env := testenv.New(t, testenv.Options{
		Webhooks: []config.Webhook{
			{Name: "main", URL: recv.srv.URL + "/hook?token=x", Secret: secret},
			{Name: "failures", URL: other.srv.URL, Secret: secret, Events: []string{webhooks.EventFailed}},
		},
		WebhookOptions: webhooks.Options{Poll: 100 * time.Millisecond, Backoff: 10 * time.Millisecond}})
	c := env.Client("alice")
	_, req := create(t, c, "Report the test command.")
	res := wait(t, c, req)
	if res.Status != client.OutputSucceeded {
		t.Fatalf("result %+v", res)
	}
	id := req.String() + ".main"
	waitFor(t, "the delivery", func() bool { return len(recv.deliveries()[id]) > 0 })
	waitFor(t, "the delivered row", func() bool { r, _ := outbox(t, env, req, "main"); return r.State == "delivered" })

	got := recv.deliveries()
	if len(got) != 1 || len(got[id]) != 1 {
		t.Fatalf("deliveries %v, want one of %s", got, id)
	}
	d := got[id][0]
	if d.Payload.Type != webhooks.EventSucceeded || d.Payload.Timestamp.IsZero() {
		t.Errorf("payload type %q timestamp %v", d.Payload.Type, d.Payload.Timestamp)
	}
	want, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct{ Data json.RawMessage }
	_ = json.Unmarshal(d.Raw, &raw)
	if string(raw.Data) != string(want) {
		t.Errorf("payload data\n%s\nwant the lookup's\n%s", raw.Data, want)
	}
	r, _ := outbox(t, env, req, "main")
	if r.Attempts != 1 || r.LastStatus == nil || *r.LastStatus != http.StatusNoContent || r.LastError != nil || !r.Delivered {
		t.Errorf("row %+v", r)
	}
	// The endpoint taking failures only owes nothing.
	if _, ok := outbox(t, env, req, "failures"); ok {
		t.Error("a delivery row for an endpoint not taking the event")
	}
	if n := other.postCount(); n != 0 {
		t.Errorf("the failures endpoint got %d posts", n)
	}
	if v := metric(t, env, "chatd_webhook_deliveries_total", "main", "delivered"); v != 1 {
		t.Errorf("chatd_webhook_deliveries_total{main,delivered} = %v", v)
	}
}

// Failed and cancelled receipts are delivered with their event types, each
// to the endpoints that take it.
func TestFailedAndCancelledEvents(t *testing.T) {
	t.Parallel()
	all := newReceiver(t, nil)
	cancels := newReceiver(t, nil)
	release := make(chan struct{})
	held := make(chan struct{}, 8)
	env := testenv.New(t, testenv.Options{
		Mock: mockllm.Options{Mode: mockllm.ModeInvalid, BeforeRespond: func(ctx context.Context, r *mockllm.Request) error {
			select {
			case held <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}},
		Webhooks: []config.Webhook{
			{Name: "all", URL: all.srv.URL, Secret: secret},
			{Name: "cancels", URL: cancels.srv.URL, Secret: secret, Events: []string{webhooks.EventCancelled}},
		},
		WebhookOptions: webhooks.Options{Poll: 100 * time.Millisecond}})
	c := env.Client("alice")
	chat, first := create(t, c, "first")
	<-held // the turn is in flight: the next message is queued
	sent, err := c.SendMessage(t.Context(), chat, client.SendMessageRequest{
		Content: []client.MessagePart{client.TextPart("second")}, ResponseFormat: structured()})
	if err != nil {
		t.Fatal(err)
	}
	if !sent.Queued || sent.QueuedMessage == nil || sent.QueuedMessage.StructuredOutputRequestID == nil {
		t.Fatalf("the second message was not queued: %+v", sent)
	}
	second := *sent.QueuedMessage.StructuredOutputRequestID
	if _, err := c.DeleteQueued(t.Context(), chat, sent.QueuedMessage.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	if res := wait(t, c, first); res.Status != client.OutputFailed {
		t.Fatalf("first %+v", res)
	}
	if res := wait(t, c, second); res.Status != client.OutputCancelled {
		t.Fatalf("second %+v", res)
	}
	waitFor(t, "three deliveries", func() bool { return len(all.deliveries())+len(cancels.deliveries()) == 3 })
	types := map[string]string{}
	for id, ds := range all.deliveries() {
		types[id] = ds[0].Payload.Type
	}
	for id, ds := range cancels.deliveries() {
		types[id] = ds[0].Payload.Type
	}
	want := map[string]string{
		first.String() + ".all":      webhooks.EventFailed,
		second.String() + ".all":     webhooks.EventCancelled,
		second.String() + ".cancels": webhooks.EventCancelled,
	}
	for id, typ := range want {
		if types[id] != typ {
			t.Errorf("%s: type %q, want %q (all: %v)", id, types[id], typ, types)
		}
	}
	d := cancels.deliveries()[second.String()+".cancels"][0]
	if d.Payload.Data.Status != client.OutputCancelled || d.Payload.Data.Error == nil || d.Payload.Data.RequestID != second {
		t.Errorf("cancelled payload %s", d.Raw)
	}
	// The failed payload is the lookup's answer, its rejected attempts included.
	look, err := c.GetStructuredOutput(t.Context(), first, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := all.deliveries()[first.String()+".all"][0]
	if len(look.Attempts) == 0 || len(f.Payload.Data.Attempts) != len(look.Attempts) {
		t.Errorf("failed payload has %d attempts, the lookup %d: %s", len(f.Payload.Data.Attempts), len(look.Attempts), f.Raw)
	}
}

// An endpoint answering 500 is retried with backoff until it answers 2xx.
func TestRetriedAfterServerErrors(t *testing.T) {
	t.Parallel()
	recv := newReceiver(t, func(_ context.Context, n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	env := testenv.New(t, testenv.Options{
		Webhooks:       []config.Webhook{{Name: "flaky", URL: recv.srv.URL, Secret: secret}},
		WebhookOptions: webhooks.Options{Poll: 50 * time.Millisecond, Backoff: 20 * time.Millisecond}})
	c := env.Client("alice")
	_, req := create(t, c, "Report the test command.")
	wait(t, c, req)
	waitFor(t, "delivered", func() bool { r, _ := outbox(t, env, req, "flaky"); return r.State == "delivered" })
	r, _ := outbox(t, env, req, "flaky")
	if r.Attempts != 3 || r.LastStatus == nil || *r.LastStatus != 200 || r.LastError != nil {
		t.Errorf("row %+v, want 3 attempts ending 200", r)
	}
	if n := recv.postCount(); n != 3 {
		t.Errorf("%d posts, want 3", n)
	}
	if got := recv.deliveries()[req.String()+".flaky"]; len(got) != 1 {
		t.Errorf("%d accepted deliveries, want 1", len(got))
	}
	if f, d := metric(t, env, "chatd_webhook_deliveries_total", "flaky", "failed"),
		metric(t, env, "chatd_webhook_deliveries_total", "flaky", "delivered"); f != 2 || d != 1 {
		t.Errorf("metrics: failed %v delivered %v", f, d)
	}
}

// A delivery still failing retry_for after its receipt is dead, with its
// last answer recorded, and is not sent again.
func TestDeadAfterRetryBound(t *testing.T) {
	t.Parallel()
	recv := newReceiver(t, func(context.Context, int) int { return http.StatusServiceUnavailable })
	env := testenv.New(t, testenv.Options{
		Webhooks:       []config.Webhook{{Name: "down", URL: recv.srv.URL, Secret: secret, RetryFor: "1s"}},
		WebhookOptions: webhooks.Options{Poll: 50 * time.Millisecond, Backoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}})
	c := env.Client("alice")
	_, req := create(t, c, "Report the test command.")
	wait(t, c, req)
	waitFor(t, "dead", func() bool { r, _ := outbox(t, env, req, "down"); return r.State == "dead" })
	r, _ := outbox(t, env, req, "down")
	if r.Attempts < 2 || r.LastStatus == nil || *r.LastStatus != http.StatusServiceUnavailable ||
		r.LastError == nil || *r.LastError != "HTTP 503" || r.Delivered {
		t.Errorf("row %+v", r)
	}
	if n := recv.postCount(); n != r.Attempts {
		t.Errorf("%d posts for %d attempts", n, r.Attempts)
	}
	// Dead no sooner than the bound: the receipt is at least 1 s old.
	var age float64
	if err := env.Pool.QueryRow(t.Context(), `SELECT extract(epoch FROM now() - created_at) FROM webhook_deliveries WHERE request_id = $1`, req).
		Scan(&age); err != nil || age < 1 {
		t.Errorf("dead %vs after the receipt (%v), want past the 1s bound", age, err)
	}
	if d, f := metric(t, env, "chatd_webhook_deliveries_total", "down", "dead"),
		metric(t, env, "chatd_webhook_deliveries_total", "down", "failed"); d != 1 || int(f) != r.Attempts-1 {
		t.Errorf("metrics: dead %v failed %v for %d attempts", d, f, r.Attempts)
	}
	// Nothing is pending any more; /metrics says so.
	body, err := c.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), "\nchatd_webhook_deliveries_pending 0\n") {
		t.Errorf("/metrics without chatd_webhook_deliveries_pending 0")
	}
}

// Two replicas on one database share the deliveries (claims skip rows the
// other holds), and in the normal case each receipt is delivered once.
func TestReplicasShareDeliveries(t *testing.T) {
	t.Parallel()
	// With one POST in flight per replica, two POSTs in flight at once come
	// from both replicas: the first waits for a second to arrive.
	var mu sync.Mutex
	inFlight, paired := 0, make(chan struct{})
	recv := newReceiver(t, func(ctx context.Context, n int) int {
		mu.Lock()
		inFlight++
		if inFlight == 2 {
			select {
			case <-paired:
			default:
				close(paired)
			}
		}
		mu.Unlock()
		defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
		select {
		case <-paired:
		case <-ctx.Done():
		}
		return http.StatusOK
	})
	hooks := []config.Webhook{{Name: "shared", URL: recv.srv.URL, Secret: secret}}
	wo := webhooks.Options{Poll: 50 * time.Millisecond, Concurrency: 1}
	a := testenv.New(t, testenv.Options{Webhooks: hooks, WebhookOptions: wo})
	b := testenv.OnPool(t, a.Pool, testenv.Options{Webhooks: hooks, WebhookOptions: wo})
	const n = 12
	var reqs []uuid.UUID
	for i := range n {
		env := a
		if i%2 == 1 {
			env = b
		}
		_, req := create(t, env.Client("alice"), "Report the test command.")
		reqs = append(reqs, req)
	}
	for _, req := range reqs {
		wait(t, a.Client("alice"), req)
	}
	waitFor(t, "every delivery", func() bool { return len(recv.deliveries()) == n })
	select {
	case <-paired:
	default:
		t.Error("the two replicas never delivered at the same time")
	}
	for _, req := range reqs {
		if got := recv.deliveries()[req.String()+".shared"]; len(got) != 1 {
			t.Errorf("%s delivered %d times", req, len(got))
		}
	}
	da := metric(t, a, "chatd_webhook_deliveries_total", "shared", "delivered")
	db := metric(t, b, "chatd_webhook_deliveries_total", "shared", "delivered")
	if da+db != n || da == 0 || db == 0 {
		t.Errorf("replica a delivered %v, b %v; want %d in all, from both", da, db, n)
	}
	if p := recv.postCount(); p != n {
		t.Errorf("%d posts for %d receipts", p, n)
	}
}
