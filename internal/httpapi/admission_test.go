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

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testenv"
)

type apiResult struct {
	status int
	header http.Header
	err    client.Error
	body   []byte
}

// call sends a raw request; headers are name, value pairs (an empty value
// sends no header).
func call(t *testing.T, env *testenv.Env, token, method, path, body string, headers ...string) apiResult {
	t.Helper()
	req, err := http.NewRequest(method, env.API.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := env.API.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	res := apiResult{status: resp.StatusCode, header: resp.Header, body: b}
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(b, &res.err); err != nil {
			t.Fatalf("%s %s: error body is not the JSON error shape: %s", method, path, b)
		}
	}
	return res
}

// rows counts everything a request could persist.
func rows(t *testing.T, env *testenv.Env) string {
	t.Helper()
	var chats, msgs, queued, reqs int
	err := env.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM chats), (SELECT count(*) FROM chat_messages),
		(SELECT count(*) FROM chat_queued_messages), (SELECT count(*) FROM structured_requests)`).Scan(&chats, &msgs, &queued, &reqs)
	if err != nil {
		t.Fatal(err)
	}
	var statuses []string
	r, err := env.Pool.Query(context.Background(), `SELECT status || mode FROM chats ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
		var s string
		_ = r.Scan(&s)
		statuses = append(statuses, s)
	}
	return fmt.Sprintf("chats=%d messages=%d queued=%d requests=%d states=%v", chats, msgs, queued, reqs, statuses)
}

const okSchema = `{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}`

func format(jsonSchema string) string {
	return `{"type":"json_schema","json_schema":` + jsonSchema + `}`
}

func named(schema string) string { return format(`{"name":"report","schema":` + schema + `}`) }

func createBody(responseFormat string, extra ...string) string {
	b := `{"content":[{"type":"text","text":"hi"}]`
	if responseFormat != "" {
		b += `,"response_format":` + responseFormat
	}
	for _, e := range extra {
		b += "," + e
	}
	return b + "}"
}

