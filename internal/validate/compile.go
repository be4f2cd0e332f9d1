package validate

import (
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/xeipuuv/gojsonreference"
	"github.com/xeipuuv/gojsonschema"
)

// docLoader feeds an already-decoded document to gojsonschema. Its factory
// refuses every load, so no reference can reach the file system or network.
// (The library consults only the root loader's factory: schemaLoader.go:157.)
type docLoader struct{ doc any }

func (l docLoader) JsonSource() any                               { return l.doc }
func (l docLoader) LoadJSON() (any, error)                        { return l.doc, nil }
func (l docLoader) LoaderFactory() gojsonschema.JSONLoaderFactory { return denyFactory{} }
func (l docLoader) JsonReference() (gojsonreference.JsonReference, error) {
	return gojsonreference.NewJsonReference("#")
}

type denyFactory struct{}

func (denyFactory) New(source string) gojsonschema.JSONLoader { return deniedLoader(source) }

// deniedLoads counts loads the library attempted and we refused (tests
// assert it stays zero for screened schemas).
var deniedLoads atomic.Int64

type deniedLoader string

func (l deniedLoader) JsonSource() any { return string(l) }
func (l deniedLoader) LoadJSON() (any, error) {
	deniedLoads.Add(1)
	return nil, fmt.Errorf("loading %q is not allowed", string(l))
}
func (l deniedLoader) LoaderFactory() gojsonschema.JSONLoaderFactory { return denyFactory{} }
func (l deniedLoader) JsonReference() (gojsonreference.JsonReference, error) {
	return gojsonreference.NewJsonReference(string(l))
}

// denyFS refuses every open; the meta-schema URL is served from the
// library's embedded copy before any file system is consulted
// (jsonLoader.go:184-186).
type denyFS struct{}

func (denyFS) Open(name string) (http.File, error) {
	deniedLoads.Add(1)
	return nil, fmt.Errorf("opening %q is not allowed", name)
}

// metaSchema is one bundled meta-schema, compiled once.
type metaSchema struct {
	once   sync.Once
	url    string
	draft  gojsonschema.Draft
	schema *gojsonschema.Schema
	err    error
}

// metas are the meta-schemas documents are checked against: Draft-04's
// and Draft-06's, and Draft-07's for the rest (2019-09 and 2020-12 are
// checked once translated).
var metas = map[dialect]*metaSchema{
	draft04: {url: "http://json-schema.org/draft-04/schema", draft: gojsonschema.Draft4},
	draft06: {url: "http://json-schema.org/draft-06/schema", draft: gojsonschema.Draft6},
	draft07: {url: "http://json-schema.org/draft-07/schema", draft: gojsonschema.Draft7},
}

// metaFor is the meta-schema a document of dialect d is checked against,
// and its dialect.
func metaFor(d dialect) (*metaSchema, dialect) {
	if m, ok := metas[d]; ok {
		return m, d
	}
	return metas[draft07], draft07
}

// compiled compiles a bundled meta-schema once, in its own dialect, in a
// loader of its own that no caller document ever touches.
func (m *metaSchema) compiled() (*gojsonschema.Schema, error) {
	m.once.Do(func() {
		doc, err := gojsonschema.NewReferenceLoaderFileSystem(m.url, denyFS{}).LoadJSON()
		if err != nil {
			m.err = fmt.Errorf("load the bundled meta-schema %s: %w", m.url, err)
			return
		}
		m.schema, m.err = compileDraft(doc, m.draft)
		if m.err == nil && m.draft == gojsonschema.Draft7 {
			warmUp()
		}
	})
	return m.schema, m.err
}

// warmUp makes the library render one error of every type, so that its
// process-wide template cache is filled before any caller's validation:
// the first rendering of a template parses it, a one-off allocation the
// cost model does not count per validation.
func warmUp() {
	defer func() { _ = recover() }()
	doc, err := Decode([]byte(warmUpSchema), schemaLimits)
	if err != nil {
		return
	}
	adapt(doc, doc, "", nil)
	s, err := compileDoc(doc)
	if err != nil {
		return
	}
	for _, v := range []string{warmUpValue, `"x"`, `1.5`, `null`} {
		inst, _ := Decode([]byte(v), valueLimits)
		_, _ = s.Validate(docLoader{inst})
	}
}

// warmUpSchema and warmUpValue fail every keyword once (TestWarmUp).
const (
	warmUpSchema = `{"type":"object","required":["r"],"minProperties":99,"additionalProperties":false,
		"properties":{"a":{"type":"array","minItems":9,"maxItems":1,"uniqueItems":true,"contains":false,"items":[true],"additionalItems":false},
			"s":{"minLength":9,"maxLength":9,"pattern":"^z$","format":"email"},"t":{"maxLength":0},"m":{"maxProperties":0},
			"n":{"multipleOf":7,"maximum":0,"exclusiveMaximum":0,"minimum":9,"exclusiveMinimum":9},
			"c":{"const":"x","enum":["y"]},"f":false,"x":{"not":{}},
			"o":{"anyOf":[false],"oneOf":[false],"allOf":[false]},
			"i":{"if":true,"then":false},"e":{"if":false,"else":false}},
		"dependencies":{"a":["zz"]},"propertyNames":{"maxLength":1}}`
	warmUpValue = `{"a":[1,1,1],"s":"q","t":"q","m":{"k":1},"n":8,"c":"q","f":1,"x":1,"o":1,"i":1,"e":1,"extra":1}`
)

