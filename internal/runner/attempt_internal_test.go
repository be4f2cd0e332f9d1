package runner

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/chatd/chatd/client"
)

// An attempt's entry is capped and storable whatever the errors hold.
func TestAttemptEntryCapped(t *testing.T) {
	t.Parallel()
	var a attemptErrors
	for i := range 25 {
		a.errors = append(a.errors, client.AttemptError{InstancePath: fmt.Sprintf("/%d", i), Keyword: "type", Message: "m"})
	}
	a.total = 300
	a.errors[0] = client.AttemptError{InstancePath: "/" + strings.Repeat("é", 600), Keyword: "k\x00", Message: "bad \xff byte and NUL \x00" + strings.Repeat("x", 600)}
	e := a.attempt(2, rejectValue)
	if e.Attempt != 2 || e.Reason != client.AttemptInvalidValue || len(e.Errors) != client.AttemptMaxErrors || e.ErrorsTotal != 300 || !e.Truncated {
		t.Fatalf("entry %+v", e)
	}
	first := e.Errors[0]
	for _, s := range []string{first.InstancePath, first.Keyword, first.Message} {
		if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			t.Fatalf("not storable: %q", s)
		}
	}
	if len(first.InstancePath) > maxAttemptPathBytes || !strings.HasSuffix(first.InstancePath, "…") ||
		len(first.Message) > maxAttemptMessageBytes || !strings.HasSuffix(first.Message, "…") {
		t.Fatalf("not capped: %d-byte path, %d-byte message", len(first.InstancePath), len(first.Message))
	}
	if first.Keyword != "k\uFFFD" || !strings.HasPrefix(first.Message, "bad \uFFFD byte and NUL \uFFFD") {
		t.Fatalf("replaced wrongly: %q %q", first.Keyword, first.Message[:40])
	}
	if e := oneError("", rejectTextOnly, "no call").attempt(1, rejectTextOnly); e.ErrorsTotal != 1 || e.Truncated || len(e.Errors) != 1 {
		t.Fatalf("entry %+v", e)
	}
}
