package validate

import (
	"encoding/json"

	"github.com/xeipuuv/gojsonschema"
)

// Formats lists the supported format names: the library's built-in checks
// minus "regex" (it compiles every instance string as a regular
// expression, a cost our budget does not model).
var Formats = []string{
	"date", "date-time", "email", "hostname", "idn-email", "ipv4", "ipv6", "iri", "iri-reference",
	"json-pointer", "relative-json-pointer", "time", "uri", "uri-reference", "uri-template", "uuid",
}

// NumericFormats lists the supported formats that apply to numbers (see
// numericFormats): chatd asserts them by translating them into keywords.
var NumericFormats = []string{"int32", "int64", "float", "double"}

var formatSet = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range append(Formats[:len(Formats):len(Formats)], NumericFormats...) {
		m[f] = true
	}
	return m
}()

// AnnotationFormats assert nothing by definition (OpenAPI: "password" is a
// hint to obscure the input, "binary" any sequence of octets): admitted
// without a warning.
var AnnotationFormats = []string{"password", "binary"}

var annotationFormats = map[string]bool{"password": true, "binary": true}

// numericFormats are the formats OpenAPI and the Go, Java and C#
// generators emit for numbers, asserted exactly on numbers (other values
// pass, as string formats pass numbers) by the keywords they mean:
//
//   - int32, int64: an integer (1.0 is one) within the two's-complement
//     range of that width;
//   - float: rounded to the nearest float32, finite (what strconv.ParseFloat
//     with bitSize 32, Java's Float.parseFloat and C's strtof accept
//     without overflow): |x| < (2−2⁻²⁴)×2¹²⁷, so 3.4028234663852886e38,
//     the usual spelling of the largest float32, is one; a number that
//     rounds to a subnormal or to zero is accepted;
//   - double: the same for float64, which every number chatd admits is
//     (numbers beyond float64's range are refused by the scan), so it
//     asserts nothing more than being a number.
var numericFormats = map[string]func() map[string]any{
	"int32": func() map[string]any { return integerRange("-2147483648", "2147483647") },
	"int64": func() map[string]any { return integerRange("-9223372036854775808", "9223372036854775807") },
	"float": func() map[string]any {
		// (2−2⁻²⁴)×2¹²⁷: from here on, rounding to the nearest float32
		// (ties to even) gives an infinity
		const overflow = "340282356779733661637539395458142568448"
		return map[string]any{"exclusiveMinimum": json.Number("-" + overflow), "exclusiveMaximum": json.Number(overflow)}
	},
	"double": func() map[string]any { return nil },
}

func integerRange(lo, hi string) map[string]any {
	return map[string]any{"type": "integer", "minimum": json.Number(lo), "maximum": json.Number(hi)}
}

// isFormat runs the library's own checker, as its validation does; a
// checker that panics counts as a failure (the library's run recovers).
func isFormat(name, s string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return gojsonschema.FormatCheckers.IsFormat(name, s)
}
