package validate

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/dlclark/regexp2/v2"
)

// Caps on caller schemas, checked by the screening before any library call.
// Fitted to the SchemaStore catalogue: the largest hermetic
// draft-07 schema the oracle accepts fits each, with room; the measurements
// behind them are in docs/structured-output.md.
const (
	MaxSubschemas     = 4096      // schemas in one document, boolean ones and the root included (catalogue: 3,310)
	MaxSubschemaDepth = 16        // schemas nested inside one another below the root (catalogue: 13)
	MaxBranches       = 128       // entries of one allOf / anyOf / oneOf (catalogue: 125)
	MaxPatterns       = 256       // pattern keywords plus patternProperties keys (catalogue: 127)
	MaxPatternTotal   = 16384     // compiled program instructions of all patterns together (catalogue: 2,882)
	MaxPatternBytes   = 1024      // source length of one pattern (catalogue: 650)
	MaxPatternInsts   = 1024      // compiled RE2 program size of one pattern, regexp/syntax instructions (catalogue: 683)
	MaxEnumEntries    = 8192      // entries of one enum of strings, checked as a set above 256 (compile_enumset.go; catalogue: 2,461)
	MaxMixedEnums     = 2048      // entries of an enum with a value that is not a string (the library's check is quadratic)
	MaxNames          = 512       // entries of one required or dependencies array (the library's duplicate check is quadratic; catalogue: 39)
	MaxLiteralBytes   = 64 << 10  // compact JSON size of one const / enum / default / examples value (catalogue: 19,025)
	maxCount          = 1<<31 - 1 // count keywords above this are clamped (values are far smaller)
)

// keyword kinds: what a keyword's value must be.
type kwKind uint8

const (
	kwSchemaURI kwKind = iota + 1
	kwString
	kwBool
	kwLiteral      // const, default: any JSON value
	kwLiteralArray // examples
	kwEnum
	kwType
	kwNumber
	kwPositive // multipleOf
	kwCount    // non-negative integers
	kwPattern
	kwFormat
	kwSchema
	kwItems
	kwRequired
	kwProperties
	kwPatternProperties
	kwDependencies
	kwSchemaArray
	kwRef         // $ref: a local reference (admit_refs.go)
	kwDefinitions // definitions, $defs: an object of schemas that apply nowhere by themselves
	kwID          // $id (id at the root): an identifier (admit_bundle.go)
	kwAnnotation  // any JSON value, never asserted
	kwNullable    // OpenAPI 3.0's nullable: true adds "null" to "type"
	kwAnchor      // 2019-09's and 2020-12's $anchor: a plain-name fragment (admit_bundle.go)

	kwExclusiveFlag     // Draft-04's boolean exclusiveMaximum / exclusiveMinimum
	kwDependentRequired // an object of lists of names (dependencies' lists)
	kwDependentSchemas  // an object of schemas (dependencies' schemas)
	kwUnevaluated       // unevaluatedProperties / unevaluatedItems: a schema (dialect_unevaluated.go)
	kwDynamicRef        // $recursiveRef, $dynamicRef: a reference resolved where it applies (admit_bundle.go)
	kwDynamicAnchor     // $recursiveAnchor, $dynamicAnchor
	kwUntranslatable    // refused (dialect.go)
)

