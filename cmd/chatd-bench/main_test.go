package main

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	t.Parallel()
	o, err := parse(nil, io.Discard)
	if err != nil || o.Clients != 8 || o.Users != 1 || o.Workers != 0 || o.ProviderLatency != 0 || o.Duration != 0 ||
		o.Ramp != -1 || o.Warmup != 3*time.Second || len(o.ServerFlags) != 0 {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	o, err = parse([]string{"--clients", "1000", "--users", "10", "--provider-latency", "10s", "--provider-chunks", "5",
		"--workers", "-1", "--server-flag=--max-running=8", "--server-flag", "--db-max-conns=24",
		"--baseline", "old/chatd", "--baseline-server-flag=--workers=256", "--pgbench-clients", "8, 1"}, io.Discard)
	if err != nil || o.Clients != 1000 || o.Users != 10 || o.ProviderLatency != 10*time.Second || o.ProviderChunks != 5 ||
		o.Workers != -1 || !slices.Equal(o.ServerFlags, []string{"--max-running=8", "--db-max-conns=24"}) ||
		!slices.Equal(o.BaselineFlags, []string{"--workers=256"}) || !slices.Equal(o.PgbenchClients, []int{8, 1}) {
		t.Fatalf("parsed: %+v, %v", o, err)
	}
	if _, err := parse([]string{"--help"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--users", "0"}, "--users must be between 1 and --clients"},
		{[]string{"--users", "9"}, "--users must be between 1 and --clients (8), not 9"},
		{[]string{"--clients", "0"}, "--clients must be at least 1"},
		{[]string{"--workers", "-2"}, "--workers must be -1"},
		{[]string{"--provider-latency", "-1s"}, "--provider-latency must not be negative"},
		{[]string{"--provider-chunks", "4"}, "--provider-chunks needs a --provider-latency"},
		{[]string{"--provider-latency", "1s", "--provider-chunks", "-1"}, "--provider-chunks must not be negative"},
		{[]string{"--drain", "-1s"}, "--drain must not be negative"},
		{[]string{"--server-flag", "max-running=8"}, "a server flag starts with -"},
		{[]string{"--baseline-server-flag", "workers"}, "a server flag starts with -"},
		{[]string{"--pgbench-clients", "8,x"}, `--pgbench-clients: "x" is not a positive number`},
		{[]string{"--bogus"}, "flag provided but not defined"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		if _, err := parse(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse(%q) = %v, want %q", tc.args, err, tc.want)
		}
	}
}
