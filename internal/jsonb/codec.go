package jsonb

import (
	"encoding/json"
	"fmt"
)

// MarshalParts encodes parts for a jsonb column.
func MarshalParts(parts []Part) ([]byte, error) {
	if parts == nil {
		parts = []Part{}
	}
	b, err := json.Marshal(parts)
	if err != nil {
		return nil, fmt.Errorf("marshal chat message parts: %w", err)
	}
	return b, nil
}

// ParseContent decodes a content column written by MarshalParts.
func ParseContent(b []byte) ([]Part, error) {
	var parts []Part
	if err := json.Unmarshal(b, &parts); err != nil {
		return nil, fmt.Errorf("parse chat message content: %w", err)
	}
	return parts, nil
}
