package jsonb_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"charm.land/fantasy"
	fantasygoogle "charm.land/fantasy/providers/google"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/provider"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The probes. Each holds NUL, U+E000 and U+E001, alone and in the pairs
// the sentinel scheme writes, so a field the codec skips or half-handles
// cannot come back equal (or cannot be stored at all).
const (
	probeString = "nul:\x00 sentinel:\ue000 next:\ue001 pair:\ue000\ue001 double:\ue000\ue000 end:\ue000"
	// probeRaw has the same in keys and values, escaped and literal, plus a
	// lone surrogate (stored as U+FFFD), a valid pair, and escaped
	// backslashes that must stay literal text.
	probeRaw = `{"k\u0000ey":"v\u0000al","` + "\ue000\ue001" + `":["\ue000","x\u0000y",{"deep\u0000":"\uE000\uE000` + "\ue001" + `"}],` +
		`"literal":"\\u0000 \\ud800","pair":"\ud83d\ude00","lone":"\ud800!","num":12345678901234567890.5}`
	// probeValue is what a reject field (a structured-output value) may
	// hold: sentinel characters are ordinary text there and must be stored
	// exactly, never decoded into NUL.
	probeValue = `{"` + "\ue000\ue001" + `":"` + "\ue000\ue001 \ue000\ue000 \ue000" + `","lit":"\\u0000","n":1.50}`
)

// Values a reject field must refuse: PostgreSQL cannot store them, and
// changing them would change a validated value.
var probeUnstorable = []string{`{"a":"\u0000"}`, `{"\u0000":1}`, `["\ud800"]`, `"\udfff"`}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// shape is how the coverage test treats a field type.
type shape int

const (
	shapeSafe        shape = iota // cannot hold text: booleans, numbers, []byte, time, UUIDs
	shapeString                   // a string or named string type
	shapeRaw                      // json.RawMessage
	shapeStrings                  // slices or arrays, nested to any depth, of strings
	shapeUnsupported              // anything else: maps, interfaces, slices of structs, ...
)

func (s shape) String() string {
	return [...]string{"safe", "string", "raw JSON", "nested strings", "unsupported"}[s]
}

// leaf is one persisted field of Part, below any nested structs.
type leaf struct {
	name  string // Go path below Part, as in the field table
	index []int  // reflect index path from Part
	typ   reflect.Type
	shape shape
}

// leaves lists the persisted fields of t (a struct type), recursing into
// structs and struct pointers.
func leaves(t reflect.Type, prefix string, index []int) []leaf {
	var out []leaf
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() || sf.Tag.Get("json") == "-" {
			continue // encoding/json does not persist it
		}
		name := prefix + sf.Name
		idx := append(append([]int(nil), index...), i)
		ft := sf.Type
		if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct && !knownSafe(ft.Elem()) {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !knownSafe(ft) {
			out = append(out, leaves(ft, name+".", idx)...)
			continue
		}
		out = append(out, leaf{name: name, index: idx, typ: sf.Type, shape: shapeOf(sf.Type)})
	}
	return out
}

func knownSafe(t reflect.Type) bool {
	return t == reflect.TypeFor[time.Time]() || t == reflect.TypeFor[uuid.UUID]()
}

func shapeOf(t reflect.Type) shape {
	switch {
	case t == rawMessageType:
		return shapeRaw
	case knownSafe(t):
		return shapeSafe
	}
	switch t.Kind() {
	case reflect.String:
		return shapeString
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return shapeSafe
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return shapeSafe // []byte: base64 in JSON
		}
		switch shapeOf(t.Elem()) {
		case shapeSafe:
			return shapeSafe
		case shapeString, shapeStrings:
			return shapeStrings
		}
	case reflect.Pointer:
		return shapeOf(t.Elem())
	}
	return shapeUnsupported
}

// probeFor builds a probe value of type t for a string-bearing shape.
func probeFor(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	switch {
	case t == rawMessageType:
		v.SetBytes([]byte(probeRaw))
	case t.Kind() == reflect.String:
		v.SetString(probeString)
	case t.Kind() == reflect.Pointer:
		p := reflect.New(t.Elem())
		p.Elem().Set(probeFor(t.Elem()))
		v.Set(p)
	case t.Kind() == reflect.Slice:
		v.Set(reflect.MakeSlice(t, 2, 2))
		for i := range 2 {
			v.Index(i).Set(probeFor(t.Elem()))
		}
	case t.Kind() == reflect.Array:
		for i := range t.Len() {
			v.Index(i).Set(probeFor(t.Elem()))
		}
	default:
		panic("no probe for " + t.String())
	}
	return v
}

