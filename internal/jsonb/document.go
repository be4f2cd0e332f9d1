package jsonb

import (
	"encoding/json"
	"fmt"
)

// EncodeDocument makes a whole JSON document storable in a jsonb column
// with the sentinel scheme (U+0000 and U+E000 in keys and strings), for
// documents that must read back as they were written: a structured
// request's schema, whose patterns and literals may hold U+0000. A
// document holding neither is returned as it is. The validator has refused
// lone surrogates and invalid UTF-8 in such documents; should one get
// here, it becomes U+FFFD, as raw JSON in message content does.
func EncodeDocument(raw json.RawMessage) (json.RawMessage, error) {
	if scanRaw(raw)&rawNeedsEncoding == 0 {
		return raw, nil
	}
	enc, err := transformRaw(raw, encodeString)
	if err != nil {
		return nil, fmt.Errorf("encode a document for jsonb: %w", err)
	}
	return enc, nil
}

// DecodeDocument gives back what EncodeDocument stored: equal keys and
// strings, numbers as jsonb renders them.
func DecodeDocument(stored json.RawMessage) (json.RawMessage, error) {
	if scanRaw(stored)&rawSentinel == 0 {
		return stored, nil
	}
	dec, err := transformRaw(stored, decodeString)
	if err != nil {
		return nil, fmt.Errorf("decode a stored document: %w", err)
	}
	return dec, nil
}