var keywords = map[string]kwKind{
	"$schema": kwSchemaURI, "$comment": kwString, "title": kwString, "description": kwString,
	"contentMediaType": kwString, "contentEncoding": kwString,
	"readOnly": kwBool, "writeOnly": kwBool, "uniqueItems": kwBool,
	"deprecated": kwLiteral, // not a Draft-07 keyword; catalogue schemas give it strings too
	"default":    kwLiteral, "const": kwLiteral, "examples": kwLiteralArray, "enum": kwEnum, "type": kwType,
	"maximum": kwNumber, "exclusiveMaximum": kwNumber, "minimum": kwNumber, "exclusiveMinimum": kwNumber,
	"multipleOf": kwPositive,
	"maxLength":  kwCount, "minLength": kwCount, "maxItems": kwCount, "minItems": kwCount,
	"maxProperties": kwCount, "minProperties": kwCount,
	"pattern": kwPattern, "format": kwFormat,
	"additionalItems": kwSchema, "contains": kwSchema, "additionalProperties": kwSchema, "propertyNames": kwSchema,
	"if": kwSchema, "then": kwSchema, "else": kwSchema, "not": kwSchema,
	"items": kwItems, "required": kwRequired, "properties": kwProperties,
	"patternProperties": kwPatternProperties, "dependencies": kwDependencies,
	"allOf": kwSchemaArray, "anyOf": kwSchemaArray, "oneOf": kwSchemaArray,
	"$ref": kwRef, "definitions": kwDefinitions, "$defs": kwDefinitions, "$id": kwID, "id": kwID,
	"nullable": kwNullable, "$anchor": kwAnchor,
	"dependentRequired": kwDependentRequired, "dependentSchemas": kwDependentSchemas,
	"unevaluatedProperties": kwUnevaluated, "unevaluatedItems": kwUnevaluated,
	"$recursiveRef": kwDynamicRef, "$dynamicRef": kwDynamicRef, "$recursiveAnchor": kwDynamicAnchor, "$dynamicAnchor": kwDynamicAnchor,
	"minContains": kwUntranslatable, "maxContains": kwUntranslatable, "$vocabulary": kwUntranslatable, "prefixItems": kwUntranslatable,
}

// EditorAnnotations are keywords of widely used editors and generators
// (VS Code, JSON Schema Store, ajv-errors, OpenAPI, Pydantic) that assert
// nothing: they are admitted anywhere a schema is, with any value, and
// ignored without a warning. A key whose name marks it as an annotation
// ("_format", "x-order", "//": namedAnnotation) is ignored with a warning;
// other unknown keywords are ignored too, with a warning, unless they look
// like a typo of a validation keyword (admit_annotations.go).
var EditorAnnotations = []string{
	"markdownDescription", "markdownEnumDescriptions", "enumDescriptions", "enumItemLabels",
	"deprecationMessage", "defaultSnippets", "doNotSuggest", "suggestSortText", "errorMessage",
	"patternErrorMessage", "allowComments", "allowTrailingCommas", "discriminator", "example",
	"xml", "externalDocs",
}

var editorAnnotation = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range EditorAnnotations {
		m[k] = true
	}
	return m
}()

// annotations are the keywords that assert nothing: dropped from the
// document the library compiles, and not warned about beside a Draft-07
// "$ref".
var annotations = func() map[string]bool {
	m := map[string]bool{"title": true, "description": true, "$comment": true, "default": true, "examples": true,
		"readOnly": true, "writeOnly": true, "deprecated": true, "contentMediaType": true, "contentEncoding": true,
		"contentSchema": true}
	for _, k := range EditorAnnotations {
		m[k] = true
	}
	return m
}()

// kindOf classifies a key at a schema position (false: unknown).
func kindOf(k string) (kwKind, bool) {
	if kind, ok := keywords[k]; ok {
		return kind, true
	}
	if isAnnotation(k) {
		return kwAnnotation, true
	}
	return 0, false
}

// kindAt classifies a key at the schema position ptr of a document of
// dialect d: a keyword d does not have is unknown there (dialect.go), and
// Draft-04's exclusiveMaximum and exclusiveMinimum are flags.
func kindAt(k, ptr string, d dialect) (kwKind, bool) {
	if !inDialect(k, ptr, d) {
		return 0, false
	}
	if d == draft04 && (k == "exclusiveMaximum" || k == "exclusiveMinimum") {
		return kwExclusiveFlag, true
	}
	return kindOf(k)
}

func (s *screener) kindAt(k, ptr string) (kwKind, bool) { return kindAt(k, ptr, s.dialect) }

// isAnnotation reports whether a key at a schema position asserts nothing.
func isAnnotation(k string) bool { return annotations[k] || namedAnnotation(k) != "" }

var simpleTypes = map[string]bool{"array": true, "boolean": true, "integer": true, "null": true, "number": true, "object": true, "string": true}

