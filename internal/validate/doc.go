// Package validate admits caller JSON Schemas (Draft-04 to 2020-12, inline
// only) and validates model-submitted values against them, hermetically
// and within a fixed budget: nothing here reads a file, resolves a name or
// opens a connection, no input panics the process, and no validation runs
// whose predicted cost exceeds BudgetTime / BudgetBytes. It imports
// neither pgx nor HTTP server code. docs/structured-output.md is the
// user-facing description.
//
// The files are named for the stages a schema passes through, in this
// order.
//
// Envelope (response_format.go). ParseResponseFormat reads a request's
// response_format member: its type, name, description and strict flag,
// and the schema's own bytes, which it hands to CompileCached
// (compile_cache.go: a schema sent again is compiled once per process).
//
// Scan (scan.go, scan_number.go). Every document, schema or value, is
// first read by the strict scanner (Decode): size, nesting, value and key
// limits, UTF-8, duplicate keys, and number literals kept exactly
// (numInfo) beside their float64. Values decode to a tree (vnode) that
// also says what the cost model needs (sizes, rune counts, numbers).
//
// Admission screen (admit_screen.go and the other admit_*.go). screen
// walks the schema positions of the decoded document once: which
// keywords a position may hold and the shape of each value
// (admit_values.go), the caps, every pattern (admit_patterns.go),
// identifiers and bundled resources (admit_bundle.go), local references
// and the reference graph (admit_refs.go). What it ignores it says, as
// warnings; a likely typo of a validation keyword is refused
// (admit_annotations.go).
//
// Dialect translation (dialect.go, dialect_translate.go,
// dialect_unevaluated.go). The document's "$schema" decides which
// keywords it has (dialect.go). The library compiles Draft-07 only, so
// the screened document is rewritten into the plain Draft-07 document
// that means the same: prepare drops what asserts nothing and translates
// 2019-09's and 2020-12's keywords (unevaluatedProperties and
// unevaluatedItems as dialect_unevaluated.go plans them); after the
// meta-schema check, fromDraft04 makes Draft-04's boolean bounds numeric
// and adapt steers around the library's defects.
//
// Formats (formats.go). Which "format" names are checked, which apply to
// numbers (translated into keywords) and which are annotations by
// definition; the library's own checker decides a string.
//
// ECMAScript patterns (ecma.go, ecma_keys.go). A pattern RE2 cannot parse
// (lookaround, backreferences) runs on the ECMAScript engine: a "pattern"
// reaches the library as a format of our own, a patternProperties key by
// specialising the document to each value's property names.
//
// Compile (compile.go, compile_enumset.go). compileScreened drives the
// translation: the document, and every schema a reference names inside a
// dropped key, is checked against its dialect's meta-schema, translated,
// and compiled by the library in a deny-all loader, which never reads
// anything; large enums of strings become a set lookup
// (compile_enumset.go).
//
// Cost model (cost_model.go, cost.go and the other cost_*.go). Compiling
// also builds the model (cnode) of what the library will do at each
// location. Before a value reaches the library, the estimator walks the
// model and the value together, deciding each assertion as the library
// will and charging calibrated costs (cost_coefficients.go, cost_regex.go);
// a value over the budget is refused, and so is one whose numbers the
// library would compare inexactly (cost_exact.go).
//
// Validation (validate.go). Schema.Validate runs the stages a value goes
// through: the scan, the ECMAScript key specialisation, the estimate, the
// library, and the library's errors rendered as ValueErrors.
//
// Tool schema (tool_schema.go). ToolSchema is the admitted document as a
// provider receives it inside a tool's parameters.
package validate