// slots bounds concurrent library work: each validation may allocate up to
// about BudgetBytes, so the process holds at most len(slots) of them.
var slots = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))

// Schema is a compiled caller schema. It is safe for concurrent use.
type Schema struct {
	compiled *gojsonschema.Schema
	model    *cnode
	// Warnings say what was admitted but is not checked (admit_annotations.go):
	// the first MaxWarnings, in document order. Read only.
	Warnings []Warning
	ecma     []*ecmaEntry // registered while s lives (ecma.go)

	// patternProperties keys only ECMAScript runs (ecma_keys.go): the
	// document to specialise, and the specialisations made
	ecmaKeys []ecmaKey
	template any
	insts    map[string]int
	specs    *specializations
}

// Compile admits a caller schema document: strict scan, screening and
// caps, meta-validation against the bundled Draft-07 meta-schema (stage 1),
// then compilation in a fresh, deny-all loader (stage 2). Errors are
// *ScanError values locating the problem in the schema.
func Compile(raw []byte) (*Schema, error) {
	doc, err := Decode(raw, schemaLimits)
	if err != nil {
		return nil, err
	}
	sc, err := screen(doc)
	if err != nil {
		return nil, err
	}
	entries := acquireECMA(sc.ecma, sc.ecmaRE)
	sets := acquireEnums(sc.enums)
	s, err := compileScreened(doc, sc)
	if err != nil {
		releaseECMA(entries)
		releaseEnums(sets)
		return nil, err
	}
	holdECMA(s, entries)
	holdEnums(s, sets)
	return s, nil
}

// compileScreened is the rest of Compile, once the document is screened
// and its ECMAScript patterns registered.
func compileScreened(doc any, sc *screened) (*Schema, error) {
	// the document, and the schemas references name inside dropped keys
	nodes := append([]detachedSchema{{doc, ""}}, prepare(doc, sc)...)
	keys := renameECMAKeys(nodes, sc.ecmaKeys)
	for _, d := range nodes {
		if err := metaCheck(d.node, sc.dialect); err != nil {
			if se, ok := err.(*ScanError); ok {
				se.Pointer = d.ptr + se.Pointer
			}
			return nil, err
		}
		if sc.dialect == draft04 {
			fromDraft04(d.node, d.ptr)
		}
		adapt(d.node, doc, d.ptr, sc.targets)
	}
	s := &Schema{Warnings: sc.warnings, ecmaKeys: keys, insts: sc.insts}
	if len(keys) > 0 {
		s.template, s.specs = deepCopy(doc), &specializations{byKey: map[string]*specialized{}}
	}
	compiled, err := compileDoc(doc)
	if err != nil {
		return nil, &ScanError{Detail: "the schema cannot be compiled: " + err.Error()}
	}
	s.compiled, s.model = compiled, buildModel(doc, sc.insts)
	return s, nil
}

// metaCheck is stage 1: the document validated as data against the
// trusted meta-schema of its dialect (instance validation never loads
// anything).
func metaCheck(doc any, d dialect) (err error) {
	if _, err := metas[draft07].compiled(); err != nil {
		return err // it warms the library up (warmUp), whatever the dialect
	}
	ms, md := metaFor(d)
	m, err := ms.compiled()
	if err != nil {
		return err
	}
	slots <- struct{}{}
	defer func() { <-slots }()
	defer func() {
		if r := recover(); r != nil {
			err = &ScanError{Detail: fmt.Sprintf("the schema cannot be checked against the %s meta-schema", md)}
		}
	}()
	res, err := m.Validate(docLoader{doc})
	if err != nil {
		return &ScanError{Detail: fmt.Sprintf("the schema cannot be checked against the %s meta-schema: %v", md, err)}
	}
	if r := convert(res.Errors()); !r.Valid() {
		e := r.Errors[0]
		return &ScanError{Pointer: e.Location, Detail: fmt.Sprintf("does not conform to the %s meta-schema: %s", md, e.Message)}
	}
	return nil
}

// compileDoc is stage 2: a fresh loader per document (the library's pool
// is keyed by reference and not safe to share), Draft-07 pinned, no
// dialect auto-detection, no library meta-validation (it would replace our
// deny-all factory with the OS/HTTP one: schemaLoader.go:72), and a root
// loader whose factory denies everything.
func compileDoc(doc any) (*gojsonschema.Schema, error) { return compileDraft(doc, gojsonschema.Draft7) }

// compileDraft is compileDoc in another of the library's drafts (the
// bundled meta-schemas' own).
func compileDraft(doc any, draft gojsonschema.Draft) (s *gojsonschema.Schema, err error) {
	slots <- struct{}{}
	defer func() { <-slots }()
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("internal error in the schema compiler")
		}
	}()
	sl := gojsonschema.NewSchemaLoader()
	sl.Draft, sl.AutoDetect, sl.Validate = draft, false, false
	return sl.Compile(docLoader{doc})
}
