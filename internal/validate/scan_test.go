package validate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeAccepts(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `"x"`, ` {"a" : [1, 2.5, -3e2, "s", null, true]} `,
		`"\ud83d\ude00"`, `"é\u00e9\n\t\"\\\/"`, `{"$ref":"#","":1}`,
		`1e63`, `-1e62`, `1e-62`, `1E+63`, `1e0000000063`, `0.000000000000000000000000000000000000000000000000000000001`,
		"1" + strings.Repeat("0", 63), // 64 characters
		`{"` + strings.Repeat("k", 256) + `":1}`,
		`"<&>\u2028"`,
	} {
		got, err := Decode([]byte(doc), ValueLimits)
		if err != nil {
			t.Errorf("Decode(%s): %v", doc, err)
			continue
		}
		var want any
		dec := json.NewDecoder(strings.NewReader(doc))
		dec.UseNumber()
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Decode(%s) = %#v, want %#v", doc, got, want)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, c := range []struct {
		doc, ptr, detail string
	}{
		{`{"a":1,"a":2}`, "/a", "duplicate object key"},
		{`{"a":{"b":1,"\u0062":2}}`, "/a/b", "duplicate object key"},
		{`{} {}`, "", "unexpected data after the JSON value"},
		{`1 2`, "", "unexpected data after the JSON value"},
		{`{"a":1} x`, "", "unexpected data after the JSON value"},
		{"\"\xff\"", "", "invalid UTF-8"},
		{"[\"ok\", \"\xc3\x28\"]", "/1", "invalid UTF-8"},
		{`"\ud800"`, "", "unpaired surrogate"},
		{`"\udc00"`, "", "unpaired surrogate"},
		{`"\ud800\u0041"`, "", "unpaired surrogate"},
		{`"\ud800x"`, "", "unpaired surrogate"},
		{`{"a":["\ud83d"]}`, "/a/0", "unpaired surrogate"},
		{`"a\u0000b"`, "", "U+0000"},
		{`{"k\u0000":1}`, "", "U+0000"},
		{"\"a\x00b\"", "", "control character"},
		{"\"a\nb\"", "", "control character"},
		{"1" + strings.Repeat("0", 400), "", "more than the limit of 400"},
		{"0." + strings.Repeat("0", 399), "", "more than the limit of 400"},
		{`1e309`, "", "beyond the range of a 64-bit float"},
		{`1e400`, "", "beyond the range of a 64-bit float"},
		{`1.8e308`, "", "beyond the range"},
		{`-1.8e308`, "", "beyond the range"},
		{`1e0000000000000309`, "", "beyond the range"},
		{`1e99999999999999999999`, "", "beyond the range"},
		{`1e-400`, "", "too close to zero"},
		{`-2e-324`, "", "too close to zero"},
		{`1e-99999999999999999999`, "", "too close to zero"},
		{`0e-399`, "", "plain decimal notation"},
		{`0e-99999999999999999999`, "", "exponent beyond ±1000"},
		{`0e1001`, "", "exponent beyond ±1000"},
		{"1." + strings.Repeat("1", 100) + "e-300", "", "402 characters in plain decimal notation"},
		{`01`, "", "unexpected data"},
		{`1.`, "", "digit after the decimal point"},
		{`.5`, "", "expecting a value"},
		{`+1`, "", "expecting a value"},
		{`1e`, "", "digit in the exponent"},
		{`-`, "", "expecting a digit"},
		{`NaN`, "", "expecting a value"},
		{`tru`, "", "expecting a value"},
		{`[1,]`, "/1", "expecting a value"},
		{`{"a":1,}`, "", "expecting an object key"},
		{`{'a':1}`, "", "expecting an object key"},
		{`"\x"`, "", "invalid escape"},
		{`"\u12G4"`, "", "malformed \\u escape"},
		{`"abc`, "", "unterminated"},
		{``, "", "empty document"},
		{`   `, "", "empty document"},
		{`{"a":[1,{"b/c":"\u0000"}]}`, "/a/1/b~1c", "U+0000"},
		{`{"` + strings.Repeat("k", 257) + `":1}`, "/" + strings.Repeat("k", 257), "more than the limit of 256"},
		{deep(33), "/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0", "nested deeper than 32"},
	} {
		_, err := Decode([]byte(c.doc), ValueLimits)
		se, ok := err.(*ScanError)
		if !ok {
			t.Errorf("Decode(%.40q) = %v, want a *ScanError", c.doc, err)
			continue
		}
		if se.Pointer != c.ptr || !strings.Contains(se.Detail, c.detail) {
			t.Errorf("Decode(%.40q) = %q %q, want %q containing %q", c.doc, se.Pointer, se.Detail, c.ptr, c.detail)
		}
	}
}

