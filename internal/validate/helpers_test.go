package validate

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func repeatJoin(n int, f func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = f(i)
	}
	return strings.Join(parts, ",")
}

func obj(n int, val func(i int) string) string {
	return "{" + repeatJoin(n, func(i int) string { return fmt.Sprintf("%q:%s", "k"+strconv.Itoa(i), val(i)) }) + "}"
}

func arr(n int, val func(i int) string) string {
	return "[" + repeatJoin(n, val) + "]"
}

func constant(s string) func(int) string { return func(int) string { return s } }

func nested(depth int, key string, inner string) string {
	s := inner
	for range depth {
		s = "{" + strconv.Quote(key) + ":" + s + "}"
	}
	return s
}

func nestedAP(depth int, inner string) string {
	s := inner
	for range depth {
		s = `{"additionalProperties":` + s + `}`
	}
	return s
}

// realisticSchema is an order-like schema of the kind callers send.
const realisticSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "order", "type": "object", "additionalProperties": false,
  "required": ["id", "customer", "items", "total", "currency", "status", "created_at"],
  "properties": {
    "id": {"type": "string", "pattern": "^ord_[A-Za-z0-9]{12}$"},
    "customer": {"type": "object", "additionalProperties": false, "required": ["name", "email"],
      "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 200},
        "email": {"type": "string", "format": "email"},
        "phone": {"type": "string", "pattern": "^\\+[0-9]{6,15}$"},
        "address": {"type": "object", "required": ["line1", "city", "country"], "additionalProperties": false,
          "properties": {"line1": {"type": "string"}, "line2": {"type": "string"}, "city": {"type": "string"},
            "postcode": {"type": "string", "pattern": "^[A-Z0-9 -]{3,10}$"},
            "country": {"type": "string", "pattern": "^[A-Z]{2}$"}}}}},
    "items": {"type": "array", "minItems": 1, "maxItems": 1000, "items": {"type": "object", "additionalProperties": false,
      "required": ["sku", "quantity", "unit_price"],
      "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "quantity": {"type": "integer", "minimum": 1, "maximum": 10000},
        "unit_price": {"type": "number", "minimum": 0, "multipleOf": 0.01},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 32}, "uniqueItems": true}}}},
    "total": {"type": "number", "minimum": 0, "multipleOf": 0.01},
    "currency": {"enum": ["EUR", "USD", "GBP", "JPY", "CHF"]},
    "status": {"oneOf": [{"const": "pending"}, {"const": "paid"}, {"const": "shipped"}]},
    "payment": {"anyOf": [
      {"type": "object", "required": ["card_last4"], "properties": {"card_last4": {"type": "string", "pattern": "^[0-9]{4}$"}}},
      {"type": "object", "required": ["iban"], "properties": {"iban": {"type": "string", "pattern": "^[A-Z]{2}[0-9A-Z]{13,30}$"}}}]},
    "created_at": {"type": "string", "format": "date-time"},
    "notes": {"type": ["string", "null"], "maxLength": 2000}
  }
}`

func realisticValue(items int) string {
	return `{"id":"ord_ABCdef123456","customer":{"name":"Ada Lovelace","email":"ada@example.com","phone":"+441234567",` +
		`"address":{"line1":"1 Analytical Row","city":"London","postcode":"NW1 2AB","country":"GB"}},` +
		`"items":` + arr(items, func(i int) string {
		return fmt.Sprintf(`{"sku":"ABC-%04d","quantity":%d,"unit_price":12.34,"tags":["a","b"]}`, i%10000, i%9+1)
	}) + `,"total":1234.5,"currency":"EUR","status":"paid","payment":{"card_last4":"4242"},` +
		`"created_at":"2026-11-30T12:00:00Z","notes":null}`
}

func allOfChain(depth int, inner string) string {
	s := inner
	for range depth {
		s = `{"allOf":[` + s + `]}`
	}
	return s
}

func mustCompile(tb testing.TB, schema string) *Schema {
	tb.Helper()
	s, err := Compile([]byte(schema))
	if err != nil {
		tb.Fatalf("compile: %v", err)
	}
	return s
}
