package jsonb_test

import (
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/jsonb"
)

func TestStorable(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", jsonb.MaxRawDepth+1) + strings.Repeat("]", jsonb.MaxRawDepth+1)
	ok := []string{
		`{}`, `[]`, `"x"`, `0`, `{"a":1,"b":[1,2,{"a":2}],"c":{"a":3}}`,
		`{"n":12345678901234567890.5,"e":1e308,"m":-1e-308,"z":0E0}`,
		`{"nul":"a\u0000b","lone":"\ud800","k\u0000":1}`, // the codec's business
		strings.Repeat("[", jsonb.MaxRawDepth) + strings.Repeat("]", jsonb.MaxRawDepth),
		`{"a":{"a":{"a":1}}}`, `[{"a":1},{"a":1}]`,
	}
	bad := map[string]string{
		`{"n":1e-999999}`:                       "exponent beyond ±308 at /n",
		`{"n":1e999999}`:                        "exponent beyond ±308 at /n",
		`[1,2,1e309]`:                           "exponent beyond ±308 at /2",
		`{"a":[0,{"n":123e-10000000}]}`:         "at /a/1/n",
		`{"n":` + strings.Repeat("9", 65) + `}`: "longer than 64 characters",
		`{"a":1,"a":2}`:                         `duplicate key "a" at the top level`,
		`{"x":[{"k":1,"k":1}]}`:                 `duplicate key "k" at /x/0`,
		`{"\u0061":1,"a":2}`:                    `duplicate key "a"`,
		`{"a":1} {"b":2}`:                       "data after the JSON value",
		`{"a":`:                                 "not valid JSON",
		``:                                      "no JSON value",
		deep:                                    "nested deeper than 64 levels",
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