func TestAdmission(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	token := env.Token("alice")
	ctx := context.Background()

	// A running chat (no workers run, so it stays busy) with one user message.
	c := env.Client("alice")
	busy, err := c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	chatPath := "/api/v1/chats/" + busy.Chat.ID.String()
	editPath := fmt.Sprintf("%s/messages/%d", chatPath, busy.Messages[0].ID)
	parent := busy.Chat.ID.String()

	long := func(n int) string { return strings.Repeat("a", n) }
	// 513 two-byte characters: 1026 UTF-8 bytes but only 513 characters.
	multibyte := strings.Repeat("é", 513)

	cases := []struct {
		name, method, path, body string
		status                   int
		field                    string // prefix of validations[0].field
	}{
		{"text chat", "POST", "/api/v1/chats", createBody(""), 201, ""},
		{"null format", "POST", "/api/v1/chats", createBody("null"), 201, ""},
		{"explicit text", "POST", "/api/v1/chats", createBody(`{"type":"text"}`), 201, ""},
		{"json_schema", "POST", "/api/v1/chats", createBody(named(okSchema)), 201, ""},
		{"scalar output", "POST", "/api/v1/chats", createBody(named(`{"type":"integer","minimum":0}`)), 201, ""},
		{"null output", "POST", "/api/v1/chats", createBody(named(`{"type":"null"}`)), 201, ""},
		{"empty schema", "POST", "/api/v1/chats", createBody(named(`{}`)), 201, ""},
		{"name of 64", "POST", "/api/v1/chats", createBody(format(`{"name":"` + long(64) + `","schema":{}}`)), 201, ""},
		{"description of 1024", "POST", "/api/v1/chats", createBody(format(`{"name":"n","description":"` + long(1024) + `","schema":{}}`)), 201, ""},
		{"finalizer-named client tool, ordinary chat", "POST", "/api/v1/chats", createBody("", `"dynamic_tools":[{"name":"coder_structured_output"}]`), 201, ""},
		{"property named $ref", "POST", "/api/v1/chats", createBody(named(`{"properties":{"$ref":{"type":"string"}}}`)), 201, ""},

		{"empty format", "POST", "/api/v1/chats", createBody(`{}`), 400, "response_format.type"},
		{"unknown type", "POST", "/api/v1/chats", createBody(`{"type":"xml"}`), 400, "response_format.type"},
		{"type not a string", "POST", "/api/v1/chats", createBody(`{"type":1}`), 400, "response_format.type"},
		{"json_schema beside text", "POST", "/api/v1/chats", createBody(`{"type":"text","json_schema":{"name":"n","schema":{}}}`), 400, "response_format.json_schema"},
		{"json_schema missing", "POST", "/api/v1/chats", createBody(`{"type":"json_schema"}`), 400, "response_format.json_schema"},
		{"json_schema not an object", "POST", "/api/v1/chats", createBody(`{"type":"json_schema","json_schema":"x"}`), 400, "response_format.json_schema"},
		{"strict true", "POST", "/api/v1/chats", createBody(format(`{"name":"n","strict":true,"schema":{}}`)), 201, ""},
		{"strict false", "POST", "/api/v1/chats", createBody(format(`{"name":"n","strict":false,"schema":{}}`)), 400, "response_format.json_schema.strict"},
		{"strict not a boolean", "POST", "/api/v1/chats", createBody(format(`{"name":"n","strict":"yes","schema":{}}`)), 400, "response_format.json_schema.strict"},
		{"unknown envelope field", "POST", "/api/v1/chats", createBody(`{"type":"json_schema","json_schema":{"name":"n","schema":{}},"extra":1}`), 400, "response_format.extra"},
		{"name missing", "POST", "/api/v1/chats", createBody(format(`{"schema":{}}`)), 400, "response_format.json_schema.name"},
		{"name with space", "POST", "/api/v1/chats", createBody(format(`{"name":"a b","schema":{}}`)), 400, "response_format.json_schema.name"},
		{"name of 65", "POST", "/api/v1/chats", createBody(format(`{"name":"` + long(65) + `","schema":{}}`)), 400, "response_format.json_schema.name"},
		{"name empty", "POST", "/api/v1/chats", createBody(format(`{"name":"","schema":{}}`)), 400, "response_format.json_schema.name"},
		{"description of 1025", "POST", "/api/v1/chats", createBody(format(`{"name":"n","description":"` + long(1025) + `","schema":{}}`)), 400, "response_format.json_schema.description"},
		{"description of 1026 UTF-8 bytes", "POST", "/api/v1/chats", createBody(format(`{"name":"n","description":"` + multibyte + `","schema":{}}`)), 400, "response_format.json_schema.description"},
		{"description not a string", "POST", "/api/v1/chats", createBody(format(`{"name":"n","description":5,"schema":{}}`)), 400, "response_format.json_schema.description"},
		{"schema missing", "POST", "/api/v1/chats", createBody(format(`{"name":"n"}`)), 400, "response_format.json_schema.schema"},
		{"schema array", "POST", "/api/v1/chats", createBody(named(`[]`)), 400, "response_format.json_schema.schema"},
		{"schema string", "POST", "/api/v1/chats", createBody(named(`"object"`)), 400, "response_format.json_schema.schema"},
		{"schema boolean", "POST", "/api/v1/chats", createBody(named(`true`)), 400, "response_format.json_schema.schema"},
		{"schema $ref", "POST", "/api/v1/chats", createBody(named(`{"$ref":"#/definitions/a"}`)), 400, "response_format.json_schema.schema"},
		{"schema keyword typo", "POST", "/api/v1/chats", createBody(named(`{"requird":["a"]}`)), 400, "response_format.json_schema.schema"},
		{"schema unknown dialect", "POST", "/api/v1/chats", createBody(named(`{"$schema":"http://json-schema.org/draft-03/schema#"}`)), 400, "response_format.json_schema.schema"},
		{"schema duplicate key", "POST", "/api/v1/chats", createBody(named(`{"type":"string","type":"object"}`)), 400, "response_format"},
		{"format a string", "POST", "/api/v1/chats", createBody(`"json"`), 400, "response_format"},
		{"format an array", "POST", "/api/v1/chats", createBody(`[]`), 400, "response_format"},
		{"structured in plan mode", "POST", "/api/v1/chats", createBody(named(okSchema), `"plan_mode":true`), 400, "response_format"},
		{"structured in a child chat", "POST", "/api/v1/chats", createBody(named(okSchema), `"parent_chat_id":"`+parent+`"`), 400, "response_format"},
		{"finalizer-named client tool", "POST", "/api/v1/chats", createBody(named(okSchema), `"dynamic_tools":[{"name":"coder_structured_output"}]`), 400, "response_format"},
		{"bad client tool name", "POST", "/api/v1/chats", createBody("", `"dynamic_tools":[{"name":"a b"}]`), 400, "dynamic_tools.0.name"},
		{"duplicate client tool", "POST", "/api/v1/chats", createBody("", `"dynamic_tools":[{"name":"a"},{"name":"a"}]`), 400, "dynamic_tools.1.name"},
		{"content missing", "POST", "/api/v1/chats", `{}`, 400, "content"},
		{"content empty", "POST", "/api/v1/chats", `{"content":[]}`, 400, "content"},
		{"content not an array", "POST", "/api/v1/chats", `{"content":"hello"}`, 400, "content"},
		{"content part type", "POST", "/api/v1/chats", `{"content":[{"type":"image","text":"x"}]}`, 400, "content.0.type"},
		{"unknown field", "POST", "/api/v1/chats", createBody("", `"temperature":1`), 400, "temperature"},
		{"unknown model", "POST", "/api/v1/chats", createBody("", `"model":"nope"`), 400, "model"},
		{"unknown parent", "POST", "/api/v1/chats", createBody("", `"parent_chat_id":"`+uuid.NewString()+`"`), 400, "parent_chat_id"},
		{"trailing data", "POST", "/api/v1/chats", createBody("") + `{}`, 400, "body"},
		{"not JSON", "POST", "/api/v1/chats", `content=hi`, 400, "body"},

		{"send json_schema queues", "POST", chatPath + "/messages", createBody(named(okSchema)), 200, ""},
		{"send bad schema", "POST", chatPath + "/messages", createBody(named(`{"items":{"$ref":"http://x"}}`)), 400, "response_format.json_schema.schema"},
		{"send bad schema with interrupt", "POST", chatPath + "/messages", createBody(named(`{"$ref":"#"}`), `"busy_behavior":"interrupt"`), 400, "response_format.json_schema.schema"},
		{"send bad busy behavior", "POST", chatPath + "/messages", createBody("", `"busy_behavior":"now"`), 400, "busy_behavior"},
		{"send structured in plan mode", "POST", chatPath + "/messages", createBody(named(okSchema), `"plan_mode":true`), 400, "response_format"},
		{"send unknown field", "POST", chatPath + "/messages", createBody("", `"strict":true`), 400, "strict"},
		{"edit bad schema", "PATCH", editPath, createBody(named(`{"definitions":{"a":{"$ref":"other.json"}}}`)), 400, "response_format.json_schema.schema"},
		{"edit empty format", "PATCH", editPath, createBody(`{}`), 400, "response_format.type"},
		{"edit no content", "PATCH", editPath, `{"content":[]}`, 400, "content"},
	}
	if len(cases) < 40 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		before := rows(t, env)
		res := call(t, env, token, tc.method, tc.path, tc.body)
		if res.status != tc.status {
			t.Errorf("%s: status %d, want %d: %s", tc.name, res.status, tc.status, res.body)
			continue
		}
		if tc.status < 400 {
			continue
		}
		if len(res.err.Validations) == 0 || !strings.HasPrefix(res.err.Validations[0].Field, tc.field) {
			t.Errorf("%s: validations %+v, want a field starting with %q", tc.name, res.err.Validations, tc.field)
		}
		if after := rows(t, env); after != before {
			t.Errorf("%s: a rejected request changed the database:\n before %s\n after  %s", tc.name, before, after)
		}
	}
}

