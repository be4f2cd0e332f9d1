package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// Run with e.g. go test -run '^$' -fuzz FuzzDecode -fuzztime 2m ./internal/validate/
// The seed corpus below runs as part of the ordinary tests.

var fuzzDocs = []string{
	`{}`, `[]`, `null`, `true`, `-0`, `1e308`, `1e-308`, `0.5e+3`, `"x"`, `"\ud83d\ude00"`, `"\u00e9<&>"`,
	`{"a":[1,{"b":null}],"c":"d"}`, `{"a":1,"a":2}`, `{"a":{"b":1,"\u0062":2}}`, `{} {}`, `"\ud800"`,
	`"\udc00x"`, `"a\u0000"`, "\"\xff\"", `1e309`, `01`, `[1,]`, `{"a" 1}`, `"\x"`, `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	"1" + strings.Repeat("0", 64), `{"` + strings.Repeat("k", 257) + `":1}`, ` [ 1 , 2 ] `, "[1]\n",
}

// FuzzDecode: the scanner never panics, accepts only what encoding/json
// accepts and decodes it to the same value, and its tree agrees with it.
func FuzzDecode(f *testing.F) {
	for _, d := range fuzzDocs {
		f.Add([]byte(d))
	}
	lim := Limits{MaxBytes: 4096, MaxDepth: 32, MaxNodes: 512, MaxKeyBytes: 256, MaxNumberLen: 64}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Decode(data, lim)
		if err != nil {
			var se *ScanError
			if !errors.As(err, &se) {
				t.Fatalf("error %T %v, want *ScanError", err, err)
			}
			if _, terr := decodeTree(data, lim); terr == nil || terr.Error() != err.Error() {
				t.Fatalf("decodeTree disagrees: %v vs %v", terr, err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		var want any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(v, want) {
			t.Fatalf("Decode(%q) = %#v, encoding/json says %#v", data, v, want)
		}
		tree, err := decodeTree(data, lim)
		if err != nil {
			t.Fatalf("decodeTree rejects what Decode accepts: %v", err)
		}
		enc, _ := json.Marshal(tree.val)
		if int(tree.size) < len(enc) {
			t.Fatalf("size %d < encoded %d for %q", tree.size, len(enc), data)
		}
		if tree.nodes < 1 || int(tree.nodes) > lim.MaxNodes {
			t.Fatalf("nodes %d", tree.nodes)
		}
		// the tree holds every zero as "0" (the library's view of it)
		if !reflect.DeepEqual(zerosAsZero(tree.val), zerosAsZero(want)) {
			t.Fatalf("tree value %#v, want %#v", tree.val, want)
		}
	})
}

// zerosAsZero returns v with every number equal to zero written "0".
func zerosAsZero(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = zerosAsZero(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = zerosAsZero(e)
		}
		return out
	case json.Number:
		if ni, err := parseNumber(string(t)); err == nil && ni.isZero() {
			return json.Number("0")
		}
	}
	return v
}

// FuzzCompile: admission never panics; whatever passes the screening also
// passes stage 1 and compiles (the screening is at least as strict as the
// meta-schema and the library); a compiled schema validates anything
// without panicking and reports within bounds.
func FuzzCompile(f *testing.F) {
	for _, s := range screenedSchemas() {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		`{"$ref":"#"}`, `{"properties":{"$ref":{"const":{"$id":"x"}}}}`, `{"format":"regex"}`, `{"pattern":"(?=x)"}`,
		`{"enum":[1,1.0]}`, `{"minLength":2.0,"maxLength":1e1}`, `{"format":"email","type":["string","number"]}`,
		`{"if":{},"then":{},"format":"uuid"}`, `{"const":-0,"enum":[[-0.0]]}`, `{"multipleOf":1e-300,"maximum":1e308}`,
		`{"patternProperties":{"^a{1,9}$":{"propertyNames":{"maxLength":3}}},"dependencies":{"a":["b"]}}`,
		`{"items":[{"type":"integer"}],"additionalItems":false,"contains":{"const":1},"uniqueItems":true}`,
		`true`, `false`, `[]`, `{"type":"nope"}`, `{"minLength":3,"maxLength":2}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#","id":"a.json","maximum":3,"exclusiveMaximum":true,"definitions":{"p":{"id":"#p"}},"items":{"$ref":"#p"}}`,
		`{"$schema":"http://json-schema.org/draft-06/schema","if":{},"const":1,"_format":"x","x-a":1}`,
		`{"$schema":"https://json-schema.org/draft/2019-09/schema","$recursiveAnchor":true,"items":{"$recursiveRef":"#"},"properties":{"a":true},"unevaluatedProperties":false,"dependentRequired":{"a":["b"]}}`,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","$dynamicAnchor":"n","items":{"$dynamicRef":"#n"},"dependentSchemas":{"a":{}},"enum":[1,1]}`,
		`{"patternProperties":{"^(?!a)":{"type":"string"}},"additionalProperties":false,"propertyNames":{"pattern":"^(?=.)"},"pattern":"^[^\u0000]*$"}`,
	} {
		f.Add([]byte(s))
	}
	values := [][]byte{[]byte(`null`), []byte(`{}`), []byte(`[1,"a",null,{"a":[0.5]}]`), []byte(`"x"`), []byte(`-0`), []byte(`{"a":"b","b":1,"$ref":[]}`)}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Compile(data)
		if err != nil {
			var se *ScanError
			if !errors.As(err, &se) {
				t.Fatalf("error %T %v, want *ScanError", err, err)
			}
			if doc, derr := Decode(data, SchemaLimits); derr == nil {
				// Draft-04's and Draft-06's own meta-schemas refuse what
				// the screening does not look for (a boolean schema in
				// Draft-04, an exclusive flag without its bound)
				if sc, serr := screen(doc); serr == nil && (sc.dialect != draft04 && sc.dialect != draft06 || !strings.Contains(se.Detail, "meta-schema")) {
					t.Fatalf("screening accepted %q but admission failed: %v", data, err)
				}
			}
			return
		}
		for _, v := range append(values, data) {
			r := s.Validate(v)
			if len(r.Errors) > MaxReportedErrors || r.Total < len(r.Errors) || r.Valid() != (len(r.Errors) == 0) {
				t.Fatalf("result %+v", r)
			}
		}
	})
}

