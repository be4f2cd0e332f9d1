package jsonb_test

import (
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/validate"
)

func TestStorable(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", jsonb.MaxRawDepth+1) + strings.Repeat("]", jsonb.MaxRawDepth+1)
	ok := []string{
		`{}`, `[]`, `"x"`, `0`, `{"a":1,"b":[1,2,{"a":2}],"c":{"a":3}}`,
		`{"n":12345678901234567890.5,"e":1e308,"m":-1e-308,"z":0E0}`,
		`[123e65,1.5e300,0.0000001e-300,1e-320,-4.9406564584124654e-324,1.7976931348623157e308,0e1000]`,
		`{"nul":"a\u0000b","lone":"\ud800","k\u0000":1}`, // the codec's business
		strings.Repeat("[", jsonb.MaxRawDepth) + strings.Repeat("]", jsonb.MaxRawDepth),
		`{"a":{"a":{"a":1}}}`, `[{"a":1},{"a":1}]`,
	}
	bad := map[string]string{
		`{"n":1e-999999}`:                           "number 1e-999999 is too close to zero for a 64-bit float at /n",
		`{"n":1e999999}`:                            "number 1e999999 is beyond the range of a 64-bit float at /n",
		`[1,2,1e309]`:                               "beyond the range of a 64-bit float at /2",
		`[1,2,1e400]`:                               "number 1e400 is beyond the range of a 64-bit float at /2",
		`{"a":[0,{"n":123e-10000000}]}`:             "at /a/1/n",
		`{"n":` + strings.Repeat("9", 401) + `}`:    "longer than 400 characters",
		`[0e-9999999999]`:                           "exponent beyond ±1000 at /0",
		`[1.` + strings.Repeat("1", 100) + `e-300]`: "402 characters in plain decimal notation",
		`{"a":1,"a":2}`:                             `duplicate key "a" at the top level`,
		`{"x":[{"k":1,"k":1}]}`:                     `duplicate key "k" at /x/0`,
		`{"\u0061":1,"a":2}`:                        `duplicate key "a"`,
		`{"a":1} {"b":2}`:                           "data after the JSON value",
		`{"a":`:                                     "not valid JSON",
		``:                                          "no JSON value",
		deep:                                        "nested deeper than 64 levels",
	}
	for _, s := range ok {
		if err := jsonb.Storable([]byte(s)); err != nil {
			t.Errorf("Storable(%.60s) = %v", s, err)
		}
	}
	for s, want := range bad {
		err := jsonb.Storable([]byte(s))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Storable(%.60s) = %v, want %q", s, err, want)
		}
	}
}

// What Storable accepts, PostgreSQL stores (once the codec has encoded its
// strings): the bound a worker relies on to commit a step.
func TestStorableIsStorable(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	for _, s := range []string{
		`{"n":1e308,"m":-1e-308,"x":` + strings.Repeat("9", 64) + `,"y":0.` + strings.Repeat("0", 61) + `1}`,
		`[123e65,1.5e300,0.0000001e-300,-4.9406564584124654e-324,1.7976931348623157e308,0e1000,0e-398,` + strings.Repeat("9", 300) + `]`,
		strings.Repeat(`{"a":`, jsonb.MaxRawDepth) + `1` + strings.Repeat(`}`, jsonb.MaxRawDepth),
		`{"nul":"a\u0000b","lone":"\ud800"}`,
	} {
		if err := jsonb.Storable([]byte(s)); err != nil {
			t.Fatalf("Storable(%.60s) = %v", s, err)
		}
		content, err := jsonb.MarshalParts([]jsonb.Part{{Type: jsonb.PartToolCall, ToolCallID: "c", ToolName: "t", Args: []byte(s)}})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := pool.QueryRow(t.Context(), `SELECT jsonb_array_length($1::jsonb)`, content).Scan(&n); err != nil || n != 1 {
			t.Errorf("%.60s: %v", s, err)
		}
	}
}

// Tool arguments (Storable) and structured values (the validator's scan)
// follow one number rule: every float64 is admitted, what is beyond its
// range or too long in jsonb's plain notation is refused by both.
func TestStorableNumbersAsValidator(t *testing.T) {
	t.Parallel()
	for _, lit := range []string{
		"0", "-0", "1e3", "123e65", "1.5e300", "0.0000001e-300", "1e308", "1e309", "1.8e308", "-1.7976931348623157e308",
		"1.7976931348623159e308", "4.9406564584124654e-324", "2.4703282292062328e-324", "2.4703282292062327e-324",
		"1e-400", "-1e-400", "0e-398", "0e-399", "0e1000", "0e1001", "0e-99999999999", "1e-99999999999", "1e99999999999",
		"1." + strings.Repeat("1", 100) + "e-300", "1." + strings.Repeat("1", 97) + "e-300", strings.Repeat("9", 308), strings.Repeat("9", 309), strings.Repeat("9", 400),
		strings.Repeat("9", 401), "0." + strings.Repeat("0", 397) + "1", "-0." + strings.Repeat("0", 397) + "1",
	} {
		serr := jsonb.Storable([]byte(lit))
		_, verr := validate.Decode([]byte(lit), validate.ValueLimits)
		if (serr == nil) != (verr == nil) {
			t.Errorf("%.50s: Storable %v, validator %v", lit, serr, verr)
		}
	}
	if jsonb.MaxNumberLen != validate.MaxNumberLen || jsonb.MaxZeroExp != validate.MaxZeroExponent {
		t.Error("the number bounds differ")
	}
}
