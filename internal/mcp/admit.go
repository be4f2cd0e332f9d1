package mcp

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatd/chatd/internal/validate"
)

// Tool is an admitted tool of a server, as offered to the model.
type Tool struct {
	// Name is the namespaced name the model sees: server__tool.
	Name   string
	Server string
	// Tool is the server's own name for it.
	Tool        string
	Description string
	// InputSchema is the admitted JSON Schema of the arguments.
	InputSchema json.RawMessage
}

// MaxDescriptionBytes cuts a tool's description.
const MaxDescriptionBytes = 4096

// Reasons a tool is refused (the label of chatd_mcp_tools_refused_total).
const (
	refusedName     = "name"     // not ^[A-Za-z0-9_-]+$ or too long once namespaced
	refusedReserved = "reserved" // a server-owned name (the finalizer)
	refusedSchema   = "schema"   // the input schema fails admission
	refusedTooMany  = "too_many" // past MaxTools
)

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// admit checks one listed tool. reserved are names no server may offer
// (the structured-output finalizer); a refused tool is never offered and
// never called.
func admit(server string, t *sdk.Tool, reserved []string) (Tool, string, error) {
	full := server + Separator + t.Name
	switch {
	case !toolNameRE.MatchString(t.Name) || len(full) > 64:
		return Tool{}, refusedName, fmt.Errorf("the name must match %s and %s%s<name> must be at most 64 characters",
			toolNameRE, server, Separator)
	case slices.Contains(reserved, t.Name):
		return Tool{}, refusedReserved, fmt.Errorf("%q is reserved by chatd", t.Name)
	}
	raw, err := json.Marshal(t.InputSchema)
	if err != nil {
		return Tool{}, refusedSchema, fmt.Errorf("input schema: %v", err)
	}
	if err := AdmitInputSchema(raw); err != nil {
		return Tool{}, refusedSchema, fmt.Errorf("input schema: %v", err)
	}
	return Tool{Name: full, Server: server, Tool: t.Name, Description: cut(t.Description, MaxDescriptionBytes), InputSchema: raw}, "", nil
}

// AdmitInputSchema is the admission rule of every tool input schema a
// model is shown, a client's or a server's: the schema limits of
// response_format (size, depth, nodes, keys, numbers), a JSON object, and no
// reference outside the document (nothing is ever loaded from one, and a
// provider must not be asked to).
func AdmitInputSchema(raw json.RawMessage) error {
	doc, err := validate.Decode(raw, validate.SchemaLimits)
	if err != nil {
		return err
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return fmt.Errorf("must be a JSON Schema object")
	}
	return localRefs(obj)
}

// localRefs refuses a "$ref" that is not a fragment of the document itself.
func localRefs(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "$ref" && !strings.HasPrefix(s, "#") {
				return fmt.Errorf("$ref %q: only references inside the schema (#...) are allowed", cut(s, 80))
			}
			if err := localRefs(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := localRefs(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// cut shortens s to at most n bytes on a character boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
