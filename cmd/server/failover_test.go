package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/dbtest"
)

// TestMultiHostURLNeedsReadWrite: a --database-url naming several hosts
// without target_session_attrs=read-write is used, with a warning that a
// connection may land on a standby; with it, or with one host, no warning.
func TestMultiHostURLNeedsReadWrite(t *testing.T) {
	t.Parallel()
	db := dbtest.NewURL(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("host", q.Get("host")+","+t.TempDir()) // a second host that does not answer
	q.Set("port", q.Get("port")+","+q.Get("port"))
	u.RawQuery = q.Encode()
	twoHosts := u.String()
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()
	for _, c := range []struct {
		url  string
		warn bool
	}{{db, false}, {twoHosts, true}, {u.String(), false}} {
		var logs bytes.Buffer
		d, err := openDatabase(context.Background(), databaseFlags{url: &c.url, direct: new(string)}, 2, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		d.Close()
		if got := strings.Contains(logs.String(), "names several hosts but not target_session_attrs=read-write"); got != c.warn {
			t.Errorf("%s: warned %v, want %v; logs:\n%s", c.url, got, c.warn, logs.String())
		}
	}
}
