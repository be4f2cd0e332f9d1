package httpapi_test

import (
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/testenv"
)

// TestSchemaProblemsAllReported: a schema with two mistakes is refused with
// two validations, each naming the schema and, first in its detail, the
// mistake's location in it.
func TestSchemaProblemsAllReported(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	res := call(t, env, env.Token("alice"), "POST", "/api/v1/chats",
		createBody(named(`{"type":"object","properties":{"a":{"type":"strin"},"b":{"minLength":-1}}}`)))
	if res.status != 400 {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	want := []string{"/properties/a/type: ", "/properties/b/minLength: "}
	if len(res.err.Validations) != len(want) {
		t.Fatalf("validations %+v, want %d", res.err.Validations, len(want))
	}
	for i, v := range res.err.Validations {
		if v.Field != "response_format.json_schema.schema" || !strings.HasPrefix(v.Detail, want[i]) {
			t.Errorf("validation %d: %+v, want response_format.json_schema.schema, %q…", i, v, want[i])
		}
	}
}
