package validate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestEveryProblemReported: a schema with several mistakes is refused
// with each of them, in document order, up to MaxProblems; a document-wide
// cap stops the screening with one problem, not one per schema past it.
func TestEveryProblemReported(t *testing.T) {
	t.Parallel()
	_, err := Compile([]byte(`{"type":"object","properties":{"a":{"type":"strin"},"b":{"minLenght":1},"c":{"type":"string"}},"requird":["a"]}`))
	got := ProblemsOf(err)
	want := []string{"/properties/a/type", "/properties/b/minLenght", "/requird"}
	if len(got) != len(want) {
		t.Fatalf("problems %v, want %d at %v", err, len(want), want)
	}
	for i, p := range got {
		if p.Pointer != want[i] {
			t.Errorf("problem %d at %q, want %q: %v", i, p.Pointer, want[i], p)
		}
	}
	if !strings.HasSuffix(err.Error(), "(and 2 more)") {
		t.Errorf("Error() = %q, want the first problem and a count", err)
	}
	var se *ScanError
	if !errors.As(err, &se) || se != got[0] {
		t.Errorf("errors.As finds %v, want the first problem", se)
	}

	// One mistake is a *ScanError, as before.
	if _, err := Compile([]byte(`{"type":"strin"}`)); len(ProblemsOf(err)) != 1 {
		t.Fatalf("one mistake: %T %v", err, err)
	} else if _, ok := err.(*ScanError); !ok {
		t.Fatalf("one mistake: %T, want *ScanError", err)
	}

	// Many mistakes: the first MaxProblems.
	var props []string
	for i := range MaxProblems + 5 {
		props = append(props, fmt.Sprintf(`"p%02d":{"type":"strin"}`, i))
	}
	_, err = Compile([]byte(`{"properties":{` + strings.Join(props, ",") + `}}`))
	if ps := ProblemsOf(err); len(ps) != MaxProblems || ps[MaxProblems-1].Pointer != fmt.Sprintf("/properties/p%02d/type", MaxProblems-1) {
		t.Fatalf("%d mistakes: %d problems, last %v", MaxProblems+5, len(ps), ps[len(ps)-1])
	}

	// A cap: one problem, where it was passed.
	var pats []string
	for i := range MaxPatterns + 3 {
		pats = append(pats, fmt.Sprintf(`"p%04d":{"pattern":"^a"}`, i))
	}
	_, err = Compile([]byte(`{"properties":{` + strings.Join(pats, ",") + `}}`))
	if ps := ProblemsOf(err); len(ps) != 1 || !strings.Contains(ps[0].Detail, "patterns") {
		t.Fatalf("past the pattern cap: %v", err)
	}
}