// screened is what the screening learnt and later stages reuse.
type screened struct {
	insts     map[string]int // pattern source → compiled program size
	dialect   dialect
	refs      []refSite
	positions map[string]any  // pointer → schema, for every schema position
	targets   map[string]bool // pointers named by a "$ref"
	detached  []string        // schemas reached only by a "$ref" (under an unknown keyword)
	warnings  []Warning
	ecma      []string                   // sources of the patterns only the ECMAScript engine runs (ecma.go)
	ecmaRE    map[string]*regexp2.Regexp // and their compiled form
	uneval    map[string]unevalPlan      // unevaluatedProperties / unevaluatedItems pointer → its translation
	enums     map[string][]string        // enums checked as sets, by format name (compile_enumset.go)
	ecmaKeys  map[string]*regexp2.Regexp // patternProperties keys only ECMAScript runs (ecma_keys.go)
}

type screener struct {
	subschemas  int
	patterns    int
	patInsts    int // instructions of all patterns
	insts       map[string]int
	dialect     dialect
	positions   map[string]any      // pointer → schema, for every schema position
	depth       map[string]int      // pointer → nesting depth of that schema
	bases       map[string]*url.URL // pointer → the base URI references there resolve against
	resources   map[string]string   // absolute URI of an identified schema → its pointer
	anchors     map[string]string   // URI#name of a plain-name fragment → its pointer
	inplace     map[string][]string // pointer → schemas applied to the same value (applicators)
	refEdge     map[string][]edge   // pointer → the schemas its "$ref" (and dynamic references) name
	targets     map[string]bool     // pointers named by a "$ref"
	recursive   map[string]bool     // pointer of a resource whose root has "$recursiveAnchor": true
	dynamic     map[string][]string // $dynamicAnchor name → the pointers of the schemas declaring it
	unevaluated []string            // pointers of unevaluatedProperties / unevaluatedItems keywords
	uneval      map[string]unevalPlan
	evalMemo    map[evalKey]evalAnswer // dialect_unevaluated.go
	detached    []string
	refs        []refSite
	warnings    []Warning
	ecma        map[string]*regexp2.Regexp
	enums       map[string][]string        // enums checked as sets, by format name (compile_enumset.go)
	ecmaKeys    map[string]*regexp2.Regexp // patternProperties keys only ECMAScript runs (ecma_keys.go)
	ecmaKeyPtrs []string                   // and where they are
	problems    Problems                   // the refusals found so far (note)
	stop        bool                       // a cap was passed, or MaxProblems found: screening stops
}

// screen checks a decoded schema document: the keyword allowlist at schema
// positions, the shape of every keyword value and the caps. It walks only
// schema positions: property names and literal data (const, enum, default,
// examples) may hold anything, "$ref" included.
func screen(doc any) (*screened, error) {
	s := &screener{insts: map[string]int{}, positions: map[string]any{}, inplace: map[string][]string{},
		refEdge: map[string][]edge{}, targets: map[string]bool{}, depth: map[string]int{},
		recursive: map[string]bool{}, dynamic: map[string][]string{}, uneval: map[string]unevalPlan{}, enums: map[string][]string{},
		ecmaKeys: map[string]*regexp2.Regexp{},
		bases:    map[string]*url.URL{}, resources: map[string]string{docBase.String(): ""}, anchors: map[string]string{},
		ecma: map[string]*regexp2.Regexp{}}
	s.dialect = draft07
	if root, ok := doc.(map[string]any); ok {
		s.dialect, _ = dialectOf(root["$schema"])
	}
	// A problem at one place of the document does not stop the walk: the
	// others are reported with it (note). References are resolved in a
	// document without problems only.
	_ = s.schema(doc, "", 0, docBase)
	if len(s.problems) == 0 {
		_ = s.note(s.resolveRefs(doc))
	}
	if len(s.problems) == 0 {
		_ = s.note(s.planUnevaluated())
	}
	if len(s.problems) == 1 {
		return nil, s.problems[0]
	}
	if len(s.problems) > 1 {
		slices.SortStableFunc(s.problems, func(a, b *ScanError) int { return strings.Compare(a.Pointer, b.Pointer) })
		return nil, s.problems
	}
	return &screened{insts: s.insts, dialect: s.dialect, refs: s.refs, positions: s.positions, targets: s.targets, uneval: s.uneval, enums: s.enums, ecmaKeys: s.ecmaKeys,
		detached: s.detached, warnings: s.warnings, ecma: sortedKeysOf(s.ecma), ecmaRE: s.ecma}, nil
}

func fail(ptr, format string, args ...any) error {
	return &ScanError{Pointer: ptr, Detail: fmt.Sprintf(format, args...)}
}

