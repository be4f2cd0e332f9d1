package validate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/xeipuuv/gojsonschema"
)

// TestHermetic proves that admitting and using caller schemas makes no
// HTTP request, no DNS lookup, no TCP connection and opens no file, even
// with the screening bypassed (stage 1 + stage 2 called directly), while
// the same schemas under the library's defaults do all of that.
//
// The tripwires are process-global (http.DefaultTransport,
// net.DefaultResolver, inotify watches), so this test must not run beside
// other tests: it does not call t.Parallel, and Go runs parallel tests only
// after every sequential top-level test of the package has finished.
func TestHermetic(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.json")
	if err := os.WriteFile(secret, []byte(`{"type":"integer"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	tw := armTripwires(t, ln, secret)
	local := "http://" + ln.Addr().String()

	attacks := []struct{ schema, ptr string }{
		{`{"$ref":"file://` + secret + `"}`, "/$ref"},
		{`{"properties":{"a":{"$ref":"file:///etc/passwd"}}}`, "/properties/a/$ref"},
		{`{"$ref":"http://example.invalid/x"}`, "/$ref"},
		{`{"$ref":"` + local + `/x.json"}`, "/$ref"},
		{`{"allOf":[{"$ref":"https://example.invalid/s.json#/definitions/a"}]}`, "/allOf/0/$ref"},
		{`{"$id":"http://example.invalid/root.json","properties":{"a":{"$ref":"other.json"}}}`, "/properties/a/$ref"},
		{`{"id":"http://example.invalid/root.json","items":{"$ref":"other.json"}}`, "/items/$ref"},
		{`{"$id":"file://` + dir + `/","items":{"$ref":"secret.json"}}`, "/items/$ref"},
		{`{"$id":"file://` + secret + `","items":{"$ref":"file:///etc/passwd#/definitions/a"}}`, "/items/$ref"},
		{`{"$id":"` + local + `/","not":{"$ref":"y.json"}}`, "/not/$ref"},
		{`{"$id":"` + local + `/root.json","definitions":{"a":{}},"not":{"$ref":"` + local + `/other.json#/definitions/a"}}`, "/not/$ref"},
		{`{"properties":{"a":{"$id":"` + local + `/sub/","items":{"$ref":"#/definitions/a"}}}}`, "/properties/a/items/$ref"},
		{`{"definitions":{"a":{"$id":"` + local + `/a.json","items":{"$ref":"b.json"}}},"items":{"$ref":"` + local + `/a.json"}}`, "/definitions/a/items/$ref"},
		{`{"$defs":{"a":{"$id":"file://` + dir + `/","items":{"$ref":"secret.json"}}}}`, "/$defs/a/items/$ref"},
		{`{"items":{"$ref":"#/definitions/a"},"definitions":{"a":{"$ref":"` + local + `/d.json"}}}`, "/definitions/a/$ref"},
		{`{"$ref":"#/definitions/nowhere"}`, "/$ref"},
		{`{"items":{"$ref":"#anchor"},"definitions":{"a":{"$id":"#other"}}}`, "/items/$ref"},
		{`{"$schema":"http://example.invalid/meta","type":"string"}`, "/$schema"},
		{`{"$schema":"` + local + `/meta","type":"string"}`, "/$schema"},
		{`{"definitions":{"x":{"$ref":"http://example.invalid/d"}},"type":"object"}`, "/definitions/x/$ref"},
		{`{"$defs":{"x":{"$ref":"file://` + secret + `"}}}`, "/$defs/x/$ref"},
		{`{"properties":{"a":{"$ref":"secret.json"}},"$defs":{"b":{"$ref":"/etc/passwd"}}}`, "/$defs/b/$ref"},
	}
	// Literal data naming the same things must be admitted and load nothing.
	literals := []string{
		`{"const":{"$ref":"file://` + secret + `"},"enum":[{"$id":"` + local + `/"}],"default":{"$ref":"http://example.invalid/"}}`,
		`{"properties":{"$ref":{"const":"file:///etc/passwd"},"$schema":{"enum":["` + local + `/meta"]}},"examples":[{"$ref":"` + local + `/e"}]}`,
		`{"type":"object","properties":{"u":{"type":"string","format":"uri"},"h":{"type":"string","format":"hostname"},"e":{"type":"string","format":"email"}},"patternProperties":{"^x-":{}}}`,
		// Annotations are data too, and local references load nothing,
		// whatever the root $id names.
		`{"x-vendor":{"$ref":"` + local + `/v"},"markdownDescription":{"$ref":"file://` + secret + `"},"discriminator":{"mapping":{"a":"file:///etc/passwd"}}}`,
		`{"$id":"file://` + secret + `","definitions":{"a":{"type":"object","properties":{"next":{"$ref":"#/definitions/a"}}}},"properties":{"x":{"$ref":"#/definitions/a"},"y":{"$ref":"file://` + secret + `#/definitions/a"}}}`,
		`{"$id":"` + local + `/root.json","$defs":{"t":{"items":{"$ref":"#"}}},"anyOf":[{"$ref":"` + local + `/root.json#/$defs/t"},{"$ref":"#/$defs/t"}]}`,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"` + local + `/s","$defs":{"n":{"type":"string"}},"properties":{"$ref":{"$ref":"#/$defs/n","minLength":1,"$comment":"file:///etc/passwd"}}}`,
		// Bundled resources and anchors resolve inside the document.
		`{"definitions":{"a":{"$id":"http://example.invalid/a.json"}},"items":{"$ref":"http://example.invalid/a.json"}}`,
		`{"$ref":"#anchor","definitions":{"a":{"$id":"#anchor"}}}`,
		`{"$defs":{"a":{"$id":"` + local + `/a.json","$defs":{"n":{"type":"string"}},"items":{"$ref":"#/$defs/n"}}},"properties":{"x":{"$ref":"` + local + `/a.json"},"y":{"$ref":"file://` + secret + `"}},"$id":"file://` + secret + `"}`,
		`{"x-defs":{"n":{"$id":"file://` + secret + `","type":"string","items":{"$ref":"file://` + secret + `"}}},"items":{"$ref":"#/x-defs/n"}}`,
	}
	values := []string{`{"u":"` + local + `/x","h":"example.invalid","e":"a@example.invalid","$ref":"file:///etc/passwd"}`, `"file:///etc/passwd"`, `5`, `{"$ref":"http://example.invalid/"}`}

	before := deniedLoads.Load()
	tw.window(t, "screened", func() {
		for _, a := range attacks {
			se := compileErr(t, a.schema)
			if se == nil || se.Pointer != a.ptr {
				t.Errorf("Compile(%s) = %v, want an error at %s", a.schema, se, a.ptr)
			}
		}
		for _, l := range literals {
			s, err := Compile([]byte(l))
			if err != nil {
				t.Errorf("Compile(%s): %v", l, err)
				continue
			}
			for _, v := range values {
				s.Validate([]byte(v))
			}
		}
	})
	if n := deniedLoads.Load() - before; n != 0 {
		t.Errorf("screened schemas made the library attempt %d loads; want none", n)
	}

	// Bypass the screening: stage 1 and stage 2 on the raw documents.
	before = deniedLoads.Load()
	tw.window(t, "screening bypassed", func() {
		for _, a := range attacks {
			doc, err := Decode([]byte(a.schema), SchemaLimits)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range []dialect{draft04, draft06, draft07} {
				_ = metaCheck(doc, d)
			}
			adapt(doc, doc, "", nil)
			compiled, err := compileDoc(doc)
			if err == nil {
				for _, v := range values {
					vd, _ := Decode([]byte(v), ValueLimits)
					_, _ = compiled.Validate(docLoader{vd})
				}
			}
		}
	})
	if n := deniedLoads.Load() - before; n == 0 {
		t.Error("with the screening bypassed the library attempted no load; the attack schemas are not exercising the loader")
	} else {
		t.Logf("screening bypassed: the library attempted %d loads, all refused by the deny-all factory", n)
	}

	// Controls: the library's defaults on the same schemas do reach out,
	// so the tripwires work.
	tw.control(t, func() {
		for _, a := range attacks {
			_, _ = gojsonschema.NewSchema(gojsonschema.NewStringLoader(a.schema))
			sl := gojsonschema.NewSchemaLoader()
			sl.AutoDetect, sl.Validate = true, true
			_, _ = sl.Compile(gojsonschema.NewStringLoader(a.schema))
		}
		_, _ = net.DefaultResolver.LookupHost(context.Background(), "example.invalid")
	})
}

type tripwires struct {
	mu       sync.Mutex
	requests []string
	dials    []string
	accepts  int
	inotify  int
	watches  map[int32]string
}

type tripTransport struct{ tw *tripwires }

func (tt tripTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tt.tw.mu.Lock()
	tt.tw.requests = append(tt.tw.requests, r.Method+" "+r.URL.String())
	tt.tw.mu.Unlock()
	return nil, errors.New("tripwire: HTTP is not allowed here")
}

// armTripwires replaces http.DefaultTransport and net.DefaultResolver,
// counts connections to ln and watches files with inotify (IN_OPEN,
// IN_ACCESS). Everything is restored when the test ends.
func armTripwires(t *testing.T, ln net.Listener, files ...string) *tripwires {
	tw := &tripwires{watches: map[int32]string{}}
	oldTransport, oldResolver := http.DefaultTransport, net.DefaultResolver
	http.DefaultTransport = tripTransport{tw}
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		tw.mu.Lock()
		tw.dials = append(tw.dials, network+" "+address)
		tw.mu.Unlock()
		return nil, errors.New("tripwire: DNS is not allowed here")
	}}
	t.Cleanup(func() { http.DefaultTransport, net.DefaultResolver = oldTransport, oldResolver })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tw.mu.Lock()
			tw.accepts++
			tw.mu.Unlock()
			c.Close()
		}
	}()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	for _, f := range append(files, "/etc/passwd") {
		wd, err := syscall.InotifyAddWatch(fd, f, syscall.IN_OPEN|syscall.IN_ACCESS)
		if err != nil {
			t.Fatalf("watch %s: %v", f, err)
		}
		tw.watches[int32(wd)] = f
	}
	tw.inotify = fd
	return tw
}