func TestDecodeCaps(t *testing.T) {
	t.Parallel()
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	if _, err := Decode([]byte(deep(32)), ValueLimits); err != nil {
		t.Errorf("32 levels: %v", err)
	}
	if _, err := Decode([]byte(deep(64)), SchemaLimits); err != nil {
		t.Errorf("64 levels in a schema: %v", err)
	}
	if _, err := Decode([]byte(deep(65)), SchemaLimits); err == nil {
		t.Error("65 levels in a schema accepted")
	}
	nodes := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("0,", n-1), ",") + "]" }
	if _, err := Decode([]byte(nodes(16384)), ValueLimits); err != nil {
		t.Errorf("16384 values: %v", err)
	}
	if _, err := Decode([]byte(nodes(16385)), ValueLimits); err == nil || !strings.Contains(err.Error(), "more than 16384 JSON values") {
		t.Errorf("16385 values: %v", err)
	}
	big := `"` + strings.Repeat("a", ValueLimits.MaxBytes-2) + `"`
	if _, err := Decode([]byte(big), ValueLimits); err != nil {
		t.Errorf("%d bytes: %v", len(big), err)
	}
	if _, err := Decode([]byte(big+" "), ValueLimits); err == nil || !strings.Contains(err.Error(), "more than the limit of 262144") {
		t.Errorf("%d bytes: %v", len(big)+1, err)
	}
	if _, err := Decode(bytes.Repeat([]byte(" "), SchemaLimits.MaxBytes+1), SchemaLimits); err == nil {
		t.Error("oversized schema accepted")
	}
	// a key is measured after unescaping
	key := strings.Repeat(`\u00e9`, 128) // 128 × 2 bytes
	if _, err := Decode([]byte(`{"`+key+`":1}`), ValueLimits); err != nil {
		t.Errorf("256-byte escaped key: %v", err)
	}
}

// The tree keeps what the estimator needs: sizes bound encoding/json's
// output, rune counts, number details; -0 becomes 0 for the library only.
func TestDecodeTree(t *testing.T) {
	t.Parallel()
	raw := `{"a":[-0,1.50,"é<"],"b":{"c":null}}`
	v, err := decodeTree([]byte(raw), ValueLimits)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v.val)
	if int(v.size) < len(out) {
		t.Errorf("size %d < encoded %d", v.size, len(out))
	}
	if v.nums != 2 || v.kind != kObject || len(v.kids) != 2 {
		t.Fatalf("tree %+v", v)
	}
	a := v.kids[0]
	if v.keys[0].name != "a" {
		a = v.kids[1]
	}
	if a.kids[0].val != json.Number("0") || !a.kids[0].num.neg || a.kids[2].runes != 2 {
		t.Errorf("a = %+v", a)
	}
	if n := a.kids[1].num; n.digits != "15" || n.exp != -1 || n.isInt() {
		t.Errorf("1.50 = %+v", n)
	}
	plain, _ := Decode([]byte(raw), ValueLimits)
	if plain.(map[string]any)["a"].([]any)[0] != json.Number("-0") {
		t.Error("Decode must return the literal as written")
	}
}