// FuzzValidate: fixed schemas, arbitrary values: no panic, bounded and
// consistent results, and the budget refusal only when the estimate is over.
func FuzzValidate(f *testing.F) {
	schemas := []*Schema{}
	for _, s := range []string{realisticSchema, families[1].schema, families[9].schema, families[12].schema, families[22].schema,
		`{"enum":[9007199254740993,{"a":[0.1]}],"uniqueItems":true}`, `{"format":"date-time"}`} {
		schemas = append(schemas, mustCompile(f, s))
	}
	for i, d := range fuzzDocs {
		f.Add(uint8(i), []byte(d))
	}
	f.Add(uint8(0), []byte(realisticValue(3)))
	f.Add(uint8(5), []byte(`[9007199254740992,{"a":[0.10000000000000001]}]`))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		s := schemas[int(which)%len(schemas)]
		r := s.Validate(data)
		if len(r.Errors) > MaxReportedErrors || r.Total < len(r.Errors) || r.Valid() != (len(r.Errors) == 0) {
			t.Fatalf("result %+v", r)
		}
		for _, e := range r.Errors {
			if len(e.Message) > maxMessageBytes+len(TooExpensive) {
				t.Fatalf("message of %d bytes", len(e.Message))
			}
		}
		if len(r.Errors) == 1 && r.Errors[0].Message == TooExpensive {
			v, err := decodeTree(data, ValueLimits)
			if err != nil || !estimateCost(s.model, v, len(data)).over {
				t.Fatalf("refused as too expensive without an estimate over budget")
			}
		}
	})
}

// FuzzGenerated drives the random schema/value generator from the fuzzer's
// seeds: structured inputs reach far more of the screening and the cost
// model than byte mutations of JSON text.
func FuzzGenerated(f *testing.F) {
	for i := range 20 {
		f.Add(uint64(i), uint64(i*7919))
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		g := &gen{rng: rand.New(rand.NewPCG(a, b))}
		schema := g.schema(0)
		s, err := Compile([]byte(schema))
		if err != nil {
			doc, derr := Decode([]byte(schema), SchemaLimits)
			if derr != nil {
				t.Fatalf("generator wrote invalid JSON %s: %v", schema, derr)
			}
			if _, serr := screen(doc); serr == nil {
				t.Fatalf("screening accepted %s but admission failed: %v", schema, err)
			}
			return
		}
		for range 3 {
			raw := []byte(g.value(0))
			r := s.Validate(raw)
			if len(r.Errors) > MaxReportedErrors || r.Total < len(r.Errors) || r.Valid() != (len(r.Errors) == 0) {
				t.Fatalf("result %+v", r)
			}
		}
	})
}