func TestExperimentGate(t *testing.T) {
	t.Parallel()
	// Work accepted while the gate was open...
	env := testenv.New(t, testenv.Options{NoRunner: true})
	c := env.Client("alice")
	ctx := context.Background()
	res, err := c.CreateChat(ctx, client.CreateChatRequest{Content: []client.MessagePart{client.TextPart("hi")},
		ResponseFormat: &client.ResponseFormat{Type: "json_schema", JSONSchema: &client.JSONSchemaFormat{Name: "r", Schema: json.RawMessage(okSchema)}}})
	if err != nil {
		t.Fatal(err)
	}

	// ...is processed by a server restarted with it closed.
	closed := testenv.Reopen(t, env, testenv.Options{StructuredOutputOff: true})
	token := closed.Token("alice")
	if r := call(t, closed, token, "POST", "/api/v1/chats", createBody(named(okSchema))); r.status != 400 ||
		len(r.err.Validations) == 0 || r.err.Validations[0].Field != "response_format" || !strings.Contains(r.err.Validations[0].Detail, "disabled") {
		t.Fatalf("create with the gate closed: %d %s", r.status, r.body)
	}
	if r := call(t, closed, token, "POST", "/api/v1/chats", createBody(`{"type":"text"}`)); r.status != 201 {
		t.Fatalf("text chat with the gate closed: %d %s", r.status, r.body)
	}
	// An edit that would preserve a schema is refused too; clearing it works.
	editPath := fmt.Sprintf("/api/v1/chats/%s/messages/%d", res.Chat.ID, res.Messages[0].ID)
	if r := call(t, closed, token, "PATCH", editPath, createBody("")); r.status != 400 || r.err.Validations[0].Field != "response_format" {
		t.Fatalf("preserving edit with the gate closed: %d %s", r.status, r.body)
	}
	out, err := closed.Client("alice").WaitStructuredOutput(ctx, *res.Messages[0].StructuredOutputRequestID)
	if err != nil || out.Status != client.OutputSucceeded {
		t.Fatalf("accepted work after restart with the gate closed: %+v %v", out, err)
	}
}

