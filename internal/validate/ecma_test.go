package validate

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	oracle "github.com/santhosh-tekuri/jsonschema/v6"
)

// An ECMAScript pattern fails as a pattern: keyword "pattern", its source
// in the message, at the string's location (the library runs it as a
// format of our own, which never shows).
func TestECMAPatternErrors(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"properties":{"key":{"type":"string","pattern":"^(?!@@)[\\w@]+$"}},"propertyNames":{"pattern":"^(?!x)"}}`)
	r := s.Validate([]byte(`{"key":"@@a"}`))
	if r.Total != 1 || r.Errors[0].Location != "/key" || r.Errors[0].Keyword != "pattern" ||
		r.Errors[0].Message != `must match the pattern ^(?!@@)[\w@]+$` {
		t.Errorf("%+v", r)
	}
	if r := s.Validate([]byte(`{"xkey":1}`)); r.Valid() || r.Errors[0].Keyword != "propertyNames" || r.Errors[1].Keyword != "pattern" {
		t.Errorf("propertyNames: %+v", r)
	}
	if r := s.Validate([]byte(`{"key":"a@","other":1}`)); !r.Valid() {
		t.Errorf("%s", r.Summary())
	}
}

// A pattern that backtracks exponentially is bounded by its deadline and
// charged to the budget: the value is refused as too expensive, promptly
// (by the estimator: the library's own run would not be cut short).
func TestECMAPatternBudget(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"items":{"type":"string","pattern":"^(?=a)(a+)+$"}}`)
	if r := s.Validate([]byte(`["aaaa","aaab"]`)); r.Valid() || r.Errors[0].Location != "/1" {
		t.Fatalf("short strings: %+v", r)
	}
	start := time.Now()
	r := s.Validate([]byte(`["` + strings.Repeat("a", 40) + `b"]`))
	took := time.Since(start)
	if r.Valid() || r.Errors[0].Keyword != CodeBudget {
		t.Fatalf("%+v", r)
	}
	// the deadline is the budget (30 ms) plus the clock's 2 ms period; a
	// loaded machine stretches wall time, so the bound is loose
	if took > time.Second {
		t.Errorf("refusing took %s", took)
	}
}

// The library's own run of an ECMAScript pattern has the same deadline; a
// match that overruns it there (the estimator let the value through, the
// machine then stalled) turns the verdict into the budget refusal rather
// than a wrong answer.
func TestECMALibraryDeadline(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"pattern":"^(?=b)(b+)+$"}`)
	if len(s.ecma) != 1 {
		t.Fatalf("%d patterns registered", len(s.ecma))
	}
	slow := strings.Repeat("b", 40) + "c"
	if (ecmaChecker{s.ecma[0]}).IsFormat(slow) {
		t.Fatal("matched")
	}
	if r := s.run(s.compiled, slow); r.Valid() || r.Errors[0].Keyword != CodeBudget {
		t.Errorf("%+v", r)
	}
}

// Registration lives as long as a compiled schema using the pattern: the
// format name is gone once the last one is garbage.
func TestECMARegistration(t *testing.T) {
	t.Parallel()
	const src = "^(?!registration-test)[a-z]+$"
	schema := `{"pattern":` + mustJSON(src) + `}`
	func() {
		a, b := mustCompile(t, schema), mustCompile(t, schema)
		if e := ecmaEntryOf(ecmaFormat + src); e == nil || e.refs != 2 {
			t.Fatalf("entry %+v", e)
		}
		if !isFormat(ecmaFormat+src, "abc") || isFormat(ecmaFormat+src, "registration-test") {
			t.Error("the registered checker does not decide as the pattern")
		}
		runtime.KeepAlive(a)
		runtime.KeepAlive(b)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for ecmaEntryOf(ecmaFormat+src) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the pattern is still registered after its schemas were collected")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if !isFormat(ecmaFormat+src, "registration-test") {
		t.Error("the checker is still in the library's registry")
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestECMAPatternKeys: patternProperties keys only the ECMAScript engine
// runs (lookahead, as Hugo's and the browser extensions' message schemas
// write them) work, directly, beside additionalProperties, behind a
// reference inside anyOf, and in propertyNames; verdicts are the oracle's.
func TestECMAPatternKeys(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		schema string
		values []string
	}{
		{`{"type":"object","patternProperties":{"^(?!title|weight)[a-z]+$":{"type":"string"}},"properties":{"title":{"type":"integer"}},"additionalProperties":false}`,
			[]string{`{"title":1}`, `{"foo":"x"}`, `{"foo":1}`, `{"weight":"x"}`, `{"Foo":"x"}`, `{}`, `{"title":1,"abc":"s","xyz":2}`, `{"titles":"x"}`}},
		{`{"additionalProperties":{"type":"object","patternProperties":{"^(?!@@)[\\w@]+$":{"type":"object","required":["message"]}}}}`,
			[]string{`{"en":{"greet":{"message":"hi"}}}`, `{"en":{"greet":{}}}`, `{"en":{"@@x":{}}}`, `{"en":{"greet":{"message":"hi"},"bye":[]}}`}},
		{`{"definitions":{"m":{"patternProperties":{"^(?=a)":{"minimum":3},"^a":{"maximum":9}}}},"anyOf":[{"$ref":"#/definitions/m"},{"type":"string"}]}`,
			[]string{`{"ab":1}`, `{"ab":5}`, `{"ab":10}`, `"s"`, `{"b":1}`, `[{"ab":1}]`}},
		{`{"propertyNames":{"pattern":"^(?!_)"},"patternProperties":{"^(?<=)x$":true}}`,
			[]string{`{"a":1}`, `{"_a":1}`, `{"x":{"_y":1}}`}},
	} {
		s := mustCompile(t, c.schema)
		o := oracleSchema(t, []byte(c.schema))
		for _, v := range c.values {
			inst, _ := oracle.UnmarshalJSON(strings.NewReader(v))
			want := o.Validate(inst) == nil
			for range 2 { // compiled, then from the kept specialisation
				if r := s.Validate([]byte(v)); r.Valid() != want {
					t.Errorf("%s %s: valid=%v (%s), the oracle says %v", c.schema, v, r.Valid(), r.Summary(), want)
				}
			}
		}
	}
	// A key whose match backtracks without end refuses the value as too
	// expensive, in about the budget.
	s := mustCompile(t, `{"patternProperties":{"^(?!(a+)+$)":{"type":"string"}}}`)
	start := time.Now()
	r := s.Validate([]byte(`{"` + strings.Repeat("a", 40) + `!":1}`))
	if r.Valid() || r.Errors[0].Keyword != CodeBudget || time.Since(start) > time.Second {
		t.Errorf("%+v after %s", r, time.Since(start))
	}
}
