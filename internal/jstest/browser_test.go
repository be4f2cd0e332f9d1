package jstest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/testenv"
)

// page runs in the browser, on another origin than chatd: it creates a
// structured chat with fetch (CORS preflight: Authorization,
// Idempotency-Key), gets a stream ticket, follows the chat with EventSource
// (which cannot send headers) and reports the receipt to the page's server.
const page = `<!doctype html><meta charset="utf-8"><title>chatd stream</title><script>
const api = %q, token = %q;
const report = (x) => fetch("/report", {method: "POST", body: JSON.stringify(x)});
(async () => {
  const auth = {Authorization: "Bearer " + token};
  let r = await fetch(api + "/api/v1/chats", {method: "POST",
    headers: {...auth, "Content-Type": "application/json", "Idempotency-Key": crypto.randomUUID()},
    body: JSON.stringify({content: [{type: "text", text: "Report the test command."}],
      response_format: {type: "json_schema", json_schema: {name: "report",
        schema: {type: "object", properties: {command: {type: "string"}}, required: ["command"]}}}})});
  if (r.status !== 201) return report({error: "create: " + r.status + " " + await r.text()});
  const chat = (await r.json()).chat.id;
  r = await fetch(api + "/api/v1/chats/" + chat + "/stream-ticket", {method: "POST", headers: auth});
  if (r.status !== 201) return report({error: "ticket: " + r.status});
  const {ticket} = await r.json();
  const es = new EventSource(api + "/api/v1/chats/" + chat + "/stream?ticket=" + encodeURIComponent(ticket));
  es.addEventListener("message", (ev) => {
    const m = JSON.parse(ev.data);
    if (m.structured_output) { es.close(); report({receipt: m.structured_output, lastEventId: ev.lastEventId, requestId: r.headers.get("X-Request-ID")}); }
  });
  es.onerror = () => { es.close(); report({error: "EventSource failed"}); };
})().catch((e) => report({error: String(e)}));
</script>`

// TestBrowserStream: headless chromium follows a chat's stream with
// EventSource and a stream ticket, from another origin, to its receipt.
func TestBrowserStream(t *testing.T) {
	t.Parallel()
	need(t, "chromium")
	type result struct {
		Receipt     struct{ Status, RequestID string }
		LastEventID string
		RequestID   string
		Error       string
	}
	reports := make(chan result, 1)
	// The page's origin must be known before chatd starts: it is the one
	// origin chatd allows.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	origin := "http://" + ln.Addr().String()
	env := testenv.New(t, testenv.Options{CORSOrigins: []string{origin}})
	pageAPI, pageToken := env.API.URL, env.Token("alice")
	site := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/report" {
			var res result
			b, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(b, &res); err != nil {
				res.Error = "bad report: " + string(b)
			}
			select {
			case reports <- res:
			default:
			}
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, page, pageAPI, pageToken)
	}))
	site.Listener.Close()
	site.Listener = ln
	site.Start()
	defer site.Close()

	cmd := exec.Command("chromium", append(chromiumFlags, "--user-data-dir="+t.TempDir(), site.URL+"/")...)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	select {
	case res := <-reports:
		if res.Error != "" || res.Receipt.Status != "succeeded" || res.LastEventID == "" {
			t.Fatalf("the page reported %+v", res)
		}
		t.Logf("the browser received the receipt %+v (SSE id %s)", res.Receipt, res.LastEventID)
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("no report from the browser in 90s; chromium said:\n%s", logs.String())
	}
}
