// Command invopop prints invopop/jsonschema's output for chatd's fixture
// models (the same models as ../pydantic/gen.py and ../zod4/models.mjs).
// It is a module of its own, so that the generator is not a dependency of
// chatd. Run by ../regen.sh.
package main

import (
	"encoding/json"
	"os"
	"runtime/debug"
	"time"

	"github.com/invopop/jsonschema"
)

type Address struct {
	Street  string `json:"street"`
	City    string `json:"city"`
	Country string `json:"country" jsonschema:"pattern=^[A-Z]{2}$,description=ISO 3166-1 alpha-2"`
}

type Customer struct {
	Name    string   `json:"name" jsonschema:"minLength=1"`
	Email   string   `json:"email"`
	Address *Address `json:"address,omitempty"`
}

type Line struct {
	SKU       string  `json:"sku"`
	Quantity  int     `json:"quantity" jsonschema:"minimum=1"`
	UnitPrice float64 `json:"unit_price" jsonschema:"minimum=0"`
}

type Order struct {
	ID        string            `json:"id" jsonschema:"format=uuid"`
	Status    string            `json:"status" jsonschema:"enum=pending,enum=paid,enum=shipped"`
	Customer  Customer          `json:"customer"`
	Lines     []Line            `json:"lines" jsonschema:"minItems=1"`
	Note      *string           `json:"note,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
}

type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Shape is a union the Go way: the kind names the member that is set.
type Shape struct {
	Kind   string  `json:"kind" jsonschema:"enum=circle,enum=rect,enum=polygon"`
	Radius float64 `json:"radius,omitempty" jsonschema:"exclusiveMinimum=0"`
	Width  float64 `json:"width,omitempty" jsonschema:"exclusiveMinimum=0"`
	Height float64 `json:"height,omitempty" jsonschema:"exclusiveMinimum=0"`
	Points []Point `json:"points,omitempty" jsonschema:"minItems=3"`
}

type Drawing struct {
	Name   string  `json:"name"`
	Shapes []Shape `json:"shapes"`
}

type Category struct {
	Name     string     `json:"name"`
	Children []Category `json:"children,omitempty"`
}

func main() {
	version := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/invopop/jsonschema" {
				version = d.Version
			}
		}
	}
	r := &jsonschema.Reflector{}
	out := map[string]any{
		"generator": "invopop/jsonschema " + version,
		"schemas": map[string]any{
			"order":    r.Reflect(&Order{}),
			"drawing":  r.Reflect(&Drawing{}),
			"category": r.Reflect(&Category{}),
		},
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		panic(err)
	}
}