// note records a problem of the document and returns non-nil when
// screening stops: once a cap was passed (limit) or MaxProblems are
// recorded. A nil err is no problem.
func (s *screener) note(err error) error {
	if err == nil {
		return nil
	}
	if s.stop {
		return err
	}
	if se, ok := err.(*ScanError); ok {
		s.problems = append(s.problems, se)
	} else {
		s.problems = append(s.problems, &ScanError{Detail: err.Error()})
	}
	if len(s.problems) >= MaxProblems {
		s.stop = true
		return err
	}
	return nil
}

// limit records the passing of a document-wide cap and stops the
// screening: walking on would cost without saying more.
func (s *screener) limit(ptr, format string, args ...any) error {
	err := s.note(fail(ptr, format, args...))
	s.stop = true
	return err
}

// schema screens the schema at ptr and, through its keywords, every
// schema below it; depth is its nesting, base the URI its references
// resolve against.
func (s *screener) schema(node any, ptr string, depth int, base *url.URL) error {
	if _, seen := s.positions[ptr]; seen {
		return nil // a referenced schema under an unknown keyword, screened already
	}
	s.subschemas++
	if s.subschemas > MaxSubschemas {
		return s.limit(ptr, "more than %d schemas in one document", MaxSubschemas)
	}
	if depth > MaxSubschemaDepth {
		return s.note(fail(ptr, "schemas nested more than %d deep", MaxSubschemaDepth))
	}
	s.positions[ptr] = node
	s.depth[ptr] = depth
	if _, ok := node.(bool); ok {
		s.bases[ptr] = base
		return nil
	}
	obj, ok := node.(map[string]any)
	if !ok {
		return s.note(fail(ptr, "a schema must be an object or a boolean, not %s", jsonTypeOf(node)))
	}
	keys := sortedKeys(obj)
	_, hasRef := obj["$ref"]
	ignored := hasRef && !s.dialect.modern() // Draft-04 to Draft-07 ignore the siblings of $ref
	base, err := s.identify(obj, ptr, base, ignored)
	if err != nil {
		return s.note(err)
	}
	s.bases[ptr] = base
	if err := s.classifyKeys(keys, ptr, ignored); err != nil {
		return err
	}
	for _, k := range keys {
		if _, known := s.kindAt(k, ptr); !known {
			continue
		}
		// a nested schema's problems are noted already; its error stops
		if err := s.note(s.keyword(obj, k, ptr, depth, base)); err != nil {
			return err
		}
	}
	if err := s.note(countOrder(obj, ptr, "minLength", "maxLength")); err != nil {
		return err
	}
	return s.note(countOrder(obj, ptr, "minProperties", "maxProperties"))
}

// classifyKeys notes, for each key of the schema object at ptr, a
// keyword of another dialect, one that cannot be translated or an unknown
// one, and warns of annotations named as such and of keywords the
// dialect ignores beside "$ref".
func (s *screener) classifyKeys(keys []string, ptr string, ignored bool) error {
	for _, k := range keys {
		kp := ptr + "/" + escapePointer(k)
		if other, err := s.otherDialect(k, ptr, kp); other {
			if err := s.note(err); err != nil {
				return err
			}
			continue
		}
		kind, known := s.kindAt(k, ptr)
		if known && kind == kwUntranslatable {
			if err := s.note(untranslatableError(kp, k, s.dialect)); err != nil {
				return err
			}
			continue
		}
		if !known {
			if err := s.note(s.unknownKeyword(k, kp)); err != nil {
				return err
			}
			continue
		}
		if why := namedAnnotation(k); why != "" && kind == kwAnnotation && !annotations[k] {
			s.warn(kp, k, "%q is an annotation (%s) and is ignored: nothing is validated by it", k, why)
		}
		if ignored && assertsBesideRef(k, kind) {
			s.warn(kp, k, "%q beside \"$ref\" is ignored, as %s says; to apply both, put them in allOf "+
				"({\"allOf\":[{\"$ref\":...},{%q:...}]}), or declare %q, where keywords beside $ref apply", k, s.dialect, k, Draft2020URI)
		}
	}
	return nil
}

