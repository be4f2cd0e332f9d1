package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Format is an admitted structured response format.
type Format struct {
	Name        string
	Description string
	// Schema is the caller's schema document as received (validated).
	Schema   json.RawMessage
	Compiled *Schema
}

// FieldError names the request field at fault. A schema with several
// problems gives one FieldError per problem: the first, and the rest in
// More (at most MaxProblems in all, ordered by pointer).
type FieldError struct {
	Field  string       `json:"field"`
	Detail string       `json:"detail"`
	More   []FieldError `json:"-"`
}

// All lists e and the errors in its More.
func (e *FieldError) All() []FieldError {
	return append([]FieldError{{Field: e.Field, Detail: e.Detail}}, e.More...)
}

// schemaError reports a schema's refusal against field, one FieldError
// per problem.
func schemaError(field string, err error) *FieldError {
	ps := ProblemsOf(err)
	if len(ps) == 0 {
		return &FieldError{Field: field, Detail: err.Error()}
	}
	fe := &FieldError{Field: field, Detail: ps[0].Error()}
	for _, p := range ps[1:] {
		fe.More = append(fe.More, FieldError{Field: field, Detail: p.Error()})
	}
	return fe
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Detail }

// MaxDescriptionBytes bounds json_schema.description.
const MaxDescriptionBytes = 1024

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// envelopeLimits bound the whole response_format member. They leave room
// for a schema at its own limits (Compile enforces those, and reports
// against the schema field), plus the envelope's few members.
var envelopeLimits = Limits{MaxBytes: schemaLimits.MaxBytes + 4096, MaxDepth: schemaLimits.MaxDepth + 2,
	MaxNodes: schemaLimits.MaxNodes + 16, MaxKeyBytes: schemaLimits.MaxKeyBytes, MaxNumberLen: schemaLimits.MaxNumberLen, AllowNUL: true}

// schemaPointer is where the schema sits in the envelope.
const schemaPointer = "/json_schema/schema"

