package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestMalformedEnvIsAnError: a CHATD_* value the flag cannot parse fails
// the command, as the same value given as a flag does; well-formed values
// become the defaults, and flags still override them.
func TestMalformedEnvIsAnError(t *testing.T) {
	// t.Setenv: not parallel.
	for _, tc := range []struct{ env, value string }{
		{"CHATD_WORKERS", "abc"},
		{"CHATD_LEASE", "30"},
		{"CHATD_MIGRATE", "maybe"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			f := newFlags("server", "chatd server", io.Discard)
			f.Int("workers", "CHATD_WORKERS", 4, "")
			f.Duration("lease", "CHATD_LEASE", time.Second, "")
			f.Bool("migrate", "CHATD_MIGRATE", false, "")
			err := f.Parse(nil)
			if err == nil || !strings.Contains(err.Error(), tc.env) {
				t.Fatalf("Parse = %v, want an error naming %s", err, tc.env)
			}
		})
	}
	t.Setenv("CHATD_WORKERS", "7")
	f := newFlags("server", "chatd server", io.Discard)
	workers := f.Int("workers", "CHATD_WORKERS", 4, "")
	if err := f.Parse(nil); err != nil || *workers != 7 {
		t.Fatalf("CHATD_WORKERS=7: %d, %v", *workers, err)
	}
	f = newFlags("server", "chatd server", io.Discard)
	workers = f.Int("workers", "CHATD_WORKERS", 4, "")
	if err := f.Parse([]string{"--workers", "2"}); err != nil || *workers != 2 {
		t.Fatalf("--workers 2 over CHATD_WORKERS=7: %d, %v", *workers, err)
	}
}
