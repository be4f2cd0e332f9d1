package mockllm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// checkStrictTools applies OpenAI's strict-mode rules to the tools sent
// with strict:true, as the real API does before generating anything: every
// object schema must list all its properties in required and set
// additionalProperties:false. (The real rules go further, refusing many
// keywords; these two are the ones an ordinary Draft-07 schema breaks
// first.) Tools without strict:true are not checked.
func checkStrictTools(tools []Tool) error {
	for _, t := range tools {
		if t.Strict == nil || !*t.Strict {
			continue
		}
		var schema any
		dec := json.NewDecoder(strings.NewReader(string(t.Parameters)))
		dec.UseNumber()
		if err := dec.Decode(&schema); err != nil {
			return fmt.Errorf("Invalid schema for function '%s': %v", t.Name, err)
		}
		if err := strictSchema(schema, nil); err != nil {
			return fmt.Errorf("Invalid schema for function '%s': %v", t.Name, err)
		}
	}
	return nil
}

func strictContext(path []string) string {
	quoted := make([]string, len(path))
	for i, p := range path {
		quoted[i] = "'" + p + "'"
	}
	return "In context=(" + strings.Join(quoted, ", ") + ")"
}

func strictSchema(s any, path []string) error {
	m, ok := s.(map[string]any)
	if !ok {
		return nil
	}
	if props, ok := m["properties"].(map[string]any); ok || m["type"] == "object" {
		if ap, ok := m["additionalProperties"].(bool); !ok || ap {
			return fmt.Errorf("%s, 'additionalProperties' is required to be supplied and to be false.", strictContext(path))
		}
		var required []string
		if list, ok := m["required"].([]any); ok {
			for _, r := range list {
				if s, ok := r.(string); ok {
					required = append(required, s)
				}
			}
		}
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !slices.Contains(required, k) {
				return fmt.Errorf("%s, 'required' is required to be supplied and to be an array including every key in properties. Missing '%s'.",
					strictContext(path), k)
			}
			if err := strictSchema(props[k], append(slices.Clip(path), "properties", k)); err != nil {
				return err
			}
		}
	}
	if items, ok := m["items"]; ok {
		if err := strictSchema(items, append(slices.Clip(path), "items")); err != nil {
			return err
		}
	}
	for _, kw := range []string{"anyOf", "allOf", "oneOf"} {
		list, _ := m[kw].([]any)
		for i, sub := range list {
			if err := strictSchema(sub, append(slices.Clip(path), kw, fmt.Sprint(i))); err != nil {
				return err
			}
		}
	}
	return nil
}