// opens drains the inotify queue and returns the watched files opened or
// read since the last call.
func (tw *tripwires) opens(t *testing.T) map[string]int {
	out := map[string]int{}
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Read(tw.inotify, buf)
		if errors.Is(err, syscall.EAGAIN) || n <= 0 {
			return out
		}
		if err != nil {
			t.Fatalf("read inotify: %v", err)
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			out[tw.watches[ev.Wd]]++
			off += syscall.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

func (tw *tripwires) reset() {
	tw.mu.Lock()
	tw.requests, tw.dials, tw.accepts = nil, nil, 0
	tw.mu.Unlock()
}

// window runs f and fails the test if any tripwire fired. /etc/passwd is
// shared with every other process on the machine (user lookups open it),
// so an open seen there alone is retried: a deterministic open by f would
// show up in every run, unrelated traffic will not.
func (tw *tripwires) window(t *testing.T, name string, f func()) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		tw.opens(t)
		tw.reset()
		f()
		time.Sleep(10 * time.Millisecond) // let the listener goroutine count a connection, if any
		opens := tw.opens(t)
		tw.mu.Lock()
		requests, dials, accepts := tw.requests, tw.dials, tw.accepts
		tw.mu.Unlock()
		if len(requests) > 0 || len(dials) > 0 || accepts > 0 {
			t.Fatalf("%s: HTTP requests %q, DNS dials %q, TCP connections %d; want none", name, requests, dials, accepts)
		}
		private := 0
		for file, n := range opens {
			if file != "/etc/passwd" {
				private += n
			}
		}
		if private > 0 {
			t.Fatalf("%s: watched files opened: %v", name, opens)
		}
		if opens["/etc/passwd"] == 0 {
			t.Logf("%s: no HTTP request, DNS lookup, TCP connection or watched-file open (attempt %d)", name, attempt)
			return
		}
		if attempt == 5 {
			t.Fatalf("%s: /etc/passwd opened during all %d runs", name, attempt)
		}
	}
}

// control runs f with the tripwires armed and requires them to fire.
func (tw *tripwires) control(t *testing.T, f func()) {
	t.Helper()
	tw.opens(t)
	tw.reset()
	f()
	opens := tw.opens(t)
	tw.mu.Lock()
	defer tw.mu.Unlock()
	secretOpened := 0
	for file, n := range opens {
		if strings.HasSuffix(file, "secret.json") {
			secretOpened += n
		}
	}
	t.Logf("control (library defaults): %d HTTP requests %q, %d DNS dials, watched-file events %v",
		len(tw.requests), tw.requests, len(tw.dials), opens)
	if len(tw.requests) == 0 || len(tw.dials) == 0 || secretOpened == 0 || opens["/etc/passwd"] == 0 {
		t.Errorf("control: the tripwires did not fire (requests %d, dials %d, secret opens %d, /etc/passwd opens %d)",
			len(tw.requests), len(tw.dials), secretOpened, opens["/etc/passwd"])
	}
	if !strings.Contains(fmt.Sprint(tw.requests), "/meta") {
		t.Errorf("control: the remote $schema was not fetched with AutoDetect and Validate on: %q", tw.requests)
	}
}
