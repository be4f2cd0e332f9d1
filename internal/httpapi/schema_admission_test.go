package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testenv"
	"github.com/chatd/chatd/internal/validate"
)

// TestSchemaAdmission posts chats whose response_format schema must be
// refused: each gets a 400 naming response_format.json_schema.schema and
// the offending location, and nothing is persisted.
func TestSchemaAdmission(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	token := env.Token("alice")
	post := func(t *testing.T, schema string) (int, client.Error) {
		t.Helper()
		body := `{"content":[{"type":"text","text":"Report."}],"response_format":{"type":"json_schema","json_schema":{"name":"report","schema":` + schema + `}}}`
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, env.API.URL+"/api/v1/chats", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := env.API.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var e client.Error
		if res.StatusCode != http.StatusCreated {
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("status %d, body %s", res.StatusCode, raw)
			}
		}
		return res.StatusCode, e
	}
	deep := `{}`
	for range 17 {
		deep = `{"not":` + deep + `}`
	}
	branches := `{"anyOf":[` + strings.TrimSuffix(strings.Repeat(`{},`, 129), ",") + `]}`
	cases := []struct{ name, schema, location string }{
		{"ref at the root", `{"$ref":"#/definitions/a"}`, "/$ref:"},
		{"file ref", `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`, "/properties/a/$ref:"},
		{"http ref in allOf", `{"allOf":[{"$ref":"http://example.invalid/s.json"}]}`, "/allOf/0/$ref:"},
		{"$id base", `{"$id":"http://example.invalid/root.json","items":{"$ref":"other.json"}}`, "/items/$ref:"},
		{"typo", `{"definitions":{"a":{"type":"string","minLenght":1}},"type":"object"}`, "/definitions/a/minLenght:"},
		{"$defs", `{"properties":{"x":{"$defs":{"a":{"$ref":"#/nowhere"}}}}}`, "/properties/x/$defs/a/$ref:"},
		{"cycle in place", `{"anyOf":[{"$ref":"#"}]}`, "/anyOf/0/$ref:"},
		{"remote $schema", `{"$schema":"http://example.invalid/meta","type":"string"}`, "/$schema:"},
		{"draft-03", `{"$schema":"http://json-schema.org/draft-03/schema#"}`, "/$schema:"},
		{"nullable not a boolean", `{"properties":{"a":{"type":"string","nullable":"yes"}}}`, "/properties/a/nullable:"},
		{"$schema below the root", `{"$schema":"https://json-schema.org/draft/2020-12/schema","items":{"$schema":"http://json-schema.org/draft-07/schema#"}}`, "/items/$schema:"},
		{"patternProperties key neither dialect", `{"patternProperties":{"(?=look":{}}}`, "/patternProperties/(?=look:"},
		{"pattern neither dialect", `{"type":"string","pattern":"(?=look"}`, "/pattern:"},
		{"pattern program", `{"patternProperties":{".{1000}.{100}":{}}}`, "/patternProperties/.{1000}.{100}:"},
		{"duplicate keyword", `{"properties":{"a":{"type":"string","type":"number"}}}`, "/properties/a/type:"},
		{"lone surrogate", `{"properties":{"a":{"const":"\udc00"}}}`, "/properties/a/const:"},
		{"huge exponent", `{"maximum":1e400}`, "/maximum:"},
		{"number too close to zero", `{"minimum":1e-400}`, "/minimum:"},
		{"long number", `{"minimum":1` + strings.Repeat("0", 400) + `}`, "/minimum:"},
		{"too many branches", branches, "/anyOf:"},
		{"too deep", deep, strings.Repeat("/not", 17) + ":"},
		{"duplicate enum", `{"enum":["a","b","a"]}`, "/enum/2:"},
		{"min above max", `{"type":"string","minLength":3,"maxLength":1}`, "/minLength:"},
		{"not a schema", `{"items":[1]}`, "/items/0:"},
		{"too large", `{"description":"` + strings.Repeat("x", 513<<10) + `"}`, "(root):"},
		{"not an object", `[{"type":"string"}]`, "(root):"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, e := post(t, c.schema)
			if status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400 (%+v)", status, e)
			}
			if len(e.Validations) != 1 {
				t.Fatalf("validations %+v", e.Validations)
			}
			v := e.Validations[0]
			if !strings.HasPrefix(v.Field, "response_format.json_schema.schema") || !strings.HasPrefix(v.Detail, c.location) {
				t.Errorf("field %q detail %q, want response_format.json_schema.schema and a detail starting %q", v.Field, v.Detail, c.location)
			}
		})
	}
	ctx := context.Background()
	for _, table := range []string{"chats", "chat_messages", "structured_requests"} {
		var n int
		if err := env.Pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s", table)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d rows in %s after refused requests", n, table)
		}
	}
	// Literal data and property names that mention references are fine.
	status, e := post(t, `{"type":"object","properties":{"$ref":{"const":{"$id":"http://example.invalid/"}},"u":{"type":"string","format":"uri"}},"required":["$ref"]}`)
	if status != http.StatusCreated {
		t.Fatalf("status %d %+v", status, e)
	}
	var n int
	if err := env.Pool.QueryRow(ctx, "SELECT count(*) FROM structured_requests").Scan(&n); err != nil || n != 1 {
		t.Errorf("structured_requests: %d %v", n, err)
	}
	var stored []byte
	if err := env.Pool.QueryRow(ctx, "SELECT schema FROM structured_requests").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(stored, []byte(`"$ref"`)) {
		t.Errorf("stored schema %s", stored)
	}
	// U+0000 in a schema is stored through the JSONB-safe codec.
	if status, e := post(t, `{"type":"string","pattern":"^[^\u0000]*$","title":"nul\u0000"}`); status != http.StatusCreated {
		t.Fatalf("U+0000: status %d %+v", status, e)
	}
}

