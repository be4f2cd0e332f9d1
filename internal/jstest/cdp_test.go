package jstest

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// chromiumFlags are the flags headless chromium runs with here (no sandbox
// as root, nothing fetched from the network by the browser itself).
var chromiumFlags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars"}

// tab drives one tab of a headless chromium over the DevTools protocol,
// spoken on a pipe (--remote-debugging-pipe: NUL-terminated JSON on fds 3
// and 4), so no port, websocket library or browser download is needed.
type tab struct {
	t       *testing.T
	w       io.Writer
	session string

	mu      sync.Mutex
	next    int
	waiting map[int]chan cdpReply
	dead    error
}

type cdpReply struct {
	Result json.RawMessage
	Error  *struct {
		Code    int
		Message string
	}
}

// newTab starts chromium and opens a blank tab of width×height CSS pixels.
func newTab(t *testing.T, width, height int) *tab {
	t.Helper()
	need(t, "chromium")
	toBrowser, ourEnd, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromBrowser, theirEnd, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("chromium", append(chromiumFlags, "--remote-debugging-pipe", "--user-data-dir="+t.TempDir(), "about:blank")...)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.ExtraFiles = []*os.File{toBrowser, theirEnd} // fds 3 and 4
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	toBrowser.Close()
	theirEnd.Close()
	p := &tab{t: t, w: ourEnd, waiting: map[int]chan cdpReply{}}
	go p.read(fromBrowser)
	t.Cleanup(func() {
		ourEnd.Close() // chromium exits when its pipe closes
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("chromium said:\n%s", logs.String())
		}
	})
	var target struct{ TargetID string }
	p.call("Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var attached struct{ SessionID string }
	p.call("Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	p.session = attached.SessionID
	p.call("Runtime.enable", nil, nil)
	p.call("Page.enable", nil, nil)
	p.resize(width, height)
	return p
}

// read dispatches replies; console messages and uncaught exceptions of
// the page go to the test log.
func (p *tab) read(r io.Reader) {
	br := bufio.NewReader(r)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			p.mu.Lock()
			p.dead = fmt.Errorf("chromium's pipe closed: %w", err)
			for id, ch := range p.waiting {
				close(ch)
				delete(p.waiting, id)
			}
			p.mu.Unlock()
			return
		}
		var m struct {
			ID     int
			Method string
			Params json.RawMessage
			cdpReply
		}
		if err := json.Unmarshal(msg[:len(msg)-1], &m); err != nil {
			continue
		}
		switch {
		case m.ID != 0:
			p.mu.Lock()
			ch := p.waiting[m.ID]
			delete(p.waiting, m.ID)
			p.mu.Unlock()
			if ch != nil {
				ch <- m.cdpReply
			}
		case m.Method == "Runtime.consoleAPICalled" || m.Method == "Runtime.exceptionThrown":
			p.t.Logf("browser %s: %s", m.Method, m.Params)
		}
	}
}

// call sends a command to the tab (or to the browser before it is
// attached) and decodes its result into out; a protocol error fails the test.
func (p *tab) call(method string, params any, out any) {
	p.t.Helper()
	if err := p.try(method, params, out); err != nil {
		p.t.Fatal(err)
	}
}

func (p *tab) try(method string, params any, out any) error {
	ch := make(chan cdpReply, 1)
	p.mu.Lock()
	if p.dead != nil {
		p.mu.Unlock()
		return p.dead
	}
	p.next++
	id := p.next
	p.waiting[id] = ch
	p.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if params == nil {
		msg["params"] = struct{}{}
	}
	if p.session != "" {
		msg["sessionId"] = p.session
	}
	b, _ := json.Marshal(msg)
	if _, err := p.w.Write(append(b, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: no answer: chromium is gone", method)
		}
		if r.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, r.Error.Message, r.Error.Code)
		}
		if out != nil {
			return json.Unmarshal(r.Result, out)
		}
		return nil
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("%s: no answer in 2 minutes", method)
	}
}

func (p *tab) resize(width, height int) {
	p.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil)
}

// colorScheme emulates the system's light or dark preference.
func (p *tab) colorScheme(scheme string) {
	p.call("Emulation.setEmulatedMedia", map[string]any{"features": []map[string]string{{"name": "prefers-color-scheme", "value": scheme}}}, nil)
}

// navigate loads url and waits for its load event.
func (p *tab) navigate(url string) {
	p.t.Helper()
	p.call("Page.navigate", map[string]any{"url": url}, nil)
	p.waitFor(`document.readyState === "complete"`, 30*time.Second)
}

