package validate

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"strings"
	"testing"

	oracle "github.com/santhosh-tekuri/jsonschema/v6"
)

// TestSpeedVsOracle (CHATD_SPEED=1) measures Schema.Validate against the
// oracle on realistic schemas: the generator fixtures, the order schema
// and the SchemaStore sample's schemas named in CHATD_SPEED_NAMES (a file
// of names, one a line: those both builds admit), over their instances.
// It prints CPU times (median of 5 batches) and the ratio.
func TestSpeedVsOracle(t *testing.T) {
	if os.Getenv("CHATD_SPEED") == "" {
		t.Skip("set CHATD_SPEED=1")
	}
	type work struct {
		name   string
		schema []byte
		insts  [][]byte
	}
	var ws []work
	for _, f := range loadGeneratorFixtures(t) {
		w := work{name: f.name, schema: f.schema}
		for _, v := range append(f.valid, f.invalid...) {
			w.insts = append(w.insts, v)
		}
		ws = append(ws, w)
	}
	ws = append(ws, work{name: "order", schema: []byte(realisticSchema), insts: [][]byte{[]byte(realisticValue(15))}})
	names := map[string]bool{}
	if p := os.Getenv("CHATD_SPEED_NAMES"); p != "" {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range strings.Fields(string(raw)) {
			names[n] = true
		}
	}
	f, err := os.Open("testdata/schemastore/draft7-sample.jsonl.gz")
	if err == nil {
		zr, _ := gzip.NewReader(f)
		sc := bufio.NewScanner(zr)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var e struct {
				Name      string            `json:"name"`
				RemoteRef bool              `json:"remote_ref"`
				Schema    json.RawMessage   `json:"schema"`
				Valid     []json.RawMessage `json:"valid"`
				Invalid   []json.RawMessage `json:"invalid"`
			}
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.RemoteRef || !names[e.Name] {
				continue
			}
			var b bytes.Buffer
			json.Compact(&b, e.Schema)
			w := work{name: e.Name, schema: b.Bytes()}
			for _, v := range append(e.Valid, e.Invalid...) {
				var vb bytes.Buffer
				json.Compact(&vb, v)
				w.insts = append(w.insts, vb.Bytes())
			}
			ws = append(ws, w)
		}
		f.Close()
	}
	var chatd, orc float64
	n := 0
	for _, w := range ws {
		s, err := Compile(w.schema)
		if err != nil {
			t.Logf("%s: refused: %v", w.name, err)
			continue
		}
		doc, _ := oracle.UnmarshalJSON(bytes.NewReader(w.schema))
		c := oracle.NewCompiler()
		c.DefaultDraft(oracle.Draft7)
		c.AssertFormat()
		c.UseLoader(noLoader{})
		c.AddResource("urn:x", doc)
		o, err := c.Compile("urn:x")
		if err != nil {
			continue
		}
		var insts []any
		for _, v := range w.insts {
			x, _ := oracle.UnmarshalJSON(bytes.NewReader(v))
			insts = append(insts, x)
		}
		// alternate: chatd, oracle
		cns, _ := measure(func() {
			for _, v := range w.insts {
				s.Validate(v)
			}
		}, 5)
		ons, _ := measure(func() {
			for _, x := range insts {
				_ = o.Validate(x)
			}
		}, 5)
		chatd += cns
		orc += ons
		n++
	}
	t.Logf("SPEED schemas=%d chatd_ms=%.3f oracle_ms=%.3f ratio=%.3f", n, chatd/1e6, orc/1e6, chatd/orc)
}
