package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Result is what a call leaves in the chat: Output is the tool result's
// JSON (see encodeResult), IsError whether the tool failed.
type Result struct {
	Output  json.RawMessage
	IsError bool
}

// content is one stored content block. Binary data (images, audio, blob
// resources) is kept as a reference: its type, size and SHA-256, never the
// bytes.
type content struct {
	Type        string `json:"type"`
	Text        string `json:"text,omitempty"`
	URI         string `json:"uri,omitempty"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mime_type,omitempty"`
	Bytes       *int   `json:"bytes,omitempty"`
	SHA256      string `json:"sha256,omitempty"`
}

type stored struct {
	Content           []content `json:"content"`
	StructuredContent any       `json:"structured_content,omitempty"`
}

// encodeResult turns a CallToolResult into the stored result:
// {"content": [...], "structured_content": ...}, at most MaxResultBytes.
func encodeResult(res *sdk.CallToolResult) (Result, error) {
	out := stored{Content: make([]content, 0, len(res.Content)), StructuredContent: res.StructuredContent}
	for _, c := range res.Content {
		out.Content = append(out.Content, block(c))
	}
	b, err := marshal(out)
	if err != nil {
		return Result{}, fmt.Errorf("the result cannot be encoded: %v", err)
	}
	if len(b) > MaxResultBytes {
		return Result{}, fmt.Errorf("the result is %d bytes, over the limit of %d; ask the tool for less", len(b), MaxResultBytes)
	}
	return Result{Output: b, IsError: res.IsError}, nil
}

func block(c sdk.Content) content {
	switch c := c.(type) {
	case *sdk.TextContent:
		return content{Type: "text", Text: c.Text}
	case *sdk.ImageContent:
		return binary("image", c.MIMEType, c.Data)
	case *sdk.AudioContent:
		return binary("audio", c.MIMEType, c.Data)
	case *sdk.ResourceLink:
		return content{Type: "resource_link", URI: c.URI, Name: c.Name, Description: c.Description, MIMEType: c.MIMEType}
	case *sdk.EmbeddedResource:
		if c.Resource == nil {
			return content{Type: "resource"}
		}
		r := c.Resource
		if r.Blob != nil {
			b := binary("resource", r.MIMEType, r.Blob)
			b.URI = r.URI
			return b
		}
		return content{Type: "resource", URI: r.URI, MIMEType: r.MIMEType, Text: r.Text}
	}
	return content{Type: "unsupported"}
}

func binary(typ, mime string, data []byte) content {
	sum := sha256.Sum256(data)
	n := len(data)
	return content{Type: typ, MIMEType: mime, Bytes: &n, SHA256: hex.EncodeToString(sum[:])}
}

// errorResult is a failed call's result: a JSON string the model reads.
func errorResult(msg string) Result {
	b, _ := marshal(msg)
	return Result{Output: b, IsError: true}
}

// marshal is json.Marshal without HTML escaping: results are read by
// models and people, not embedded in pages.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