// eval runs an expression (awaiting a promise) and decodes its value.
func (p *tab) eval(expr string, out any) error {
	var res struct {
		Result           struct{ Value json.RawMessage }
		ExceptionDetails *struct {
			Text      string
			Exception struct{ Description string }
		}
	}
	if err := p.try("Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &res); err != nil {
		return err
	}
	if e := res.ExceptionDetails; e != nil {
		return fmt.Errorf("%s: %s", e.Text, e.Exception.Description)
	}
	if out != nil && len(res.Result.Value) > 0 {
		return json.Unmarshal(res.Result.Value, out)
	}
	return nil
}

// run runs a statement in the page.
func (p *tab) run(js string) {
	p.t.Helper()
	if err := p.eval(js, nil); err != nil {
		p.t.Fatal(err)
	}
}

// waitFor waits until the expression is truthy in the page; it is polled
// by the page itself on every animation frame, so the wait ends as soon as
// the DOM says so.
func (p *tab) waitFor(cond string, timeout time.Duration) {
	p.t.Helper()
	js := fmt.Sprintf(`new Promise((resolve, reject) => {
		const end = performance.now() + %d;
		const tick = () => { let ok = false; try { ok = !!(%s); } catch (e) {}
			if (ok) resolve(true); else if (performance.now() > end) reject(new Error("timed out")); else requestAnimationFrame(tick); };
		tick(); })`, timeout.Milliseconds(), cond)
	if err := p.eval(js, nil); err != nil {
		var text string
		_ = p.eval(`document.body ? document.body.innerText : ""`, &text)
		p.t.Fatalf("waiting for %s: %v\nthe page shows:\n%s", cond, err, text)
	}
}

// text is the visible text of the first element matching selector.
func (p *tab) text(selector string) string {
	p.t.Helper()
	var s string
	if err := p.eval(fmt.Sprintf(`document.querySelector(%q)?.innerText ?? ""`, selector), &s); err != nil {
		p.t.Fatal(err)
	}
	return s
}

// click waits for a visible, enabled element and clicks its centre with the
// mouse, as a user would.
func (p *tab) click(selector string) {
	p.t.Helper()
	sel := fmt.Sprintf("%q", selector)
	p.waitFor(`(() => { const e = document.querySelector(`+sel+`); return e && !e.disabled && e.getClientRects().length; })()`, 30*time.Second)
	var at struct{ X, Y float64 }
	if err := p.eval(`(() => { const e = document.querySelector(`+sel+`); e.scrollIntoView({block: "center"});
		const r = e.getBoundingClientRect(); return {x: r.x + r.width / 2, y: r.y + r.height / 2}; })()`, &at); err != nil {
		p.t.Fatal(err)
	}
	for _, typ := range []string{"mousePressed", "mouseReleased"} {
		p.call("Input.dispatchMouseEvent", map[string]any{"type": typ, "x": at.X, "y": at.Y, "button": "left", "clickCount": 1}, nil)
	}
}

// typeInto clicks a field and types text into it.
func (p *tab) typeInto(selector, text string) {
	p.t.Helper()
	p.click(selector)
	p.call("Input.insertText", map[string]any{"text": text}, nil)
}

// press sends a key (Enter, Tab) to the focused element.
func (p *tab) press(key string) {
	p.t.Helper()
	codes := map[string]struct {
		code int
		text string
	}{"Enter": {13, "\r"}, "Tab": {9, ""}}
	k, ok := codes[key]
	if !ok {
		p.t.Fatalf("press: unknown key %s", key)
	}
	down := map[string]any{"type": "keyDown", "key": key, "code": key, "windowsVirtualKeyCode": k.code}
	if k.text != "" {
		down["text"] = k.text
	}
	p.call("Input.dispatchKeyEvent", down, nil)
	p.call("Input.dispatchKeyEvent", map[string]any{"type": "keyUp", "key": key, "code": key, "windowsVirtualKeyCode": k.code}, nil)
}

// screenshot saves the whole page as dir/name.png.
func (p *tab) screenshot(dir, name string) string {
	p.t.Helper()
	var metrics struct {
		CSSContentSize struct{ Width, Height float64 }
	}
	p.call("Page.getLayoutMetrics", nil, &metrics)
	var shot struct{ Data string }
	p.call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": metrics.CSSContentSize.Width, "height": metrics.CSSContentSize.Height, "scale": 1}}, &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		p.t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	return path
}
