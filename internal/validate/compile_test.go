package validate

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// The warm-up must produce every error type the library renders, or the
// first validation to meet a missing one would allocate its template.
func TestWarmUp(t *testing.T) {
	t.Parallel()
	doc, err := Decode([]byte(warmUpSchema), SchemaLimits)
	if err != nil {
		t.Fatal(err)
	}
	adapt(doc, doc, "", nil)
	s, err := compileDoc(doc)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, v := range []string{warmUpValue, `"x"`, `1.5`, `null`} {
		inst, _ := Decode([]byte(v), ValueLimits)
		r, err := s.Validate(docLoader{inst})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range r.Errors() {
			seen[e.Type()] = true
		}
	}
	want := []string{"false", "required", "invalid_type", "number_any_of", "number_one_of", "number_all_of", "number_not",
		"missing_dependency", "const", "enum", "array_no_additional_items", "array_min_items", "array_max_items", "unique",
		"contains", "array_min_properties", "array_max_properties", "additional_property_not_allowed",
		"invalid_property_name", "string_gte", "string_lte", "pattern", "format", "multiple_of", "number_gte", "number_gt",
		"number_lte", "number_lt", "condition_then", "condition_else"}
	var missing []string
	for _, w := range want {
		if !seen[w] {
			missing = append(missing, w)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the warm-up does not produce %s", strings.Join(missing, ", "))
	}
}

func TestResultSummary(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"array","items":{"type":"string"}}`)
	r := s.Validate([]byte(arr(40, constant(`1`))))
	if r.Valid() || r.Total != 40 || len(r.Errors) != MaxReportedErrors {
		t.Fatalf("%d errors, total %d", len(r.Errors), r.Total)
	}
	sum := r.Summary()
	if !strings.HasPrefix(sum, "/0: must be of type string, not integer; /1: ") || !strings.HasSuffix(sum, " (and 8 more)") {
		t.Errorf("summary %q", sum)
	}
	r = mustCompile(t, `{"type":"object"}`).Validate([]byte(`[]`))
	if r.Summary() != "(root): must be of type object, not array" {
		t.Errorf("summary %q", r.Summary())
	}
	// Keys with "/", "~" and "." are located exactly.
	r = mustCompile(t, `{"additionalProperties":{"type":"string"}}`).Validate([]byte(`{"a/b.c~d":1}`))
	if len(r.Errors) != 1 || r.Errors[0].Location != "/a~1b.c~0d" {
		t.Errorf("%+v", r)
	}
	// Messages are bounded and never echo the value.
	r = mustCompile(t, `{"enum":[`+repeatJoin(200, func(i int) string { return fmt.Sprintf(`"%03d%s"`, i, strings.Repeat("v", 60)) })+`]}`).Validate([]byte(`"secret-value"`))
	if len(r.Errors[0].Message) > maxMessageBytes || strings.Contains(r.Summary(), "secret") {
		t.Errorf("message %q", r.Errors[0].Message)
	}
}