// fieldOf returns the field at index in p, allocating nil struct pointers
// on the way when alloc is set; ok is false when one is nil otherwise.
func fieldOf(p *jsonb.Part, index []int, alloc bool) (reflect.Value, bool) {
	v := reflect.ValueOf(p).Elem()
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				if !alloc {
					return reflect.Value{}, false
				}
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

// withProbe returns a part with only the field at l set to raw (or to the
// shape's probe when raw is nil).
func withProbe(l leaf, raw *string) jsonb.Part {
	var p jsonb.Part
	f, _ := fieldOf(&p, l.index, true)
	if raw != nil {
		f.SetBytes([]byte(*raw))
	} else {
		f.Set(probeFor(l.typ))
	}
	return p
}

// db stores content in a real chat_messages row and returns the jsonb
// PostgreSQL gives back.
type db struct {
	pool *pgxpool.Pool
	chat uuid.UUID
}

func newDB(t *testing.T) *db {
	t.Helper()
	ctx := context.Background()
	d := &db{pool: dbtest.New(t)}
	var owner uuid.UUID
	if err := d.pool.QueryRow(ctx, `INSERT INTO users (name) VALUES ('codec') RETURNING id`).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	if err := d.pool.QueryRow(ctx, `INSERT INTO chats (owner_id, model, status) VALUES ($1, 'm', 'waiting') RETURNING id`, owner).Scan(&d.chat); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *db) roundTrip(content []byte) ([]byte, error) {
	var back []byte
	err := d.pool.QueryRow(context.Background(),
		`INSERT INTO chat_messages (chat_id, role, content) VALUES ($1, 'user', $2) RETURNING content`, d.chat, content).Scan(&back)
	return back, err
}

func semanticJSON(t *testing.T, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", raw, err)
	}
	return v
}

// sameValue compares a field after the round trip: raw JSON by meaning
// (jsonb reorders keys and drops whitespace; lone surrogates are U+FFFD),
// everything else exactly.
func sameValue(t *testing.T, got, want reflect.Value) bool {
	if got.Type() == rawMessageType {
		return reflect.DeepEqual(semanticJSON(t, got.Bytes()), semanticJSON(t, want.Bytes()))
	}
	return reflect.DeepEqual(got.Interface(), want.Interface())
}

const updateHint = "if it can hold arbitrary strings, add it to the field table in codec.go (policy encode, with an accessor) and extend the probe in persist_test.go; otherwise classify it as safe in the field table"

// TestPartFieldCoverage checks every persisted field of Part, found by
// reflection, against the field table and round-trips a probe through
// MarshalParts, a real jsonb column, and ParseContent. A field added to
// Part (or to a struct it nests) fails here by name until the codec
// covers it.
func TestPartFieldCoverage(t *testing.T) {
	t.Parallel()
	policies := jsonb.FieldPolicies()
	all := leaves(reflect.TypeFor[jsonb.Part](), "", nil)
	seen := map[string]bool{}
	for _, l := range all {
		seen[l.name] = true
	}
	var stale []string
	for name := range policies {
		if !seen[name] {
			stale = append(stale, name)
		}
	}
	sort.Strings(stale)
	for _, name := range stale {
		t.Errorf("the field table in codec.go has a row for %s, which jsonb.Part does not have: remove or rename it", name)
	}

	d := newDB(t)
	for _, l := range all {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			policy, listed := policies[l.name]
			switch l.shape {
			case shapeUnsupported:
				if policy != "safe" {
					t.Fatalf("jsonb.Part.%s has unsupported persistence coverage type %s: %s", l.name, l.typ, updateHint)
				}
				return // classified safe by the table: nothing to probe
			case shapeSafe:
				if !listed {
					t.Fatalf("jsonb.Part.%s (type %s) has no row in the field table in codec.go: it cannot hold text, so add {name: %q, policy: safe}",
						l.name, l.typ, l.name)
				}
				if policy != "safe" {
					t.Fatalf("jsonb.Part.%s (type %s) cannot hold text but the field table in codec.go has policy %s for it: make it safe",
						l.name, l.typ, policy)
				}
				return
			case shapeStrings:
				// The table has no accessor kind for string containers yet.
				t.Errorf("jsonb.Part.%s (type %s) holds strings in a container the field table in codec.go cannot express: "+
					"add an accessor kind for it to the table and to MarshalParts/ParseContent (copying the container before a write)", l.name, l.typ)
			default:
				if !listed || policy == "safe" {
					t.Errorf("jsonb.Part.%s (type %s) can hold arbitrary strings but has no encode or reject row in the field table in codec.go: "+
						"add {name: %q, policy: encode, %s: <accessor>} there (see docs/codec.md, Extending Part)", l.name, l.typ, l.name, accessorKind(l))
				}
			}
			if policy == "reject" {
				checkReject(t, d, l)
				return
			}
			checkEncode(t, d, l)
		})
	}
}