// keyword checks the value of one known keyword at a schema position and
// screens the schemas it holds, by kind.
func (s *screener) keyword(obj map[string]any, k, ptr string, depth int, base *url.URL) error {
	v := obj[k]
	kp := ptr + "/" + escapePointer(k)
	kind, _ := s.kindAt(k, ptr)
	switch kind {
	case kwSchemaURI:
		return s.schemaURI(v, k, ptr, kp)
	case kwID, kwAnchor, kwDynamicAnchor, kwUntranslatable:
		return nil // read and registered by identify, or refused already
	case kwRef, kwDynamicRef:
		return s.reference(obj, v, k, ptr, kp)
	case kwUnevaluated, kwSchema, kwItems, kwSchemaArray:
		return s.subschema(v, k, ptr, kp, kind, depth, base)
	case kwDefinitions, kwProperties, kwDependentSchemas, kwPatternProperties, kwDependencies:
		return s.schemaMap(v, ptr, kp, kind, depth, base)
	case kwEnum, kwPattern, kwFormat, kwRequired, kwDependentRequired:
		return s.assertion(v, k, kp, kind)
	}
	return s.literal(v, k, kp, kind)
}

// schemaURI checks a "$schema": the document's dialect at the root (and,
// in 2019-09 and 2020-12, in bundled resources); ignored below the root
// of an older dialect.
func (s *screener) schemaURI(v any, k, ptr, kp string) error {
	d, ok := dialectOf(v)
	if ptr != "" && !s.dialect.modern() {
		if !ok || d != s.dialect {
			s.warn(kp, k, "$schema below the root is ignored in %s, which reads it only at the root: this schema is read as %s too", s.dialect, s.dialect)
		}
		return nil
	}
	if !ok {
		return fail(kp, "unknown dialect: $schema must be one of %q (Draft-04), %q (Draft-06), %q (Draft-07), %q (2019-09) or %q (2020-12), "+
			"each with or without the trailing \"#\"", Draft04URI, Draft06URI, Draft07URI, Draft2019URI, Draft2020URI)
	}
	if d != s.dialect {
		return fail(kp, "a bundled schema must use the document's dialect: a different $schema below the root is not supported")
	}
	return nil
}

// reference records a "$ref", "$recursiveRef" or "$dynamicRef" for
// resolution once the whole document is screened (admit_refs.go).
func (s *screener) reference(obj map[string]any, v any, k, ptr, kp string) error {
	str, ok := v.(string)
	if !ok {
		return fail(kp, "must be a string")
	}
	if k == "$recursiveRef" && str != "#" {
		return fail(kp, `must be "#" (2019-09 defines no other value)`)
	}
	s.refs = append(s.refs, refSite{node: obj, ptr: ptr, ref: str, key: k})
	return nil
}

// subschema screens a keyword whose value is one schema, or a list of
// them (items, allOf, anyOf, oneOf, prefixItems).
func (s *screener) subschema(v any, k, ptr, kp string, kind kwKind, depth int, base *url.URL) error {
	switch kind {
	case kwUnevaluated:
		s.unevaluated = append(s.unevaluated, kp)
	case kwSchema:
		if inPlace[k] {
			s.inplace[ptr] = append(s.inplace[ptr], kp)
		}
	case kwItems:
		if arr, ok := v.([]any); ok {
			if s.dialect == draft2020 {
				return fail(kp, "in 2020-12, items must be one schema (a list of schemas is prefixItems)")
			}
			return s.schemaArray(arr, kp, depth, false, base)
		}
	case kwSchemaArray:
		arr, ok := v.([]any)
		if !ok {
			return fail(kp, "must be a non-empty array of schemas")
		}
		for i := range arr {
			s.inplace[ptr] = append(s.inplace[ptr], kp+"/"+strconv.Itoa(i))
		}
		return s.schemaArray(arr, kp, depth, true, base)
	}
	return s.schema(v, kp, depth+1, base)
}

