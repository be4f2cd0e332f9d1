package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestConnGate: with room for two connections, a request on a third is
// answered 503 with Retry-After and its connection closed, while the two
// keep being served; once one closes, a new connection is served again.
func TestConnGate(t *testing.T) {
	t.Parallel()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	closed := make(chan struct{}, 8)
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed <- struct{}{}
		}
	}
	g := NewConnGate(2, nil)
	g.Install(ts.Config)
	ts.Start()
	defer ts.Close()

	c1, br1 := dialGate(t, ts.Listener.Addr().String())
	c2, br2 := dialGate(t, ts.Listener.Addr().String())
	for _, c := range []struct {
		c  net.Conn
		br *bufio.Reader
	}{{c1, br1}, {c2, br2}} {
		if res := getOn(t, c.c, c.br); res.StatusCode != http.StatusNoContent {
			t.Fatalf("a connection within the bound answered %d", res.StatusCode)
		}
	}
	c3, br3 := dialGate(t, ts.Listener.Addr().String())
	res := getOn(t, c3, br3)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || !res.Close {
		t.Fatalf("the third connection: %d, Retry-After %q, close %v; want 503 with Retry-After, closed", res.StatusCode, res.Header.Get("Retry-After"), res.Close)
	}
	if _, err := br3.ReadByte(); err == nil {
		t.Fatal("the refused connection stayed open")
	}
	if res := getOn(t, c1, br1); res.StatusCode != http.StatusNoContent {
		t.Fatalf("the first connection, again: %d", res.StatusCode)
	}
	c2.Close()
	for g.Open() > 1 { // the server notices the closes (the refused one's, then c2's)
		select {
		case <-closed:
		case <-t.Context().Done():
			t.Fatalf("%d connections still counted", g.Open())
		}
	}
	c4, br4 := dialGate(t, ts.Listener.Addr().String())
	if res := getOn(t, c4, br4); res.StatusCode != http.StatusNoContent {
		t.Fatalf("a connection after one closed: %d", res.StatusCode)
	}
}

func dialGate(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// getOn sends a GET on c and reads its answer, body included.
func getOn(t *testing.T, c net.Conn, br *bufio.Reader) *http.Response {
	t.Helper()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: chatd\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}