func accessorKind(l leaf) string {
	if l.shape == shapeRaw {
		return "raw"
	}
	return "str"
}

// checkAccessor verifies that the table's accessor for l points at l.
func checkAccessor(t *testing.T, l leaf) {
	t.Helper()
	p := withProbe(l, nil)
	f, _ := fieldOf(&p, l.index, false)
	if ptr := jsonb.FieldPointer(&p, l.name); ptr == nil || reflect.ValueOf(ptr).Pointer() != f.Addr().Pointer() {
		t.Errorf("the field table's accessor for %s does not point at jsonb.Part.%s", l.name, l.name)
	}
}

// checkEncode: the probe is stored (PostgreSQL refuses \u0000 and lone
// surrogate escapes) and comes back equal; the caller's part is untouched.
func checkEncode(t *testing.T, d *db, l leaf) {
	if _, ok := jsonb.FieldPolicies()[l.name]; ok {
		checkAccessor(t, l)
	}
	in, want := withProbe(l, nil), withProbe(l, nil)
	content, err := jsonb.MarshalParts([]jsonb.Part{in})
	if err != nil {
		t.Fatalf("MarshalParts: %v", err)
	}
	if !reflect.DeepEqual(in, want) {
		t.Errorf("MarshalParts modified the caller's part: %#v", in)
	}
	stored, err := d.roundTrip(content)
	if err != nil {
		t.Fatalf("PostgreSQL refused jsonb.Part.%s: %v\ncontent: %s", l.name, err, content)
	}
	parts, err := jsonb.ParseContent(stored)
	if err != nil {
		t.Fatalf("ParseContent(%s): %v", stored, err)
	}
	if len(parts) != 1 {
		t.Fatalf("%d parts back", len(parts))
	}
	got, ok := fieldOf(&parts[0], l.index, false)
	if !ok {
		t.Fatalf("jsonb.Part.%s did not come back (a struct on its path is nil)", l.name)
	}
	wantField, _ := fieldOf(&want, l.index, false)
	if l.typ == rawMessageType {
		// Lone surrogates are stored as U+FFFD: compare with what the probe means.
		b, _ := json.Marshal(semanticJSON(t, wantField.Bytes()))
		wantField = reflect.ValueOf(json.RawMessage(b))
	}
	if !sameValue(t, got, wantField) {
		t.Errorf("jsonb.Part.%s did not round-trip through PostgreSQL:\n got %+q\nwant %+q\nstored %s", l.name, got.Interface(), wantField.Interface(), stored)
	}
}

// checkReject: unstorable values are refused, and storable ones (with
// sentinel characters in them) are stored exactly, never transformed.
func checkReject(t *testing.T, d *db, l leaf) {
	checkAccessor(t, l)
	if l.shape != shapeRaw {
		t.Fatalf("reject probes exist for raw JSON only; extend checkReject for %s", l.typ)
	}
	for _, bad := range probeUnstorable {
		if _, err := jsonb.MarshalParts([]jsonb.Part{withProbe(l, &bad)}); err == nil || !strings.Contains(err.Error(), l.name) {
			t.Errorf("MarshalParts accepted jsonb.Part.%s = %s (err %v); a reject field must refuse what it cannot store exactly", l.name, bad, err)
		}
	}
	value := probeValue
	in := withProbe(l, &value)
	content, err := jsonb.MarshalParts([]jsonb.Part{in})
	if err != nil {
		t.Fatalf("MarshalParts: %v", err)
	}
	stored, err := d.roundTrip(content)
	if err != nil {
		t.Fatalf("PostgreSQL refused jsonb.Part.%s: %v", l.name, err)
	}
	// As stored, read without the codec, and as parsed: the value itself.
	var plain []jsonb.Part
	if err := json.Unmarshal(stored, &plain); err != nil {
		t.Fatal(err)
	}
	parsed, err := jsonb.ParseContent(stored)
	if err != nil {
		t.Fatal(err)
	}
	for what, p := range map[string]*jsonb.Part{"stored": &plain[0], "parsed": &parsed[0]} {
		got, ok := fieldOf(p, l.index, false)
		if !ok || !reflect.DeepEqual(semanticJSON(t, got.Bytes()), semanticJSON(t, []byte(probeValue))) {
			t.Errorf("jsonb.Part.%s %s as %s, want exactly %s", l.name, what, got, probeValue)
		}
	}
}