func TestNumberInfo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		lit, digits string
		exp         int
		isInt       bool
	}{
		{"0", "", 0, true}, {"-0.000", "", 0, true}, {"100", "1", 2, true}, {"1.0", "1", 0, true},
		{"2.5e1", "25", 0, true}, {"0.0125", "125", -4, false}, {"1e-2", "1", -2, false}, {"-12e+3", "12", 3, true},
	} {
		n, err := parseNumber(c.lit)
		if err != nil || n.digits != c.digits || n.exp != c.exp || n.isInt() != c.isInt {
			t.Errorf("%s: %+v %v", c.lit, n, err)
		}
	}
	a, _ := parseNumber("9007199254740993")
	b, _ := parseNumber("9007199254740992")
	if a.f != b.f || a.exactEqual(b) || cmpDecimal(a, b) != 1 {
		t.Error("exact comparison of numbers beyond 2^53")
	}
	z, _ := parseNumber("-0.0")
	z2, _ := parseNumber("0e5")
	if !z.exactEqual(z2) || cmpDecimal(z, z2) != 0 {
		t.Error("-0.0 must equal 0e5")
	}
}

// Numbers are stored in jsonb, which renders them in plain decimal
// notation: a literal must stay within the limit in that form too, or the
// copy read back from the database would not pass the scan.
func TestNumberPlainForm(t *testing.T) {
	t.Parallel()
	for lit, want := range map[string]int{
		"123e65": 68, "1e63": 64, "1.50e2": 3, "1.5e-3": 6, "0.001": 5, "-0.0": 3, "-0": 1, "-1.5": 4,
		"1e-308": 310, "0e500": 1, "12.345e1": 6, "-7E+2": 4, "100": 3, "0.0e5": 1, "0e-300": 302,
		"1.5e300": 301, "-1.7976931348623157e308": 310, "-4.9406564584124654e-324": 343, "0.0000001e-300": 309,
	} {
		ni, err := parseNumber(lit)
		if err != nil {
			t.Errorf("%s: %v", lit, err)
			continue
		}
		if got := plainLen(lit, ni); got != want {
			t.Errorf("plainLen(%s) = %d, want %d", lit, got, want)
		}
	}
	// Every float64 is admitted: 123e65 (a JSONTestSuite y_
	// case), 1.5e300, the extremes; only what is beyond the range, or
	// longer than the limit in plain notation, is refused, at its pointer.
	for _, ok := range []string{`[123e65]`, `{"maximum":1e100}`, `{"a":[1,-1e-70]}`, `[1.5e300,0.0000001e-300]`,
		`[1.7976931348623157e308,-1.7976931348623157e308,4.9406564584124654e-324,-5e-324,2.2250738585072014e-308]`,
		`[1e63,-1e62,1.5e-3,1.50e2,0.0e300,1e308,1e-310]`} {
		if _, err := Decode([]byte(ok), ValueLimits); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, c := range []struct{ doc, ptr, detail string }{
		{`[1,1e400]`, "/1", "number 1e400 is beyond the range of a 64-bit float"},
		{`{"a":{"b":-1.8e308}}`, "/a/b", "number -1.8e308 is beyond the range"},
		{`{"a":[1e-400]}`, "/a/0", "number 1e-400 is too close to zero"},
		{`[0e-400]`, "/0", "402 characters in plain decimal notation"},
	} {
		_, err := Decode([]byte(c.doc), ValueLimits)
		se, ok := err.(*ScanError)
		if !ok || se.Pointer != c.ptr || !strings.Contains(se.Detail, c.detail) {
			t.Errorf("%s: %v, want a refusal at %s containing %q", c.doc, err, c.ptr, c.detail)
		}
	}
	if _, err := Compile([]byte(`{"maximum":1e100,"minimum":-1.79769e308}`)); err != nil {
		t.Errorf("schema with 1e100: %v", err)
	}
}
