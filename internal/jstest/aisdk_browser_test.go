package jstest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

// aiPage loads the bundle of sdk/ai-sdk/test/browser/page.ts with chatd's
// URL and a token.
const aiPage = `<!doctype html><meta charset="utf-8"><title>chatd transport</title>
<script>window.CHATD = {url: %q, token: %q};</script>
<script type="module" src="/page.js"></script>`

// TestAISDKBrowser: in headless chromium, on another origin than chatd,
// the AI SDK's chat state with the transport asks for a structured value
// that needs a client tool (get_weather, see aiSDKStep): the tool call
// arrives, the page answers it, and the receipt comes back, the chat's
// stream read with EventSource and stream tickets.
func TestAISDKBrowser(t *testing.T) {
	t.Parallel()
	need(t, "chromium")
	npmAISDK(t)
	dir := t.TempDir()
	if _, err := run(t.Context(), aiSDKDir, nil, aiBin("esbuild"), "test/browser/page.ts", "--bundle", "--format=esm",
		"--platform=browser", "--log-level=warning", "--outfile="+filepath.Join(dir, "page.js")); err != nil {
		t.Fatal(err)
	}
	type result struct {
		Status  string
		Receipt struct {
			Status    string
			RequestID string
			Value     struct{ Forecast string }
			Attempts  int
		}
		Tool     string
		Text     string
		Messages int
		Tickets  int
		Error    string
	}
	reports := make(chan result, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	origin := "http://" + ln.Addr().String()
	env := testenv.New(t, testenv.Options{CORSOrigins: []string{origin}, Mock: mockllm.Options{StepFor: aiSDKStep}})
	site := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/report":
			var res result
			b, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(b, &res); err != nil {
				res.Error = "bad report: " + string(b)
			}
			select {
			case reports <- res:
			default:
			}
		case "/page.js":
			w.Header().Set("Content-Type", "text/javascript")
			http.ServeFile(w, r, filepath.Join(dir, "page.js"))
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, aiPage, env.API.URL, env.Token("alice"))
		}
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
	var res result
	select {
	case res = <-reports:
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("no report from the browser in 90s; chromium said:\n%s", logs.String())
	}
	if res.Error != "" || res.Status != "ready" || res.Receipt.Status != "succeeded" || res.Tool != "output-available" || res.Messages != 2 {
		t.Fatalf("the page reported %+v", res)
	}
	if !strings.Contains(res.Receipt.Value.Forecast, "sunny-30 in Florence") || res.Receipt.Attempts != 1 {
		t.Fatalf("the receipt is %+v", res.Receipt)
	}
	// The value is the receipt's: the server's lookup says the same.
	id, err := uuid.Parse(res.Receipt.RequestID)
	if err != nil {
		t.Fatalf("request id %q: %v", res.Receipt.RequestID, err)
	}
	look, err := env.Client("alice").GetStructuredOutput(t.Context(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want struct{ Forecast string }
	if err := json.Unmarshal(look.Value, &want); err != nil || want.Forecast != res.Receipt.Value.Forecast {
		t.Fatalf("the lookup says %s (%v), the page got %+v", look.Value, err, res.Receipt.Value)
	}
	var text, value any
	if json.Unmarshal([]byte(res.Text), &text) != nil || json.Unmarshal(look.Value, &value) != nil || !reflect.DeepEqual(text, value) {
		t.Fatalf("the message's text is %q, want the receipt's value %s", res.Text, look.Value)
	}
	// Two turns' streams (the first step, the step after the tool result),
	// each opened with a ticket.
	if res.Tickets < 2 {
		t.Fatalf("the page used %d stream tickets, want one per stream (2 or more)", res.Tickets)
	}
	t.Logf("the browser's chat got the receipt %+v through %d stream tickets", res.Receipt, res.Tickets)
}
