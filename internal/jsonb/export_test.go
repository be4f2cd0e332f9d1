package jsonb

// Test-only views of the field table for the external coverage test.

// FieldPolicies maps each field-table name to its policy ("safe",
// "encode" or "reject").
func FieldPolicies() map[string]string {
	m := make(map[string]string, len(fields))
	for _, f := range fields {
		m[f.name] = f.policy.String()
	}
	return m
}

// FieldPointer returns what the table's accessor for name returns on p (a
// *string or *json.RawMessage; nil for safe rows or an absent nested struct).
func FieldPointer(p *Part, name string) any {
	for _, f := range fields {
		if f.name != name {
			continue
		}
		switch {
		case f.str != nil:
			if s := f.str(p, false); s != nil {
				return s
			}
		case f.raw != nil:
			if r := f.raw(p, false); r != nil {
				return r
			}
		}
		return nil
	}
	return nil
}
