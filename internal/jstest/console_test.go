package jstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/console"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
)

// replicas are two chatds on one database, each serving the console, behind
// a proxy with no sticky sessions: stream tickets are always taken on one
// replica and redeemed on the other, everything else alternates.
type replicas struct {
	front   *httptest.Server
	served  [2]atomic.Int64 // API requests per replica
	envs    [2]*testenv.Env
	down    atomic.Bool // replica 2 is gone: everything goes to replica 1
	token   string
	release chan struct{} // lets the turns whose message says "gate:" answer
}

func startReplicas(t *testing.T) *replicas {
	script, err := mockllm.ParseScript([]byte(`{"rules": [{"contains": "hold", "step": {"hold": true}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	rs := &replicas{release: make(chan struct{})}
	mock := mockllm.New(mockllm.Options{Script: script, ChunkDelay: 5 * time.Millisecond,
		BeforeRespond: func(ctx context.Context, req *mockllm.Request) error {
			if bytes.Contains(req.Body, []byte("gate:")) {
				select {
				case <-rs.release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}})
	llm := httptest.NewServer(mock)
	t.Cleanup(llm.Close)
	one := testenv.New(t, testenv.Options{ProviderURL: llm.URL})
	two := testenv.Reopen(t, one, testenv.Options{ProviderURL: llm.URL})
	one.StartRunner() // both replicas run turns
	rs.token = one.Token("alice")

	var proxies [2]*httputil.ReverseProxy
	for i, env := range []*testenv.Env{one, two} {
		srv := httptest.NewServer(console.Mount(env.Server))
		t.Cleanup(func() {
			env.Server.Shutdown() // end the streams first: Close waits for them
			srv.Close()
		})
		target, _ := url.Parse(srv.URL)
		rs.envs[i] = env
		proxies[i] = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, FlushInterval: -1}
	}
	var turn atomic.Int64
	rs.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(turn.Add(1) % 2)
		switch {
		case strings.HasSuffix(r.URL.Path, "/stream-ticket"):
			i = 0
		case strings.HasSuffix(r.URL.Path, "/stream"):
			i = 1
		}
		if rs.down.Load() {
			i = 0
		}
		if strings.HasPrefix(r.URL.Path, "/api/") {
			rs.served[i].Add(1)
		}
		proxies[i].ServeHTTP(w, r)
	}))
	t.Cleanup(rs.front.Close)
	return rs
}

// TestConsole drives the console in headless chromium, through two
// replicas without sticky sessions: sign in, create a structured chat with
// the form (a schema refused by admission first, with its field error
// shown), watch its receipt arrive live, look the request up, queue and
// delete a structured message, interrupt a slow turn and see the cancelled
// receipt, the chat list live, at 360 px and in the dark theme. Screenshots
// of each step go to the test's artifact directory (go test -artifacts).
func TestConsole(t *testing.T) {
	t.Parallel()
	rs := startReplicas(t)
	shots := t.ArtifactDir()
	p := newTab(t, 1100, 800)
	shot := func(name string) {
		t.Helper()
		t.Logf("screenshot %s", p.screenshot(shots, name))
		// No stray value rendered as text (null, undefined, [object …])
		// outside the JSON blocks.
		var stray []string
		if err := p.eval(`[...document.querySelectorAll("body *:not(pre)")].flatMap((e) => [...e.childNodes])
			.filter((n) => n.nodeType === 3 && /^(null|undefined)$|\[object /.test(n.textContent.trim())).map((n) => n.parentElement.outerHTML)`, &stray); err != nil {
			t.Fatal(err)
		}
		if len(stray) > 0 {
			t.Fatalf("%s: stray text in %q", name, stray)
		}
		// Every control has a label.
		var unlabelled []string
		if err := p.eval(`[...document.querySelectorAll("input, textarea, select")].filter((e) => !e.labels.length).map((e) => e.outerHTML)`, &unlabelled); err != nil {
			t.Fatal(err)
		}
		if len(unlabelled) > 0 {
			t.Fatalf("%s: controls without a label: %q", name, unlabelled)
		}
	}
	const wait = 60 * time.Second
	focusedHeading := func(want string) {
		t.Helper()
		p.waitFor(`document.activeElement?.tagName === "H1" && document.activeElement.textContent === `+jsString(want), wait)
	}

	// Sign in with the keyboard: the token, then Enter.
	p.navigate(rs.front.URL + "/console/")
	p.waitFor(`document.querySelector("#signin-token")`, wait)
	shot("01-sign-in")
	p.typeInto("#signin-token", "not-a-token")
	p.press("Enter")
	p.waitFor(`!document.querySelector("#signin-token-error").hidden`, wait)
	p.run(`document.querySelector("#signin-token").value = ""`)
	p.typeInto("#signin-token", rs.token)
	p.press("Enter")
	focusedHeading("Chats")
	var stored string
	if err := p.eval(`sessionStorage.getItem("chatd.token")`, &stored); err != nil {
		t.Fatal(err)
	}
	if stored != rs.token || strings.Contains(p.text("body"), rs.token) {
		t.Fatalf("the token is in sessionStorage: %v; never shown", stored == rs.token)
	}

	// A structured chat through the form; a schema admission refuses first.
	p.click(`nav a[href="#/new"]`)
	focusedHeading("New chat")
	p.typeInto("#new-content", "gate: report the test command.")
	p.click("details.schema summary")
	p.typeInto("#new-schema", `{"type": "object", "required": "command"}`)
	p.click(`form button[type="submit"]`)
	p.waitFor(`!document.querySelector("#new-schema-error").hidden`, wait)
	if msg := p.text("#new-schema-error"); !strings.HasPrefix(msg, "response_format.json_schema.schema") {
		t.Fatalf("the schema's field error says %q", msg)
	}
	shot("02-new-chat-schema-refused")
	p.run(`document.querySelector("#new-schema").value = ""`)
	p.typeInto("#new-schema", `{"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"], "additionalProperties": false}`)
	p.click(`form button[type="submit"]`)

	// The chat view is live before the turn may answer; the receipt then
	// arrives over the stream.
	p.waitFor(`location.hash.startsWith("#/chats/") && document.querySelector(".chat .conn")?.dataset.state === "live" && document.querySelector(".chat-head")?.dataset.status === "running"`, wait)
	p.waitFor(`document.querySelector(".history .r-user")`, wait)
	if p.text(".history .receipt") != "" {
		t.Fatal("a receipt before the turn was let through")
	}
	shot("03-chat-running")
	close(rs.release)
	p.waitFor(`document.querySelector('.receipt[data-status="succeeded"]')`, wait)
	if v := p.text(`.receipt[data-status="succeeded"] pre.value`); !strings.Contains(v, `"command"`) {
		t.Fatalf("the receipt's value reads %q", v)
	}
	p.waitFor(`document.querySelector(".chat-head").dataset.status === "waiting"`, wait)
	shot("04-receipt-live")

	// The lookup, from the receipt's request link.
	p.click(`.receipt[data-status="succeeded"] a[href^="#/lookup/"]`)
	focusedHeading("Look up a request")
	p.waitFor(`document.querySelector('.lookup-result .receipt[data-status="succeeded"]')`, wait)
	shot("05-lookup")
	p.resize(360, 740)
	p.waitFor(`document.documentElement.scrollWidth <= 360`, wait)
	shot("06-lookup-360px")
	p.resize(1100, 800)

	// A slow turn: queue a structured message with the send form, delete
	// it (cancelled: queue_deleted), then interrupt the turn (cancelled:
	// interrupted).
	p.click(`nav a[href="#/new"]`)
	p.typeInto("#new-content", "hold: write a long report")
	p.click("details.schema summary")
	p.typeInto("#new-schema", `{"type": "object"}`)
	p.click(`form button[type="submit"]`)
	p.waitFor(`location.hash.startsWith("#/chats/") && document.querySelector(".chat-head")?.dataset.status === "running" && document.querySelector(".chat .conn")?.dataset.state === "live"`, wait)
	// Replica 2, which serves every stream, goes away: its streams end and
	// the proxy sends everything to replica 1. The console reconnects there
	// with a new ticket, and what follows arrives over the new stream.
	rs.down.Store(true)
	rs.envs[1].Server.Shutdown()
	p.waitFor(`document.querySelector(".chat .conn").dataset.state === "live" && document.querySelector(".chat .conn").dataset.connections === "2"`, wait)
	p.typeInto("#send-content", "Then summarise it.")
	p.click("form.send details.schema summary")
	p.typeInto("#send-schema", `{"type": "string"}`)
	p.click(`form.send button[type="submit"]`)
	p.waitFor(`document.querySelector(".queue li[data-queued]")`, wait)
	shot("07-slow-turn-queued")
	p.click(".queue li[data-queued] button.danger")
	p.waitFor(`document.querySelector('.receipt[data-status="cancelled"]')?.innerText.includes("queue_deleted") && document.querySelector(".queue").hidden`, wait)
	p.click(".chat .buttons button.danger")
	p.waitFor(`[...document.querySelectorAll('.receipt[data-status="cancelled"]')].some((e) => e.innerText.includes("interrupted"))`, wait)
	p.waitFor(`document.querySelector(".chat-head").dataset.status === "waiting"`, wait)
	shot("08-interrupted")

	// Edit the first message: the replacement keeps its format and runs
	// (no "hold" now) to a succeeded receipt; the earlier receipts stay.
	p.click(".history li.r-user button.link")
	p.waitFor(`document.activeElement?.matches(".history form.edit textarea")`, wait)
	p.run(`document.querySelector(".history form.edit textarea").value = ""`)
	p.typeInto(".history form.edit textarea", "Summarise the report instead.")
	p.click(`.history form.edit button[type="submit"]`)
	p.waitFor(`document.querySelector('.history .receipt[data-status="succeeded"]') && document.querySelectorAll('.history .receipt[data-status="cancelled"]').length === 2 &&
		document.querySelector(".history li.r-user").innerText.includes("Summarise the report instead.") && !document.querySelector(".history form.edit")`, wait)
	shot("09-edited")

	// The chat list: a page of 25 of the 26 chats (two made here, 24 by
	// another client), the 26th on request, and a chat created elsewhere
	// appearing live at the top.
	api := client.New(rs.front.URL, rs.token, nil)
	create := func(text string) {
		t.Helper()
		if _, err := api.CreateChat(t.Context(), client.CreateChatRequest{Content: []client.MessagePart{client.TextPart(text)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 24 {
		create(fmt.Sprintf("Another client's chat %d", i+1))
	}
	p.click(`nav a[href="#/chats"]`)
	focusedHeading("Chats")
	p.waitFor(`document.querySelectorAll(".chats li").length === 25 && document.querySelector(".conn")?.dataset.state === "live"`, wait)
	p.click("section > button") // Load older chats
	p.waitFor(`document.querySelectorAll(".chats li").length === 25 + 1 && document.querySelector("section > button").hidden`, wait)
	create("Made while you watch")
	p.waitFor(`document.querySelectorAll(".chats li").length === 27 && document.querySelector(".chats li a").textContent === "Made while you watch"`, wait)
	shot("10-chats")
	p.colorScheme("dark")
	p.resize(360, 740)
	p.waitFor(`document.documentElement.scrollWidth <= 360`, wait)
	shot("11-chats-360px-dark")
	p.run(`location.hash = [...document.querySelectorAll(".chats li a")].find((a) => a.textContent.startsWith("hold:")).getAttribute("href")`)
	p.waitFor(`document.querySelector(".chat .conn")?.dataset.state === "live" && document.querySelector(".history .receipt")`, wait)
	p.waitFor(`document.documentElement.scrollWidth <= 360`, wait)
	shot("12-chat-360px-dark")

	for i := range rs.served {
		if n := rs.served[i].Load(); n < 5 { // both served the first half
			t.Fatalf("replica %d served %d API requests", i+1, n)
		}
	}
	t.Logf("API requests per replica: %d, %d; screenshots in %s", rs.served[0].Load(), rs.served[1].Load(), shots)
}

// TestConsoleTypeCheck: the console's JavaScript, served as it is (no
// build), type-checks with tsc (checkJs, the DOM's types).
func TestConsoleTypeCheck(t *testing.T) {
	t.Parallel()
	npm(t)
	dir, err := filepath.Abs("../console")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run(t.Context(), dir, nil, bin("tsc"), "-p", "tsconfig.json"); err != nil {
		t.Fatal(err)
	}
}

func jsString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// TestConsolePartialValue: the console opened on a chat while the model
// writes a structured value shows the value parsed so far (the stream's
// structured_output_partial, from the first, thanks to its catch-up),
// never the raw arguments, each rendering growing, the last the
// receipt's value. The console is opened once the call is under way: the
// mock holds it before its chunk 10 (of about 20, 50 ms apart) until the
// console shows the value so far.
func TestConsolePartialValue(t *testing.T) {
	t.Parallel()
	at, hold := make(chan struct{}), make(chan struct{})
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{
		Script: &mockllm.Script{Steps: []mockllm.Step{{Value: json.RawMessage(partialsValue), ChunkDelayMS: 50}}},
		BeforeChunk: func(ctx context.Context, _ *mockllm.Request, n int) error {
			if n == 10 {
				close(at)
				select {
				case <-hold:
				case <-ctx.Done():
				}
			}
			return nil
		}}})
	srv := httptest.NewServer(console.Mount(env.Server))
	t.Cleanup(func() {
		env.Server.Shutdown()
		srv.Close()
	})
	token := env.Token("alice")
	api := client.New(srv.URL, token, nil)
	chat, err := api.CreateChat(t.Context(), client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("write the document")},
		ResponseFormat: &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "doc",
			Schema: json.RawMessage(`{"type":"object","required":["title","items"]}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	const wait = 60 * time.Second
	p := newTab(t, 1100, 800)
	p.navigate(srv.URL + "/console/")
	p.run(`sessionStorage.setItem("chatd.token", ` + jsString(token) + `)`)
	p.navigate(srv.URL + "/console/#/chats")
	p.waitFor(`document.activeElement?.tagName === "H1" && document.activeElement.textContent === "Chats"`, wait)
	// Every rendering of the partial value, as it happens.
	p.run(`window.partials = []; new MutationObserver(() => { const e = document.querySelector(".preview pre.partial");
		if (e && e.textContent !== window.partials.at(-1)) window.partials.push(e.textContent); })
		.observe(document.body, { subtree: true, childList: true, characterData: true })`)
	select {
	case <-at:
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
	p.run(`location.hash = "#/chats/` + chat.Chat.ID.String() + `"`)
	p.waitFor(`document.querySelector(".preview pre.partial")?.textContent.includes("title")`, wait)
	t.Logf("screenshot %s", p.screenshot(t.ArtifactDir(), "13-partial-value"))
	close(hold)
	p.waitFor(`document.querySelector('.receipt[data-status="succeeded"]')`, wait)
	var shown []string
	if err := p.eval(`window.partials`, &shown); err != nil {
		t.Fatal(err)
	}
	var prev map[string]any
	values := 0
	for _, s := range shown {
		if s == "…" {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(s), &v); err != nil || v["output"] != nil {
			t.Fatalf("the preview shows %q, not the parsed value", s)
		}
		if items, _ := v["items"].([]any); prev != nil && len(items) < len(prev["items"].([]any)) {
			t.Fatalf("%s after %v", s, prev)
		}
		if v["items"] == nil {
			v["items"] = []any{}
		}
		prev = v
		values++
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(partialsValue), &want); err != nil {
		t.Fatal(err)
	}
	if values < 3 || !reflect.DeepEqual(prev, want) {
		t.Fatalf("%d values shown, the last %v", values, prev)
	}
}

// TestConsoleStatusWords: a chat reads the same word in the chat list as on
// its own page: an idle chat whose structured request failed is finished
// (its receipt says failed), not "waiting"; a provider's failure shows
// once on the page, not in the header, the receipt and an alert; a
// running chat reads as running; and each receipt's time is inside its
// card. Screenshots: docs/console.md's failed and running chats.
func TestConsoleStatusWords(t *testing.T) {
	t.Parallel()
	script, err := mockllm.ParseScript([]byte(`{"rules": [
		{"contains": "hold", "step": {"hold": true}},
		{"contains": "broken:", "step": {"error": {"status": 400}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	// Unscripted answers are invalid values: three rejections fail a request.
	env := testenv.New(t, testenv.Options{Mock: mockllm.Options{Script: script, Mode: mockllm.ModeInvalid}})
	srv := httptest.NewServer(console.Mount(env.Server))
	t.Cleanup(func() {
		env.Server.Shutdown()
		srv.Close()
	})
	token := env.Token("alice")
	api := client.New(srv.URL, token, nil)
	schema := &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "report",
		Schema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}`)}}
	create := func(text string) string {
		t.Helper()
		res, err := api.CreateChat(t.Context(), client.CreateChatRequest{Content: []client.MessagePart{client.TextPart(text)}, ResponseFormat: schema})
		if err != nil {
			t.Fatal(err)
		}
		return res.Chat.ID.String()
	}
	invalid := create("invalid: report the test command.")
	broken := create("broken: report the test command.")
	held := create("hold: report the test command.")

	const wait = 60 * time.Second
	p := newTab(t, 1100, 800)
	p.navigate(srv.URL + "/console/")
	p.run(`sessionStorage.setItem("chatd.token", ` + jsString(token) + `)`)
	open := func(chat string) {
		t.Helper()
		p.run(`location.hash = "#/chats/` + chat + `"`)
		p.waitFor(`document.querySelector(".chat .conn")?.dataset.state === "live" && document.querySelector(".chat-head")?.dataset.status`, wait)
	}
	// Each receipt's time sits inside its card.
	timeInCard := func() {
		t.Helper()
		var outside int
		if err := p.eval(`[...document.querySelectorAll(".history .receipt-msg")].filter((li) => !li.querySelector(".receipt time, .receipt .receipt-time")).length`, &outside); err != nil {
			t.Fatal(err)
		}
		if outside > 0 {
			t.Errorf("%d receipts have their time outside their card", outside)
		}
	}

	// Rejected three times: the chat is idle ("waiting"): finished, in the
	// list as on its page; its receipt says failed.
	open(invalid)
	p.waitFor(`document.querySelector('.history .receipt[data-status="failed"]') && document.querySelector(".chat-head").dataset.status === "waiting"`, wait)
	if word := p.text(".chat-head .badge"); word != "finished" {
		t.Errorf("an idle chat whose request failed reads %q on its page", word)
	}
	timeInCard()
	t.Logf("screenshot %s", p.screenshot(t.ArtifactDir(), "14-failed-chat"))
	p.run(`location.hash = "#/chats"`)
	item := `.chats li[data-chat="` + invalid + `"] .badge`
	p.waitFor(`document.querySelector('`+item+`')`, wait)
	if word := p.text(item); word != "finished" {
		t.Errorf("the same chat reads %q in the chat list", word)
	}

	// The provider refused: the failure shows once.
	open(broken)
	p.waitFor(`document.querySelector('.history .receipt[data-status="failed"]') && document.querySelector(".chat-head").dataset.status === "error"`, wait)
	if word := p.text(".chat-head .badge"); word != "failed" {
		t.Errorf("a chat whose provider failed reads %q", word)
	}
	var shown int
	if err := p.eval(`document.body.innerText.split("provider_error").length - 1`, &shown); err != nil {
		t.Fatal(err)
	}
	if shown != 1 {
		t.Errorf("the provider's failure shows %d times:\n%s", shown, p.text("main"))
	}
	timeInCard()
	t.Logf("screenshot %s", p.screenshot(t.ArtifactDir(), "15-provider-error"))

	// Held by the mock: running.
	open(held)
	p.waitFor(`document.querySelector(".chat-head").dataset.status === "running" && document.querySelector(".history .r-user")`, wait)
	if word := p.text(".chat-head .badge"); word != "running" {
		t.Errorf("a running chat reads %q", word)
	}
	t.Logf("screenshot %s", p.screenshot(t.ArtifactDir(), "16-running-chat"))
	if _, err := api.Interrupt(t.Context(), uuid.MustParse(held)); err != nil {
		t.Fatal(err)
	}
}
