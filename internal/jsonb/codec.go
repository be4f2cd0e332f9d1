package jsonb

import (
	"encoding/json"
	"fmt"
	"strings"
)

// policy says how one field of Part is persisted.
type policy uint8

const (
	// safe: the field's type cannot carry text PostgreSQL refuses
	// (booleans, numbers, []byte, which encoding/json writes as base64).
	safe policy = iota
	// encode: arbitrary text. NUL and U+E000 are sentinel-encoded on write
	// and decoded on read; raw JSON is also normalised (lone surrogates
	// become U+FFFD, invalid UTF-8 becomes U+FFFD) in keys and values.
	encode
	// reject: stored exactly and never transformed. MarshalParts refuses a
	// value that PostgreSQL cannot store (U+0000, lone surrogates, invalid
	// UTF-8); the validator keeps such values out upstream.
	reject
)

func (p policy) String() string {
	switch p {
	case safe:
		return "safe"
	case encode:
		return "encode"
	case reject:
		return "reject"
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// field is one row of the field table. Every field of Part, including the
// fields of nested structs, has exactly one row; the coverage test in
// persist_test.go checks the table against the type by reflection.
//
// An encode or reject row has exactly one accessor. An accessor returns a
// pointer to the field inside p, or nil when a nested struct on the path is
// absent. With own set it first replaces every nested struct on the path
// by a private copy, so that a write through the pointer cannot reach data
// the caller still holds (p itself must already be private).
type field struct {
	name   string // Go path below Part, e.g. "Outcome.Error.Message"
	policy policy
	str    func(p *Part, own bool) *string
	raw    func(p *Part, own bool) *json.RawMessage
}

// fields is the field table: the one list that drives encoding in
// MarshalParts, decoding in ParseContent and validation of reject fields.
// When Part (or a struct it nests) gains a field, add its row here; see
// docs/codec.md "Extending Part".
var fields = []field{
	{name: "Type", policy: encode, str: func(p *Part, _ bool) *string { return (*string)(&p.Type) }},
	{name: "Text", policy: encode, str: func(p *Part, _ bool) *string { return &p.Text }},
	{name: "ToolCallID", policy: encode, str: func(p *Part, _ bool) *string { return &p.ToolCallID }},
	{name: "ToolName", policy: encode, str: func(p *Part, _ bool) *string { return &p.ToolName }},
	{name: "Args", policy: encode, raw: func(p *Part, _ bool) *json.RawMessage { return &p.Args }},
	{name: "Result", policy: encode, raw: func(p *Part, _ bool) *json.RawMessage { return &p.Result }},
	{name: "IsError", policy: safe},
	{name: "ProviderExecuted", policy: safe},
	{name: "MediaType", policy: encode, str: func(p *Part, _ bool) *string { return &p.MediaType }},
	{name: "Name", policy: encode, str: func(p *Part, _ bool) *string { return &p.Name }},
	{name: "Data", policy: safe},
	{name: "SourceID", policy: encode, str: func(p *Part, _ bool) *string { return &p.SourceID }},
	{name: "URL", policy: encode, str: func(p *Part, _ bool) *string { return &p.URL }},
	{name: "Title", policy: encode, str: func(p *Part, _ bool) *string { return &p.Title }},
	{name: "ProviderMetadata", policy: encode, raw: func(p *Part, _ bool) *json.RawMessage { return &p.ProviderMetadata }},
	{name: "ArgsRejected", policy: encode, str: func(p *Part, _ bool) *string { return &p.ArgsRejected }},
	{name: "ArgsRejectedCode", policy: encode, str: func(p *Part, _ bool) *string { return (*string)(&p.ArgsRejectedCode) }},
	{name: "Outcome.RequestID", policy: encode, str: func(p *Part, own bool) *string {
		if o := outcomeOf(p, own); o != nil {
			return &o.RequestID
		}
		return nil
	}},
	{name: "Outcome.Status", policy: encode, str: func(p *Part, own bool) *string {
		if o := outcomeOf(p, own); o != nil {
			return &o.Status
		}
		return nil
	}},
	// Structured-output values passed the validator, which rejects U+0000
	// and lone surrogates, and clients get them byte for byte: never encoded.
	{name: "Outcome.Value", policy: reject, raw: func(p *Part, own bool) *json.RawMessage {
		if o := outcomeOf(p, own); o != nil {
			return &o.Value
		}
		return nil
	}},
	// Server-made numbers (or null), encoded like any raw JSON.
	{name: "Outcome.Usage", policy: encode, raw: func(p *Part, own bool) *json.RawMessage {
		if o := outcomeOf(p, own); o != nil {
			return &o.Usage
		}
		return nil
	}},
	{name: "Outcome.Error.Code", policy: encode, str: func(p *Part, own bool) *string {
		if e := outcomeErrorOf(p, own); e != nil {
			return &e.Code
		}
		return nil
	}},
	{name: "Outcome.Error.Message", policy: encode, str: func(p *Part, own bool) *string {
		if e := outcomeErrorOf(p, own); e != nil {
			return &e.Message
		}
		return nil
	}},
	{name: "Outcome.Error.Attempts", policy: encode, raw: func(p *Part, own bool) *json.RawMessage {
		if e := outcomeErrorOf(p, own); e != nil {
			return &e.Attempts
		}
		return nil
	}},
}

// outcomeOf returns p.Outcome, made private first when own is set.
func outcomeOf(p *Part, own bool) *Outcome {
	if p.Outcome != nil && own {
		o := *p.Outcome
		p.Outcome = &o
	}
	return p.Outcome
}

// outcomeErrorOf returns p.Outcome.Error, made private (with the Outcome)
// first when own is set.
func outcomeErrorOf(p *Part, own bool) *OutcomeError {
	o := outcomeOf(p, own)
	if o == nil {
		return nil
	}
	if o.Error != nil && own {
		e := *o.Error
		o.Error = &e
	}
	return o.Error
}

// MarshalParts encodes parts for a jsonb column. Every encode field of the
// field table is sentinel-encoded, raw JSON fields are normalised only when
// they need it (see scanRaw), and reject fields are checked. parts and
// everything it points to are left untouched: a part that needs a change is
// copied first. When nothing needs a change the result is exactly
// json.Marshal(parts), with no extra allocation.
func MarshalParts(parts []Part) ([]byte, error) {
	parts, err := storable(parts)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(parts)
	if err != nil {
		return nil, fmt.Errorf("marshal chat message parts: %w", err)
	}
	return b, nil
}

// storable returns parts ready for json.Marshal: parts itself when no field
// needs a change (the fast path: no allocation, no marshalling), otherwise a
// copy with every encode field encoded. It checks the reject fields.
func storable(parts []Part) ([]Part, error) {
	if parts == nil {
		return []Part{}, nil
	}
	var out []Part // private copy of parts, made at the first change
	for i := range parts {
		for fi := range fields {
			f := &fields[fi]
			if f.policy == safe {
				continue
			}
			if f.str != nil {
				s := f.str(&parts[i], false)
				if s == nil || len(*s) == 0 {
					continue
				}
				if f.policy == reject {
					if strings.IndexByte(*s, 0) >= 0 {
						return nil, fmt.Errorf("validate chat message parts: part %d %s: contains U+0000", i, f.name)
					}
					continue
				}
				if !stringNeedsEncoding(*s) {
					continue
				}
				if out == nil {
					out = append([]Part(nil), parts...)
				}
				*f.str(&out[i], true) = encodeString(*s)
				continue
			}
			r := f.raw(&parts[i], false)
			if r == nil || len(*r) == 0 {
				continue
			}
			flags := scanRaw(*r)
			if f.policy == reject {
				if flags&rawUnstorable != 0 {
					return nil, fmt.Errorf("validate chat message parts: part %d %s: %s", i, f.name, describeUnstorable(flags))
				}
				continue
			}
			if flags&rawNeedsEncoding == 0 {
				continue
			}
			enc, err := transformRaw(*r, encodeString)
			if err != nil {
				return nil, fmt.Errorf("marshal chat message parts: part %d %s: %w", i, f.name, err)
			}
			if out == nil {
				out = append([]Part(nil), parts...)
			}
			*f.raw(&out[i], true) = enc
		}
	}
	if out != nil {
		return out, nil
	}
	return parts, nil
}

// ParseContent decodes a content column written by MarshalParts: it undoes
// the sentinel encoding of every encode field. Reject fields are returned
// as stored.
func ParseContent(b []byte) ([]Part, error) {
	var parts []Part
	if err := json.Unmarshal(b, &parts); err != nil {
		return nil, fmt.Errorf("parse chat message content: %w", err)
	}
	for i := range parts {
		p := &parts[i]
		for fi := range fields {
			f := &fields[fi]
			if f.policy != encode {
				continue
			}
			if f.str != nil {
				if s := f.str(p, false); s != nil && strings.Contains(*s, sentinel) {
					*s = decodeString(*s)
				}
				continue
			}
			r := f.raw(p, false)
			if r == nil || len(*r) == 0 || scanRaw(*r)&rawSentinel == 0 {
				continue
			}
			dec, err := transformRaw(*r, decodeString)
			if err != nil {
				return nil, fmt.Errorf("parse chat message content: part %d %s: %w", i, f.name, err)
			}
			*r = dec
		}
	}
	return parts, nil
}

// The sentinel scheme. It works on decoded characters, so it survives
// jsonb's normalisation of escapes:
//
//	U+0000 → U+E000 U+E001
//	U+E000 → U+E000 U+E000
//
// Decoding reverses both pairs and keeps any other U+E000 as it is.
const (
	sentinel    = "\ue000"
	encodedNUL  = "\ue000\ue001"
	encodedSent = "\ue000\ue000"
)

// stringNeedsEncoding reports whether s contains NUL or U+E000.
func stringNeedsEncoding(s string) bool {
	// U+E000 is EE 80 80; looking for the byte first is cheaper.
	return strings.IndexByte(s, 0) >= 0 || (strings.IndexByte(s, 0xEE) >= 0 && strings.Contains(s, sentinel))
}

// encodeString applies the sentinel scheme to s. Other bytes, even invalid
// UTF-8, are copied unchanged.
func encodeString(s string) string {
	if !stringNeedsEncoding(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		switch {
		case s[i] == 0:
			b.WriteString(encodedNUL)
			i++
		case strings.HasPrefix(s[i:], sentinel):
			b.WriteString(encodedSent)
			i += len(sentinel)
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}

// decodeString reverses encodeString. An unpaired U+E000 is kept.
func decodeString(s string) string {
	if !strings.Contains(s, sentinel) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], encodedNUL):
			b.WriteByte(0)
			i += len(encodedNUL)
		case strings.HasPrefix(s[i:], encodedSent):
			b.WriteString(sentinel)
			i += len(encodedSent)
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}
