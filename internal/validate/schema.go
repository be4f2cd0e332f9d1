// Package validate admits caller JSON Schemas (Draft-07, inline only) and
// validates model-submitted values against them, hermetically: nothing here
// reads a file, resolves a name or opens a connection. It imports neither
// pgx nor HTTP code.
package validate

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/xeipuuv/gojsonreference"
	"github.com/xeipuuv/gojsonschema"
)

// Draft07URI is the only $schema value accepted.
const Draft07URI = "http://json-schema.org/draft-07/schema#"

// MaxReportedErrors bounds the errors returned for one validation.
const MaxReportedErrors = 32

// docLoader feeds an already-decoded document to gojsonschema. Its factory
// refuses every load, so no reference can reach the file system or network.
type docLoader struct{ doc any }

func (l docLoader) JsonSource() any                               { return l.doc }
func (l docLoader) LoadJSON() (any, error)                        { return l.doc, nil }
func (l docLoader) LoaderFactory() gojsonschema.JSONLoaderFactory { return denyFactory{} }
func (l docLoader) JsonReference() (gojsonreference.JsonReference, error) {
	return gojsonreference.NewJsonReference("#")
}

type denyFactory struct{}

func (denyFactory) New(source string) gojsonschema.JSONLoader { return deniedLoader(source) }

type deniedLoader string

func (l deniedLoader) JsonSource() any { return string(l) }
func (l deniedLoader) LoadJSON() (any, error) {
	return nil, fmt.Errorf("loading %q is not allowed", string(l))
}
func (l deniedLoader) LoaderFactory() gojsonschema.JSONLoaderFactory { return denyFactory{} }
func (l deniedLoader) JsonReference() (gojsonreference.JsonReference, error) {
	return gojsonreference.NewJsonReference(string(l))
}

var (
	metaOnce   sync.Once
	metaSchema *gojsonschema.Schema
	metaErr    error
)

// meta compiles the bundled Draft-07 meta-schema once, in its own loader.
func meta() (*gojsonschema.Schema, error) {
	metaOnce.Do(func() {
		doc, err := gojsonschema.NewReferenceLoaderFileSystem("http://json-schema.org/draft-07/schema", denyFS{}).LoadJSON()
		if err != nil {
			metaErr = fmt.Errorf("load the bundled Draft-07 meta-schema: %w", err)
			return
		}
		sl := gojsonschema.NewSchemaLoader()
		sl.Draft, sl.AutoDetect, sl.Validate = gojsonschema.Draft7, false, false
		metaSchema, metaErr = sl.Compile(docLoader{doc})
	})
	return metaSchema, metaErr
}

// Schema is a compiled caller schema.
type Schema struct {
	compiled *gojsonschema.Schema
}

// Compile screens and compiles a caller schema document.
func Compile(raw []byte) (s *Schema, err error) {
	doc, err := Decode(raw, SchemaLimits)
	if err != nil {
		return nil, err
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, &ScanError{Detail: "the schema must be a JSON object"}
	}
	if err := screen(doc, "", true); err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, &ScanError{Detail: fmt.Sprintf("schema cannot be compiled: %v", r)}
		}
	}()
	m, err := meta()
	if err != nil {
		return nil, err
	}
	res, err := m.Validate(docLoader{doc})
	if err != nil {
		return nil, err
	}
	if !res.Valid() {
		e := res.Errors()[0]
		return nil, &ScanError{Pointer: fieldPointer(e.Field()), Detail: e.Description()}
	}
	sl := gojsonschema.NewSchemaLoader()
	sl.Draft, sl.AutoDetect, sl.Validate = gojsonschema.Draft7, false, false
	compiled, err := sl.Compile(docLoader{doc})
	if err != nil {
		return nil, &ScanError{Detail: "schema cannot be compiled: " + err.Error()}
	}
	return &Schema{compiled: compiled}, nil
}

// ValueError is one validation failure.
type ValueError struct {
	Location string `json:"location"`
	Message  string `json:"message"`
}

// Result of validating a value.
type Result struct {
	Errors []ValueError // at most MaxReportedErrors
	Total  int
}

// Valid reports whether the value satisfied the schema.
func (r Result) Valid() bool { return r.Total == 0 }

// Summary renders the errors for a person or a model, bounded.
func (r Result) Summary() string {
	var b strings.Builder
	for i, e := range r.Errors {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Location)
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if r.Total > len(r.Errors) {
		fmt.Fprintf(&b, " (and %d more)", r.Total-len(r.Errors))
	}
	return b.String()
}

// ErrUnsafeValue wraps a raw-value problem found before validation.
var ErrUnsafeValue = errors.New("unsafe value")

// Validate checks a raw value. A value that fails the safety scan is
// reported as a single error at its location.
func (s *Schema) Validate(raw []byte) (res Result) {
	doc, err := Decode(raw, ValueLimits)
	if err != nil {
		var se *ScanError
		if errors.As(err, &se) {
			loc := se.Pointer
			if loc == "" {
				loc = "/"
			}
			return Result{Errors: []ValueError{{Location: loc, Message: se.Detail}}, Total: 1}
		}
		return Result{Errors: []ValueError{{Location: "/", Message: err.Error()}}, Total: 1}
	}
	defer func() {
		if r := recover(); r != nil {
			res = Result{Errors: []ValueError{{Location: "/", Message: "value cannot be validated"}}, Total: 1}
		}
	}()
	out, err := s.compiled.Validate(docLoader{doc})
	if err != nil {
		return Result{Errors: []ValueError{{Location: "/", Message: err.Error()}}, Total: 1}
	}
	if out.Valid() {
		return Result{}
	}
	errs := out.Errors()
	res.Total = len(errs)
	for i, e := range errs {
		if i == MaxReportedErrors {
			break
		}
		res.Errors = append(res.Errors, ValueError{Location: fieldPointer(e.Field()), Message: e.Description()})
	}
	return res
}