// TestCoverageShapes checks the coverage test's own classification on a
// made-up type, so that a future field shape is probed or reported, never
// skipped.
func TestCoverageShapes(t *testing.T) {
	t.Parallel()
	type named string
	type inner struct {
		Deep  named
		Count int
	}
	type fake struct {
		S       string
		N       named
		R       json.RawMessage
		B       []byte
		Flag    bool
		At      time.Time
		ID      uuid.UUID
		Lists   [][]string
		Pair    [2]named
		Ints    []int
		Map     map[string]string
		Any     any
		Structs []inner
		In      *inner
		hidden  string
		Skipped string `json:"-"`
	}
	_ = fake{}.hidden
	got := map[string]shape{}
	for _, l := range leaves(reflect.TypeFor[fake](), "", nil) {
		got[l.name] = l.shape
	}
	want := map[string]shape{
		"S": shapeString, "N": shapeString, "R": shapeRaw, "B": shapeSafe, "Flag": shapeSafe, "At": shapeSafe,
		"ID": shapeSafe, "Lists": shapeStrings, "Pair": shapeStrings, "Ints": shapeSafe, "Map": shapeUnsupported,
		"Any": shapeUnsupported, "Structs": shapeUnsupported, "In.Deep": shapeString, "In.Count": shapeSafe,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("shapes:\n got %v\nwant %v", got, want)
	}
	// Every string-bearing shape gets a probe made of the probe string.
	for _, typ := range []reflect.Type{reflect.TypeFor[[][]string](), reflect.TypeFor[[2]named](), reflect.TypeFor[*named]()} {
		strs := stringsIn(probeFor(typ))
		if len(strs) == 0 {
			t.Errorf("probe for %s holds no strings", typ)
		}
		for _, s := range strs {
			if s != probeString {
				t.Errorf("probe for %s holds %q", typ, s)
			}
		}
	}
}

func stringsIn(v reflect.Value) []string {
	switch v.Kind() {
	case reflect.String:
		return []string{v.String()}
	case reflect.Pointer:
		return stringsIn(v.Elem())
	case reflect.Slice, reflect.Array:
		var out []string
		for i := range v.Len() {
			out = append(out, stringsIn(v.Index(i))...)
		}
		return out
	}
	return nil
}

