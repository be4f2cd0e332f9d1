package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"testing"

	oracle "github.com/santhosh-tekuri/jsonschema/v6"
)

// The numeric formats assert exactly what they mean on numbers, pass other
// values, and work wherever a format may stand (with a type, without one,
// beside an if of the node's own).
func TestNumericFormats(t *testing.T) {
	t.Parallel()
	ok := map[string][]string{
		"int32": {"0", "-0", "1.0", "1e2", "0.1e1", "2147483647", "-2147483648", "2.147483647e9", `"x"`, `null`, `[1.5]`, `{"a":1.5}`},
		"int64": {"9223372036854775807", "-9223372036854775808", "2147483648", "9.223372036854775807e18", `"1.5"`},
		"float": {"1.5", "-1.5", "1e-45", "1e-60", "340282346638528859811704183484516925440", "-3.4028234663852886e38", "3.4028234e38",
			"340282356779733661637539395458142568447", "-340282356779733661637539395458142568447", `true`},
		"double": {"1.5", "1e60", "-1e60", "1e-60", "123456789012345678901234567890", `"x"`},
	}
	bad := map[string][]string{
		"int32": {"1.5", "-0.5", "2147483648", "-2147483649", "1e10", "0.11e1"},
		"int64": {"9223372036854775808", "-9223372036854775809", "1e19", "0.5"},
		"float": {"340282356779733661637539395458142568448", "-340282356779733661637539395458142568448", "3.5e38", "1e39", "-1e60"},
	}
	for _, name := range NumericFormats {
		for _, wrap := range []string{
			`{"format":%q}`,
			`{"type":["number","string","null","boolean","array","object"],"format":%q}`,
			`{"if":{"minimum":-1e30},"then":true,"format":%q}`,
			`{"properties":{"a":{"$ref":"#/definitions/n"}},"definitions":{"n":{"format":%q}}}`,
		} {
			schema := fmt.Sprintf(wrap, name)
			s := mustCompile(t, schema)
			nested := bytes.Contains([]byte(schema), []byte(`"a"`))
			check := func(v string, want bool) {
				if nested {
					v = `{"a":` + v + `}`
				}
				if got := s.Validate([]byte(v)).Valid(); got != want {
					t.Errorf("%s: %s valid=%v, want %v", schema, v, got, want)
				}
			}
			for _, v := range ok[name] {
				check(v, true)
			}
			for _, v := range bad[name] {
				check(v, false)
			}
		}
	}
}

// The oracle knows no numeric format, so it gets them as formats written
// independently here (integers by big.Rat against the Go constants, float
// and double by strconv.ParseFloat's overflow), and must agree with chatd
// on every value.
func TestNumericFormatsOracle(t *testing.T) {
	t.Parallel()
	integer := func(lo, hi int64) func(any) error {
		return func(v any) error {
			n, isNum := v.(json.Number)
			if !isNum {
				return nil
			}
			r, _ := new(big.Rat).SetString(string(n))
			if !r.IsInt() || r.Num().Cmp(big.NewInt(lo)) < 0 || r.Num().Cmp(big.NewInt(hi)) > 0 {
				return fmt.Errorf("%s is not an integer in [%d, %d]", n, lo, hi)
			}
			return nil
		}
	}
	finite := func(bits int) func(any) error {
		return func(v any) error {
			n, isNum := v.(json.Number)
			if !isNum {
				return nil
			}
			if _, err := strconv.ParseFloat(string(n), bits); err != nil {
				return err // ErrRange: it overflows float32/float64
			}
			return nil
		}
	}
	formats := map[string]func(any) error{
		"int32":  integer(math.MinInt32, math.MaxInt32),
		"int64":  integer(math.MinInt64, math.MaxInt64),
		"float":  finite(32),
		"double": finite(64),
	}
	values := []string{"0", "1.5", "-1", "1.0", "1e2", "2147483647", "2147483648", "-2147483648", "-2147483649",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
		"340282346638528859811704183484516925440", "340282356779733661637539395458142568447", "340282356779733661637539395458142568448",
		"-340282356779733661637539395458142568448", "3.4028234663852886e38", "3.5e38", "-3.5e38",
		"1e-45", "1e60", "-1e-60", `"s"`, "null", "true"}
	for name, f := range formats {
		schema := fmt.Sprintf(`{"items":{"format":%q}}`, name)
		c := oracle.NewCompiler()
		c.DefaultDraft(oracle.Draft7)
		c.AssertFormat()
		c.RegisterFormat(&oracle.Format{Name: name, Validate: f})
		doc, err := oracle.UnmarshalJSON(bytes.NewReader([]byte(schema)))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource("urn:chatd:numeric", doc); err != nil {
			t.Fatal(err)
		}
		o, err := c.Compile("urn:chatd:numeric")
		if err != nil {
			t.Fatal(err)
		}
		s := mustCompile(t, schema)
		for _, v := range values {
			raw := "[" + v + "]"
			inst, err := oracle.UnmarshalJSON(bytes.NewReader([]byte(raw)))
			if err != nil {
				t.Fatal(err)
			}
			want := o.Validate(inst) == nil
			if got := s.Validate([]byte(raw)).Valid(); got != want {
				t.Errorf("%s %s: chatd valid=%v, the oracle %v", name, v, got, want)
			}
		}
	}
}
