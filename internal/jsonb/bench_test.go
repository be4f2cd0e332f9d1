package jsonb

import (
	"encoding/json"
	"testing"
)

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
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(c.parts); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/MarshalParts", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := MarshalParts(c.parts); err != nil {
					b.Fatal(err)
				}
			}
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
			b.ReportAllocs()
			for b.Loop() {
				if _, err := storable(c.parts); err != nil {
					b.Fatal(err)
				}
			}
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
			b.ReportAllocs()
			for b.Loop() {
				var parts []Part
				if err := json.Unmarshal(stored, &parts); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/ParseContent", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseContent(stored); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