// schemaMap screens a keyword whose value is an object of schemas
// (definitions, properties, dependentSchemas, patternProperties) or, for
// dependencies, of schemas and lists of names.
func (s *screener) schemaMap(v any, ptr, kp string, kind kwKind, depth int, base *url.URL) error {
	m, ok := v.(map[string]any)
	switch {
	case ok:
	case kind == kwPatternProperties:
		return fail(kp, "must be an object whose keys are patterns and values are schemas")
	case kind == kwDependencies:
		return fail(kp, "must be an object whose values are schemas or arrays of property names")
	default:
		return fail(kp, "must be an object whose values are schemas")
	}
	for _, name := range sortedKeys(m) {
		dp := kp + "/" + escapePointer(name)
		switch kind {
		case kwPatternProperties:
			if err := s.pattern(name, dp, true); err != nil {
				return err
			}
		case kwDependencies:
			if _, isArr := m[name].([]any); isArr {
				if err := stringSet(m[name], dp); err != nil {
					return err
				}
				continue
			}
			s.inplace[ptr] = append(s.inplace[ptr], dp)
		case kwDependentSchemas:
			s.inplace[ptr] = append(s.inplace[ptr], dp)
		}
		if err := s.schema(m[name], dp, depth+1, base); err != nil {
			return err
		}
	}
	return nil
}

// assertion checks the value of a keyword that asserts something of
// strings or objects beyond its own shape: enum (kept as a set when
// large), pattern, format (an unknown one warned), required and
// dependentRequired.
func (s *screener) assertion(v any, k, kp string, kind kwKind) error {
	switch kind {
	case kwEnum:
		if err := checkEnum(v, kp, s.dialect.modern()); err != nil {
			return err
		}
		if values := setEnum(v); values != nil {
			s.enums[enumSetName(values)] = values
		}
	case kwPattern:
		str, ok := v.(string)
		if !ok {
			return fail(kp, "must be a string")
		}
		return s.pattern(str, kp, false)
	case kwFormat:
		name, ok := v.(string)
		if !ok {
			return fail(kp, "must be a string")
		}
		if !formatSet[name] && !annotationFormats[name] {
			s.warn(kp, k, "format %q is not checked (unknown formats are annotations); checked formats: %s; for numbers: %s",
				name, strings.Join(Formats, ", "), strings.Join(NumericFormats, ", "))
		}
	case kwRequired:
		return stringSet(v, kp)
	case kwDependentRequired:
		m, ok := v.(map[string]any)
		if !ok {
			return fail(kp, "must be an object whose values are arrays of property names")
		}
		for _, name := range sortedKeys(m) {
			if err := stringSet(m[name], kp+"/"+escapePointer(name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// literal checks the shape of a keyword's value that holds no schema.
func (s *screener) literal(v any, k, kp string, kind kwKind) error {
	switch kind {
	case kwAnnotation, kwLiteral:
		return literalSize(v, kp)
	case kwLiteralArray:
		if _, ok := v.([]any); !ok {
			return fail(kp, "must be an array")
		}
		return literalSize(v, kp)
	case kwString:
		if _, ok := v.(string); !ok {
			return fail(kp, "must be a string")
		}
	case kwBool, kwNullable:
		if _, ok := v.(bool); !ok {
			return fail(kp, "must be a boolean")
		}
	case kwExclusiveFlag:
		if _, ok := v.(bool); !ok {
			return fail(kp, "must be a boolean in %s (it makes %q exclusive)", s.dialect, strings.ToLower(k[9:10])+k[10:])
		}
	case kwType:
		return checkType(v, kp)
	case kwNumber:
		if _, ok := v.(json.Number); !ok {
			return fail(kp, "must be a number")
		}
	case kwPositive:
		n, ok := v.(json.Number)
		if !ok {
			return fail(kp, "must be a number")
		}
		if ni, err := parseNumber(string(n)); err != nil || ni.isZero() || ni.neg {
			return fail(kp, "must be greater than 0")
		}
	case kwCount:
		if _, ok := countValue(v); !ok {
			return fail(kp, "must be a non-negative integer")
		}
	}
	return nil
}

// inPlace are the single-schema keywords whose schema applies to the same
// value as the schema holding them.
var inPlace = map[string]bool{"not": true, "if": true, "then": true, "else": true}

func (s *screener) schemaArray(arr []any, kp string, depth int, branches bool, base *url.URL) error {
	if len(arr) == 0 {
		return fail(kp, "must be a non-empty array of schemas")
	}
	if branches && len(arr) > MaxBranches {
		return fail(kp, "has %d schemas, more than the limit of %d", len(arr), MaxBranches)
	}
	for i, sub := range arr {
		if err := s.schema(sub, kp+"/"+strconv.Itoa(i), depth+1, base); err != nil {
			return err
		}
	}
	return nil
}
