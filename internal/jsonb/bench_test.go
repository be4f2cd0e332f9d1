package jsonb

import (
	"encoding/json"
	"runtime"
	"testing"
)

// loop runs fn in b.Loop and also reports the benchmark goroutine's
// thread CPU time per operation (cpu-ns/op), which, unlike ns/op, does not
// grow when other processes compete for the cores. Work done on other
// threads (the garbage collector's background workers) is not in it.
func loop(b *testing.B, fn func() error) {
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	for b.Loop() {
		if err := fn(); err != nil {
			b.Fatal(err)
		}
	}
	if cpu := threadCPU() - start; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// specialParts is cleanParts with text and raw JSON that need the codec:
// the slow path.
func specialParts() []Part {
	parts := cleanParts()
	parts[1].Text += "\x00"
	parts[2].Args = json.RawMessage(`{"command":"printf 'a\u0000b'","cwd":"/work/repo","env":{"GOFLAGS":"-count=1"},"timeout_ms":120000,"note":"lone \ud800"}`)
	return parts
}

// BenchmarkMarshal compares MarshalParts with plain json.Marshal of the
// same parts. The clean case is the fast path and must stay within 1.2x.
func BenchmarkMarshal(b *testing.B) {
	for _, c := range []struct {
		name  string
		parts []Part
	}{{"clean", cleanParts()}, {"special", specialParts()}} {
		b.Run(c.name+"/json.Marshal", func(b *testing.B) {
			loop(b, func() error { _, err := json.Marshal(c.parts); return err })
		})
		b.Run(c.name+"/MarshalParts", func(b *testing.B) {
			loop(b, func() error { _, err := MarshalParts(c.parts); return err })
		})
	}
}

// BenchmarkCheck is the part of MarshalParts that json.Marshal does not do:
// walking the field table (and, for special parts, encoding).
func BenchmarkCheck(b *testing.B) {
	for _, c := range []struct {
		name  string
		parts []Part
	}{{"clean", cleanParts()}, {"special", specialParts()}} {
		b.Run(c.name, func(b *testing.B) {
			loop(b, func() error { _, err := storable(c.parts); return err })
		})
	}
}

// BenchmarkParse compares ParseContent with plain json.Unmarshal.
func BenchmarkParse(b *testing.B) {
	for _, c := range []struct {
		name  string
		parts []Part
	}{{"clean", cleanParts()}, {"special", specialParts()}} {
		stored, err := MarshalParts(c.parts)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name+"/json.Unmarshal", func(b *testing.B) {
			loop(b, func() error { var parts []Part; return json.Unmarshal(stored, &parts) })
		})
		b.Run(c.name+"/ParseContent", func(b *testing.B) {
			loop(b, func() error { _, err := ParseContent(stored); return err })
		})
	}
}