func TestBodyHygiene(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{NoRunner: true})
	token := env.Token("alice")
	big := createBody("", `"system_prompt":"`+strings.Repeat("x", 2<<20)+`"`)
	if r := call(t, env, token, "POST", "/api/v1/chats", big); r.status != 413 {
		t.Fatalf("2 MiB body: %d %s", r.status, r.body)
	}
	if r := call(t, env, "", "GET", "/api/v1/chats", ""); r.status != 401 {
		t.Fatalf("no token: %d", r.status)
	}
	if r := call(t, env, "chatd_wrong", "GET", "/api/v1/chats", ""); r.status != 401 {
		t.Fatalf("bad token: %d", r.status)
	}
	if r := call(t, env, token, "GET", "/api/v1/nope", ""); r.status != 404 || r.err.Message == "" {
		t.Fatalf("unknown route: %d %s", r.status, r.body)
	}
	if r := call(t, env, token, "PUT", "/api/v1/chats", "{}"); r.status != 405 {
		t.Fatalf("wrong method: %d %s", r.status, r.body)
	}
	if r := call(t, env, token, "GET", "/api/v1/chats/not-a-uuid", ""); r.status != 404 {
		t.Fatalf("bad id: %d %s", r.status, r.body)
	}
	if r := call(t, env, token, "GET", "/api/v1/chats?limit=0", ""); r.status != 400 || r.err.Validations[0].Field != "limit" {
		t.Fatalf("bad limit: %d %s", r.status, r.body)
	}
	req, _ := http.NewRequest("POST", env.API.URL+"/api/v1/chats", bytes.NewReader([]byte(createBody(""))))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := env.API.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 415 {
		t.Fatalf("text/plain body: %d", resp.StatusCode)
	}
}