// TestLargeSchemaAdmitted: a catalogue-style schema over the old 64 KiB and
// 8,192-value caps (16 time-zone enums of 600 entries, ~200 KB) is admitted.
func TestLargeSchemaAdmitted(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	var props []string
	for p := range 16 {
		var zones []string
		for z := range 600 {
			zones = append(zones, fmt.Sprintf(`"Area%02d/Location_%03d"`, p, z))
		}
		props = append(props, fmt.Sprintf(`"tz%d":{"description":"The time zone of site %d.","enum":[%s]}`, p, p, strings.Join(zones, ",")))
	}
	schema := `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`
	if len(schema) < 128<<10 {
		t.Fatalf("schema is only %d bytes", len(schema))
	}
	c := env.Client("alice")
	_, err := c.CreateChat(t.Context(), client.CreateChatRequest{
		Content:        []client.MessagePart{client.TextPart("Report.")},
		ResponseFormat: &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "sites", Schema: json.RawMessage(schema)}},
	})
	if err != nil {
		t.Fatalf("%d-byte schema: %v", len(schema), err)
	}
}

// TestSchemaWarningsInResponses: what a schema holds that chatd
// admits but does not check (an unknown keyword or format, a keyword
// beside a Draft-07 $ref) is listed in the create, send and edit
// responses, replays included; a schema without any lists nothing.
func TestSchemaWarningsInResponses(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	c := env.Client("alice")
	format := func(schema string) *client.ResponseFormat {
		return &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "r", Schema: json.RawMessage(schema)}}
	}
	const schema = `{"type":"object","abcIsValidColor":true,"definitions":{"s":{"type":"string"}},` +
		`"properties":{"a":{"$ref":"#/definitions/s","maxLength":3},"d":{"type":"string","format":"duration"},"p":{"type":"string","format":"password"}}}`
	want := []client.SchemaWarning{
		{Location: "/abcIsValidColor", Keyword: "abcIsValidColor"},
		{Location: "/properties/a/maxLength", Keyword: "maxLength"},
		{Location: "/properties/d/format", Keyword: "format"},
	}
	check := func(what string, got []client.SchemaWarning) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: warnings %+v", what, got)
		}
		for i := range want {
			if got[i].Location != want[i].Location || got[i].Keyword != want[i].Keyword || got[i].Message == "" {
				t.Errorf("%s: warning %d is %+v, want %+v", what, i, got[i], want[i])
			}
		}
	}
	ctx := client.WithIdempotencyKey(t.Context(), "warn-create")
	created, err := c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("Go.")}, ResponseFormat: format(schema)})
	if err != nil {
		t.Fatal(err)
	}
	check("create", created.Warnings)
	replayed, err := c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("Go.")}, ResponseFormat: format(schema)})
	if err != nil || replayed.Chat.ID != created.Chat.ID {
		t.Fatalf("replay: %v", err)
	}
	check("create replayed", replayed.Warnings)
	if !strings.Contains(created.Warnings[1].Message, `beside "$ref" is ignored`) {
		t.Errorf("message %q", created.Warnings[1].Message)
	}
	sent, err := c.SendMessage(t.Context(), created.Chat.ID, client.SendMessageRequest{Content: []client.MessagePart{client.TextPart("Again.")}, ResponseFormat: format(schema)})
	if err != nil {
		t.Fatal(err)
	}
	check("send", sent.Warnings)
	edited, err := c.EditMessage(t.Context(), created.Chat.ID, created.Messages[0].ID, client.EditMessageRequest{Content: []client.MessagePart{client.TextPart("Edited.")}, ResponseFormat: format(schema)})
	if err != nil {
		t.Fatal(err)
	}
	check("edit", edited.Warnings)
	clean, err := c.CreateChat(t.Context(), client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("Go.")}, ResponseFormat: format(`{"type":"object","title":"t","markdownDescription":"m"}`)})
	if err != nil || clean.Warnings != nil {
		t.Fatalf("clean schema: %+v %v", clean.Warnings, err)
	}
	if client.MaxSchemaWarnings != validate.MaxWarnings {
		t.Errorf("client.MaxSchemaWarnings %d, validate.MaxWarnings %d", client.MaxSchemaWarnings, validate.MaxWarnings)
	}
}