// IsAbsent reports whether a response_format member was omitted or null.
func IsAbsent(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// ParseResponseFormat admits the raw value of a request's response_format
// member. It returns (nil, nil) for text behaviour: omitted, null or
// {"type":"text"}.
func ParseResponseFormat(raw json.RawMessage) (*Format, *FieldError) {
	const field = "response_format"
	if IsAbsent(raw) {
		return nil, nil
	}
	doc, err := Decode(raw, envelopeLimits)
	if err != nil {
		return nil, envelopeError(raw, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, &FieldError{Field: field, Detail: "must be an object or null"}
	}
	if err := onlyKeys(obj, field, "type", "json_schema"); err != nil {
		return nil, err
	}
	if text, fe := textFormat(obj, field); text || fe != nil {
		return nil, fe
	}
	js, ok := obj["json_schema"].(map[string]any)
	if !ok {
		return nil, &FieldError{Field: field + ".json_schema", Detail: "is required and must be an object"}
	}
	jf := field + ".json_schema"
	f, fe := namedFormat(js, jf)
	if fe != nil {
		return nil, fe
	}
	if fe := f.compileSchema(raw, js, jf); fe != nil {
		return nil, fe
	}
	return f, nil
}

// textFormat reads the envelope's "type": text is true for "text", false
// for "json_schema".
func textFormat(obj map[string]any, field string) (text bool, fe *FieldError) {
	typ, present := obj["type"]
	if !present {
		return false, &FieldError{Field: field + ".type", Detail: `is required: "text" or "json_schema"`}
	}
	switch typ {
	case "text":
		if _, has := obj["json_schema"]; has {
			return false, &FieldError{Field: field + ".json_schema", Detail: `must not accompany type "text"`}
		}
		return true, nil
	case "json_schema":
		return false, nil
	default:
		return false, &FieldError{Field: field + ".type", Detail: `must be "text" or "json_schema"`}
	}
}

// namedFormat reads json_schema's members other than the schema: strict,
// name and description.
func namedFormat(js map[string]any, jf string) (*Format, *FieldError) {
	if err := onlyKeys(js, jf, "name", "description", "schema", "strict"); err != nil {
		return nil, err
	}
	// OpenAI's strict mode: chatd always validates the result against the
	// whole schema, so true asks for nothing more, and false for something
	// chatd does not do.
	if v, has := js["strict"]; has && v != true {
		detail := `must be true or absent: chatd always validates the result against the schema; remove "strict"`
		if _, isBool := v.(bool); !isBool {
			detail = `must be a boolean (true, or absent: chatd always validates the result against the schema)`
		}
		return nil, &FieldError{Field: jf + ".strict", Detail: detail}
	}
	name, ok := js["name"].(string)
	if !ok || !nameRE.MatchString(name) {
		return nil, &FieldError{Field: jf + ".name", Detail: "is required and must match ^[A-Za-z0-9_-]{1,64}$"}
	}
	f := &Format{Name: name}
	if d, has := js["description"]; has {
		s, ok := d.(string)
		if !ok {
			return nil, &FieldError{Field: jf + ".description", Detail: "must be a string"}
		}
		if len(s) > MaxDescriptionBytes {
			return nil, &FieldError{Field: jf + ".description", Detail: fmt.Sprintf("must be at most %d UTF-8 bytes", MaxDescriptionBytes)}
		}
		if strings.IndexByte(s, 0) >= 0 {
			return nil, &FieldError{Field: jf + ".description", Detail: "contains U+0000, which PostgreSQL text cannot store"}
		}
		f.Description = s
	}
	return f, nil
}

// compileSchema admits json_schema's schema, kept as the caller's bytes.
func (f *Format) compileSchema(raw []byte, js map[string]any, jf string) *FieldError {
	if _, has := js["schema"]; !has {
		return &FieldError{Field: jf + ".schema", Detail: "is required"}
	}
	if _, ok := js["schema"].(map[string]any); !ok {
		return &FieldError{Field: jf + ".schema", Detail: "(root): must be a JSON object (the value it describes may be any JSON type)"}
	}
	// The stored document is the caller's bytes, not a re-encoding.
	schema := rawSchema(raw)
	if schema == nil {
		return &FieldError{Field: jf + ".schema", Detail: "(root): cannot be read"}
	}
	compiled, err := CompileCached(schema)
	if err != nil {
		return schemaError(jf+".schema", err)
	}
	f.Schema = schema
	f.Compiled = compiled
	return nil
}

// rawSchema extracts the raw bytes of json_schema.schema from an envelope
// that is valid JSON (nil if there is none).
func rawSchema(raw []byte) json.RawMessage {
	var env struct {
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil
	}
	return env.JSONSchema.Schema
}

// envelopeError reports a scan error in the envelope against the field it
// lies in. A problem inside the schema is reported by Compile on the
// schema's own bytes when they can be extracted, so that its pointer and
// limits are the schema's.
func envelopeError(raw []byte, err error) *FieldError {
	const field = "response_format"
	se, ok := err.(*ScanError)
	if !ok {
		return &FieldError{Field: field, Detail: err.Error()}
	}
	if se.Pointer == "" && len(raw) > envelopeLimits.MaxBytes {
		if schema := rawSchema(raw); len(schema) > schemaLimits.MaxBytes {
			_, cerr := Compile(schema)
			return schemaError(field+".json_schema.schema", cerr)
		}
	}
	if rest, in := strings.CutPrefix(se.Pointer, schemaPointer); in && (rest == "" || rest[0] == '/') {
		if schema := rawSchema(raw); schema != nil {
			if _, cerr := Compile(schema); cerr != nil {
				return schemaError(field+".json_schema.schema", cerr)
			}
		}
		return &FieldError{Field: field + ".json_schema.schema", Detail: (&ScanError{Pointer: rest, Detail: se.Detail}).Error()}
	}
	if rest, in := strings.CutPrefix(se.Pointer, "/json_schema/"); in {
		name, _, _ := strings.Cut(rest, "/")
		return &FieldError{Field: field + ".json_schema." + name, Detail: se.Detail}
	}
	return &FieldError{Field: field, Detail: err.Error()}
}

func onlyKeys(obj map[string]any, field string, allowed ...string) *FieldError {
	var unknown []string
	for k := range obj {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
			}
		}
		if !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return &FieldError{Field: field + "." + unknown[0], Detail: "unknown field"}
}