// TestPersistRegressions stores the payloads that used to fail, or could
// be mangled, in a real jsonb column and reads them back.
func TestPersistRegressions(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	// fantasy's own Gemini metadata marshals a signature as a JSON
	// string, so NUL arrives as \u0000 (bytes that are not UTF-8 would be
	// U+FFFD already: TestGeminiSignatureBytes).
	gemini, err := json.Marshal(fantasy.ProviderMetadata{fantasygoogle.Name: &fantasygoogle.ReasoningMetadata{
		Signature: "\x00\x01sig\x00\ue000\x7f", ToolID: "t\x00"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		part jsonb.Part
		raw  func(*jsonb.Part) json.RawMessage
		want string // the meaning of the raw field after the round trip
	}{
		{"gemini signature", jsonb.Part{Type: jsonb.PartReasoning, Text: "thinking", ProviderMetadata: gemini},
			func(p *jsonb.Part) json.RawMessage { return p.ProviderMetadata }, string(gemini)},
		{"NUL in key and value of tool arguments", jsonb.Part{Type: jsonb.PartToolCall, ToolCallID: "c", ToolName: "t", Args: json.RawMessage(`{"a\u0000b":"c\u0000d"}`)},
			func(p *jsonb.Part) json.RawMessage { return p.Args }, `{"a\u0000b":"c\u0000d"}`},
		{"NUL in key and value of a tool result", jsonb.Part{Type: jsonb.PartToolResult, ToolCallID: "c", Result: json.RawMessage(`{"out\u0000":["x\u0000",{"\u0000":"\u0000"}]}`)},
			func(p *jsonb.Part) json.RawMessage { return p.Result }, `{"out\u0000":["x\u0000",{"\u0000":"\u0000"}]}`},
		{"lone high surrogate", jsonb.Part{Type: jsonb.PartToolCall, Args: json.RawMessage(`{"q":"\ud800x"}`)},
			func(p *jsonb.Part) json.RawMessage { return p.Args }, `{"q":"\ufffdx"}`},
		{"lone low surrogate in a key", jsonb.Part{Type: jsonb.PartToolCall, Args: json.RawMessage(`{"\udc00":"\udbff"}`)},
			func(p *jsonb.Part) json.RawMessage { return p.Args }, `{"\ufffd":"\ufffd"}`},
		{"valid pair beside a lone surrogate", jsonb.Part{Type: jsonb.PartToolCall, Args: json.RawMessage(`["\ud83d\ude00","\ud83d"]`)},
			func(p *jsonb.Part) json.RawMessage { return p.Args }, `["😀","\ufffd"]`},
		{"escaped backslashes are text", jsonb.Part{Type: jsonb.PartToolCall, Args: json.RawMessage(`{"s":"\\u0000 \\ud800 \\\\u0000"}`)},
			func(p *jsonb.Part) json.RawMessage { return p.Args }, `{"s":"\\u0000 \\ud800 \\\\u0000"}`},
		{"natural sentinels", jsonb.Part{Type: jsonb.PartToolResult, Result: json.RawMessage(`{"\ue000\ue001":"\ue000\ue000\ue000"}`)},
			func(p *jsonb.Part) json.RawMessage { return p.Result }, `{"\ue000\ue001":"\ue000\ue000\ue000"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			content, err := jsonb.MarshalParts([]jsonb.Part{c.part})
			if err != nil {
				t.Fatal(err)
			}
			stored, err := d.roundTrip(content)
			if err != nil {
				t.Fatalf("PostgreSQL refused %s: %v", content, err)
			}
			parts, err := jsonb.ParseContent(stored)
			if err != nil {
				t.Fatal(err)
			}
			got := c.raw(&parts[0])
			if !reflect.DeepEqual(semanticJSON(t, got), semanticJSON(t, []byte(c.want))) {
				t.Errorf("came back as %s, want %s (stored %s)", got, c.want, stored)
			}
			if parts[0].Text != c.part.Text || parts[0].Type != c.part.Type {
				t.Errorf("part %+v", parts[0])
			}
		})
	}
}

// TestGeminiSignatureBytes is a Gemini regression with a real
// binary signature (protobuf bytes, not UTF-8): fantasy's
// ReasoningMetadata holds it as a string, and its own JSON already
// replaces the bytes with U+FFFD, upstream of this codec; the provider
// layer's ThoughtSignature (what chatd stores for a Gemini step) comes
// back from a jsonb column byte for byte, and parses back through
// fantasy's provider-type registry.
func TestGeminiSignatureBytes(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	// The head of a recorded gemini-3-pro-preview signature, then a NUL,
	// U+E000's bytes and an overlong sequence.
	sig := []byte("\x12\xed\x03\x0a\xea\x03\x01\xbe\x3e\xf6\xfb\xdd\x00\xee\x80\x80\xc0\xaf")
	lossy, err := json.Marshal(fantasy.ProviderMetadata{fantasygoogle.Name: &fantasygoogle.ReasoningMetadata{Signature: string(sig)}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(lossy, []byte(`\ufffd`)) {
		t.Fatalf("fantasy's own encoding kept the bytes: %s", lossy)
	}
	md, err := json.Marshal(fantasy.ProviderMetadata{fantasygoogle.Name: &provider.ThoughtSignature{Signature: sig, ToolID: "call_1"}})
	if err != nil {
		t.Fatal(err)
	}
	content, err := jsonb.MarshalParts([]jsonb.Part{{Type: jsonb.PartReasoning, Text: "thinking", ProviderMetadata: md},
		{Type: jsonb.PartToolCall, ToolCallID: "call_1", ToolName: "read_file", Args: json.RawMessage(`{"path":"a"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := d.roundTrip(content)
	if err != nil {
		t.Fatalf("PostgreSQL refused %s: %v", content, err)
	}
	parts, err := jsonb.ParseContent(stored)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(parts[0].ProviderMetadata, &raw); err != nil {
		t.Fatal(err)
	}
	opts, err := fantasy.UnmarshalProviderOptions(raw)
	if err != nil {
		t.Fatal(err)
	}
	ts, ok := opts[fantasygoogle.Name].(*provider.ThoughtSignature)
	if !ok || !bytes.Equal(ts.Signature, sig) || ts.ToolID != "call_1" {
		t.Fatalf("read back %+v from %s", opts[fantasygoogle.Name], stored)
	}
}