// fieldPointer turns gojsonschema's "(root)" / "a.b.0" into a JSON Pointer.
func fieldPointer(field string) string {
	if field == "" || field == "(root)" {
		return "/"
	}
	parts := strings.Split(field, ".")
	for i, p := range parts {
		parts[i] = escapePointer(p)
	}
	return "/" + strings.Join(parts, "/")
}

// Schema-position screening: keywords we accept, and those that take
// subschemas, arrays of subschemas or maps of subschemas.
var (
	keywords = map[string]bool{
		"$schema": true, "$comment": true, "title": true, "description": true, "default": true,
		"examples": true, "readOnly": true, "writeOnly": true,
		"type": true, "enum": true, "const": true,
		"multipleOf": true, "maximum": true, "exclusiveMaximum": true, "minimum": true, "exclusiveMinimum": true,
		"maxLength": true, "minLength": true, "pattern": true, "format": true,
		"items": true, "additionalItems": true, "maxItems": true, "minItems": true, "uniqueItems": true, "contains": true,
		"maxProperties": true, "minProperties": true, "required": true, "properties": true,
		"patternProperties": true, "additionalProperties": true, "dependencies": true, "propertyNames": true,
		"if": true, "then": true, "else": true, "allOf": true, "anyOf": true, "oneOf": true, "not": true,
		"contentMediaType": true, "contentEncoding": true,
	}
	subschemaKeys    = []string{"additionalItems", "contains", "additionalProperties", "propertyNames", "if", "then", "else", "not"}
	schemaArrayKeys  = []string{"allOf", "anyOf", "oneOf"}
	schemaMapKeys    = []string{"properties", "patternProperties"}
	forbiddenReasons = map[string]string{
		"$ref": "references are not supported; inline the schema", "$id": "schema identifiers are not supported",
		"id": "schema identifiers are not supported", "definitions": "definitions are not supported; inline the schema",
		"$defs": "definitions are not supported; inline the schema",
	}
	formats = map[string]bool{
		"date": true, "time": true, "date-time": true, "hostname": true, "email": true, "idn-email": true,
		"ipv4": true, "ipv6": true, "uri": true, "uri-reference": true, "iri": true, "iri-reference": true,
		"uri-template": true, "uuid": true, "json-pointer": true, "relative-json-pointer": true,
	}
)

// screen walks schema positions only; property names and literal data
// (const, enum, default, examples) are not keywords and are left alone.
func screen(node any, ptr string, root bool) error {
	obj, ok := node.(map[string]any)
	if !ok {
		if _, isBool := node.(bool); isBool {
			return nil
		}
		return &ScanError{Pointer: ptrOrRoot(ptr), Detail: "a schema must be an object or a boolean"}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kp := ptr + "/" + escapePointer(k)
		if why, bad := forbiddenReasons[k]; bad {
			return &ScanError{Pointer: kp, Detail: why}
		}
		if !keywords[k] {
			return &ScanError{Pointer: kp, Detail: fmt.Sprintf("unknown keyword %q", k)}
		}
	}
	if s, ok := obj["$schema"]; ok {
		if str, _ := s.(string); !root || (str != Draft07URI && str != strings.TrimSuffix(Draft07URI, "#")) {
			return &ScanError{Pointer: ptr + "/$schema", Detail: "only the Draft-07 URI " + Draft07URI + " is accepted, at the root"}
		}
	}
	if f, ok := obj["format"]; ok {
		if name, _ := f.(string); !formats[name] {
			return &ScanError{Pointer: ptr + "/format", Detail: fmt.Sprintf("unsupported format %v", f)}
		}
	}
	for _, k := range subschemaKeys {
		if v, ok := obj[k]; ok {
			if err := screen(v, ptr+"/"+k, false); err != nil {
				return err
			}
		}
	}
	if v, ok := obj["items"]; ok {
		if arr, isArr := v.([]any); isArr {
			for i, s := range arr {
				if err := screen(s, fmt.Sprintf("%s/items/%d", ptr, i), false); err != nil {
					return err
				}
			}
		} else if err := screen(v, ptr+"/items", false); err != nil {
			return err
		}
	}
	for _, k := range schemaArrayKeys {
		if arr, ok := obj[k].([]any); ok {
			for i, s := range arr {
				if err := screen(s, fmt.Sprintf("%s/%s/%d", ptr, k, i), false); err != nil {
					return err
				}
			}
		}
	}
	for _, k := range schemaMapKeys {
		if m, ok := obj[k].(map[string]any); ok {
			for name, s := range m {
				if err := screen(s, ptr+"/"+k+"/"+escapePointer(name), false); err != nil {
					return err
				}
			}
		}
	}
	if m, ok := obj["dependencies"].(map[string]any); ok {
		for name, s := range m {
			if _, isArr := s.([]any); isArr {
				continue // property dependencies are lists of names
			}
			if err := screen(s, ptr+"/dependencies/"+escapePointer(name), false); err != nil {
				return err
			}
		}
	}
	return nil
}

func ptrOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

type denyFS struct{}

// Open refuses: the meta-schema URL is served from the library's embedded copy.
func (denyFS) Open(name string) (http.File, error) {
	return nil, fmt.Errorf("opening %q is not allowed", name)
}
