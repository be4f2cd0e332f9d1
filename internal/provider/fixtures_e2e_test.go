package provider_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/config"
	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/mockllm"
	"github.com/chatd/chatd/internal/testenv"
	"github.com/chatd/chatd/internal/validate"
)

// generatorFixture is one schema a real generator emitted for a fixture
// model (internal/validate/testdata/generators), with the model's
// instances.
type generatorFixture struct {
	name           string
	schema         json.RawMessage
	valid, invalid []json.RawMessage
}

func generatorFixtures(t *testing.T) []generatorFixture {
	t.Helper()
	dir := filepath.Join("..", "validate", "testdata", "generators")
	files, err := filepath.Glob(filepath.Join(dir, "schemas", "*.json"))
	if err != nil || len(files) < 4 {
		t.Fatalf("generator outputs: %v %v", files, err)
	}
	read := func(path string, v any) {
		raw, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(raw, v)
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var out []generatorFixture
	for _, f := range files {
		var doc struct{ Schemas map[string]json.RawMessage }
		read(f, &doc)
		for key, schema := range doc.Schemas {
			model, _, _ := strings.Cut(key, "-")
			var inst struct{ Valid, Invalid []json.RawMessage }
			read(filepath.Join(dir, "instances", model+".json"), &inst)
			out = append(out, generatorFixture{strings.TrimSuffix(filepath.Base(f), ".json") + "-" + key, schema, inst.Valid, inst.Invalid})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// TestGeneratorFixturesEndToEnd: for every schema the real generators
// emitted (Pydantic 2, zod 4 in both targets, zod-to-json-schema,
// invopop/jsonschema), through the HTTP API, a real PostgreSQL and a
// provider turn: the mock's own value, generated from the schema the
// provider received, succeeds; every valid instance succeeds as submitted;
// every invalid instance is refused (a validation rejection, repaired by
// the next submission).
func TestGeneratorFixturesEndToEnd(t *testing.T) {
	t.Parallel()
	fixtures := generatorFixtures(t)
	type chatPlan struct {
		script  string
		steps   []mockllm.Step
		final   json.RawMessage // nil: the mock generates it
		refused int
	}
	plans := map[string][]chatPlan{}
	scripts := map[string]*mockllm.Script{}
	for _, f := range fixtures {
		var ps []chatPlan
		ps = append(ps, chatPlan{script: f.name + "-generated", steps: []mockllm.Step{{}}})
		// Two refused submissions then a valid one per chat: the request
		// allows two repairs.
		for i := 0; i < max(len(f.valid), (len(f.invalid)+1)/2); i++ {
			p := chatPlan{script: fmt.Sprintf("%s-%d", f.name, i), final: f.valid[i%len(f.valid)]}
			for _, bad := range f.invalid[min(2*i, len(f.invalid)):min(2*i+2, len(f.invalid))] {
				p.steps = append(p.steps, mockllm.Step{Value: bad})
				p.refused++
			}
			p.steps = append(p.steps, mockllm.Step{Value: p.final})
			ps = append(ps, p)
		}
		for _, p := range ps {
			scripts[p.script] = &mockllm.Script{Steps: p.steps}
		}
		plans[f.name] = ps
	}
	env := testenv.New(t, testenv.Options{Provider: config.TypeOpenAIChat, Mock: mockllm.Options{Scripts: scripts}})
	c := env.Client("alice")
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			for _, p := range plans[f.name] {
				res, err := c.CreateChat(t.Context(), client.CreateChatRequest{
					Content: []client.MessagePart{client.TextPart("Produce it. [script:" + p.script + "]")},
					ResponseFormat: &client.ResponseFormat{Type: "json_schema",
						JSONSchema: &client.JSONSchemaFormat{Name: "fixture", Schema: f.schema}},
				})
				if err != nil {
					t.Fatalf("%s: %v", p.script, err)
				}
				req := *res.Messages[0].StructuredOutputRequestID
				out, err := c.WaitStructuredOutput(t.Context(), req)
				if err != nil {
					t.Fatal(err)
				}
				if out.Status != client.OutputSucceeded {
					t.Errorf("%s: status %s error %+v", p.script, out.Status, out.Error)
					continue
				}
				if p.final != nil && !jsonEqual(out.Value, p.final) {
					t.Errorf("%s: value %s, want %s", p.script, out.Value, p.final)
				}
				var rejections, validation int
				if err := env.Pool.QueryRow(t.Context(), `SELECT rejections, validation_rejections FROM structured_requests WHERE request_id = $1`, req).
					Scan(&rejections, &validation); err != nil {
					t.Fatal(err)
				}
				if rejections != p.refused || validation != p.refused {
					t.Errorf("%s: %d rejections (%d by validation), want %d", p.script, rejections, validation, p.refused)
				}
			}
		})
	}
}

// TestNumberNotationMatchesPostgreSQL: the validator admits a number
// exactly when it is within float64's range and PostgreSQL's jsonb renders
// it in at most validate.MaxNumberLen characters, and what jsonb returns
// is the same number and passes the scan again: a number admitted at the
// door survives being stored and read back, and every float64 is admitted.
func TestNumberNotationMatchesPostgreSQL(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	lits := []string{"0", "-0", "-0.0", "1e3", "1.50e2", "1.5e-3", "123e65", "123e61", "1e63", "1e64", "-1e62", "-1e63",
		"1e-62", "1e-63", "0.0e300", "0e-300", "9.99e62", "1E+63", "12.345e1", "-7E+2", "1e100", "1.8e308", "1e-308",
		"0.00000000000000000000000000000000000000000000000000000000000001",
		"12345678901234567890123456789012345678901234567890123456789012.5", "1234567890123456789012345678901234567890123456789012345678901234e-60",
		"1.5e300", "0.0000001e-300", "1e308", "1e309", "1e400", "1e-400", "-1.7976931348623157e308", "-4.9406564584124654e-324",
		"2.2250738585072014e-308", "0e-398", "0e-399", "1." + strings.Repeat("1", 97) + "e-300", "1." + strings.Repeat("1", 98) + "e-300"}
	for _, lit := range lits {
		_, err := validate.Decode([]byte(lit), validate.ValueLimits)
		var stored string
		var equal bool
		if perr := pool.QueryRow(t.Context(), `SELECT $1::jsonb::text, $1::jsonb::text::numeric = $1::numeric`, lit).Scan(&stored, &equal); perr != nil {
			t.Fatalf("%s: %v", lit, perr)
		}
		f, _ := strconv.ParseFloat(lit, 64)
		inRange := !math.IsInf(f, 0) && (f != 0 || strings.Trim(strings.Split(strings.ToLower(lit), "e")[0], "-0.") == "")
		if fits := len(stored) <= validate.ValueLimits.MaxNumberLen && inRange; (err == nil) != fits {
			t.Errorf("%s: stored as %.40s (%d characters); validator error %v", lit, stored, len(stored), err)
		}
		if err == nil {
			if _, rerr := validate.Decode([]byte(stored), validate.ValueLimits); rerr != nil || !equal {
				t.Errorf("%s: stored as %.40s (equal %v), which the scan refuses: %v", lit, stored, equal, rerr)
			}
		}
	}
}

// TestGeneratorFixturesOnGemini: every real generator's schema reaches
// Gemini in the form chatd sends it (parametersJsonSchema: root $defs, a
// $ref alone in its object), which the mock accepts only under Gemini's
// $ref rules, and the value the mock generates from that form validates
// against the schema as the caller wrote it.
func TestGeneratorFixturesOnGemini(t *testing.T) {
	t.Parallel()
	fixtures := generatorFixtures(t)
	env := testenv.New(t, testenv.Options{Provider: config.TypeGoogle, Model: config.Model{Model: "gemini-2.5-flash"},
		Mock: mockllm.Options{Formats: []string{mockllm.FormatGemini}}})
	c := env.Client("alice")
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			res, err := c.CreateChat(t.Context(), client.CreateChatRequest{
				Content: []client.MessagePart{client.TextPart("Produce it.")},
				ResponseFormat: &client.ResponseFormat{Type: "json_schema",
					JSONSchema: &client.JSONSchemaFormat{Name: "fixture", Schema: f.schema}},
			})
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.WaitStructuredOutput(t.Context(), *res.Messages[0].StructuredOutputRequestID)
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != client.OutputSucceeded {
				t.Errorf("status %s error %+v", out.Status, out.Error)
			}
		})
	}
}
