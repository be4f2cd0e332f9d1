package httpapi

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chatd/chatd/client"
)

// checkRouteDocs lists what is wrong between a route table and its
// documentation: undocumented routes, documentation of routes that do not
// exist, and entries missing the answers every route of their kind has.
func checkRouteDocs(routes []route, docs map[string]routeDoc) []string {
	var problems []string
	inTable := map[string]bool{}
	ops := map[string]string{}
	for _, rt := range routes {
		key := rt.method + " " + rt.pattern
		inTable[key] = true
		d, ok := docs[key]
		if !ok {
			problems = append(problems, "route "+key+" has no documentation in routeDocs")
			continue
		}
		if d.op == "" || d.summary == "" || d.description == "" {
			problems = append(problems, key+": operation id, summary and description are required")
		}
		if prev, dup := ops[d.op]; dup {
			problems = append(problems, fmt.Sprintf("%s: operation id %q is also used by %s", key, d.op, prev))
		}
		ops[d.op] = key
		statuses := map[int]bool{}
		success := false
		for _, r := range d.responses {
			if statuses[r.status] {
				problems = append(problems, fmt.Sprintf("%s: status %d listed twice", key, r.status))
			}
			statuses[r.status] = true
			if r.description == "" || http.StatusText(r.status) == "" {
				problems = append(problems, fmt.Sprintf("%s: status %d needs a description (and must be a real status)", key, r.status))
			}
			if r.status/100 == 2 {
				success = true
			}
			if r.status >= 400 && reflect.TypeOf(r.body) != reflect.TypeFor[client.Error]() {
				problems = append(problems, fmt.Sprintf("%s: error status %d must use the Error shape", key, r.status))
			}
		}
		if !success {
			problems = append(problems, key+": no success response")
		}
		need := []int{}
		if rt.scope != scopeNone {
			need = append(need, 401, 403, 500)
		}
		if d.request != nil {
			need = append(need, 400, 413, 415)
		}
		if strings.Contains(rt.pattern, "{") {
			need = append(need, 404)
		}
		for _, st := range need {
			if !statuses[st] {
				problems = append(problems, fmt.Sprintf("%s: status %d is not documented", key, st))
			}
		}
		for _, p := range patternParams(rt.pattern) {
			if _, ok := pathParams[p]; !ok {
				problems = append(problems, fmt.Sprintf("%s: path parameter {%s} is not described in pathParams", key, p))
			}
		}
	}
	for key := range docs {
		if !inTable[key] {
			problems = append(problems, "routeDocs documents "+key+", which is not in the route table")
		}
	}
	slices.Sort(problems)
	return problems
}

func TestEveryRouteIsDocumented(t *testing.T) {
	s := New(Options{})
	if problems := checkRouteDocs(s.routeTable(), routeDocs()); len(problems) > 0 {
		t.Fatalf("route documentation:\n%s", strings.Join(problems, "\n"))
	}

	// The check fails on a route added without documentation...
	dummy := append(s.routeTable(), route{"POST", "/api/v1/chats/{chat}/dummy", scopeWrite, s.interrupt})
	if problems := checkRouteDocs(dummy, routeDocs()); !slices.Contains(problems, "route POST /api/v1/chats/{chat}/dummy has no documentation in routeDocs") {
		t.Fatalf("an undocumented route was not reported: %q", problems)
	}
	// ...on documentation of a route that does not exist...
	docs := routeDocs()
	docs["GET /api/v1/ghost"] = docs["GET /healthz"]
	if problems := checkRouteDocs(s.routeTable(), docs); !slices.Contains(problems, "routeDocs documents GET /api/v1/ghost, which is not in the route table") {
		t.Fatalf("documentation of a missing route was not reported: %q", problems)
	}
	// ...and on a body route that forgets the body errors.
	docs = routeDocs()
	d := docs["POST /api/v1/chats"]
	d.responses = d.responses[:1]
	docs["POST /api/v1/chats"] = d
	if problems := checkRouteDocs(s.routeTable(), docs); !slices.Contains(problems, "POST /api/v1/chats: status 413 is not documented") {
		t.Fatalf("a missing 413 was not reported: %q", problems)
	}
	// The served document leaves the undocumented route out, so the
	// document test below fails on it too.
	doc := buildOpenAPI(dummy, routeDocs())
	if _, ok := doc["paths"].(map[string]any)["/api/v1/chats/{chat}/dummy"]; ok {
		t.Fatal("an undocumented route made it into the document")
	}
}

// fetchOpenAPI gets the served document without a token.
func fetchOpenAPI(t *testing.T, s *Server) (map[string]any, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/openapi.json", nil))
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/v1/openapi.json: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc, rec.Body.Bytes()
}

func TestOpenAPIDocument(t *testing.T) {
	s := New(Options{})
	doc, raw := fetchOpenAPI(t, s)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.0.") {
		t.Fatalf("openapi version %q", v)
	}
	paths := doc["paths"].(map[string]any)
	components := doc["components"].(map[string]any)
	schemas := components["schemas"].(map[string]any)
	schemes := components["securitySchemes"].(map[string]any)

	// The route table and the document name the same operations.
	want := map[string]route{}
	for _, rt := range s.routeTable() {
		want[strings.ToLower(rt.method)+" "+openAPIPath(rt.pattern)] = rt
	}
	ops := map[string]bool{}
	for path, item := range paths {
		for method, op := range item.(map[string]any) {
			key := method + " " + path
			rt, ok := want[key]
			if !ok {
				t.Errorf("the document has %s, which is not in the route table", key)
				continue
			}
			delete(want, key)
			checkOperation(t, key, rt, path, op.(map[string]any), schemes)
			id := op.(map[string]any)["operationId"].(string)
			if ops[id] {
				t.Errorf("operationId %s is used twice", id)
			}
			ops[id] = true
			// The router sends this path and method to this route.
			req := httptest.NewRequest(strings.ToUpper(method), samplePath(path), nil)
			if _, pattern := s.mux.Handler(req); pattern != rt.method+" "+rt.pattern {
				t.Errorf("%s: the router matched %q", key, pattern)
			}
		}
	}
	for key := range want {
		t.Errorf("route %s is missing from the document", key)
	}

	// Every $ref resolves.
	refs := 0
	walk(doc, func(m map[string]any) {
		ref, ok := m["$ref"].(string)
		if !ok {
			return
		}
		refs++
		name, ok := strings.CutPrefix(ref, "#/components/schemas/")
		if _, found := schemas[name]; !ok || !found {
			t.Errorf("$ref %q does not resolve", ref)
		}
		if len(m) != 1 {
			t.Errorf("$ref %q has siblings, which OpenAPI 3.0 ignores", ref)
		}
	})
	if refs == 0 {
		t.Fatal("no $ref at all")
	}

	// Components: described objects, with known required properties.
	for name, sc := range schemas {
		obj := sc.(map[string]any)
		if obj["oneOf"] != nil && obj["description"] != nil {
			continue // a union of object components
		}
		if obj["type"] != "object" || obj["description"] == nil {
			t.Errorf("component %s: want a described object: %v", name, obj)
		}
		props, _ := obj["properties"].(map[string]any)
		for _, r := range asSlice(obj["required"]) {
			if _, ok := props[r.(string)]; !ok {
				t.Errorf("component %s requires unknown property %v", name, r)
			}
		}
	}
	for key := range fieldDocs {
		typ, field, _ := strings.Cut(key, ".")
		obj, ok := schemas[typ].(map[string]any)
		if !ok {
			t.Errorf("fieldDocs %s: no component %s", key, typ)
			continue
		}
		found := obj["properties"] != nil && obj["properties"].(map[string]any)[field] != nil
		for _, v := range asSlice(obj["oneOf"]) { // a union: a property of one of its shapes
			name := strings.TrimPrefix(v.(map[string]any)["$ref"].(string), "#/components/schemas/")
			found = found || schemas[name].(map[string]any)["properties"].(map[string]any)[field] != nil
		}
		if !found {
			t.Errorf("fieldDocs %s: %s has no property %s", key, typ, field)
		}
	}
	// Every part type the server stores as visible has its shape; a
	// send's answer narrows on queued.
	mapping := schemas["MessagePart"].(map[string]any)["discriminator"].(map[string]any)["mapping"].(map[string]any)
	for _, typ := range []string{"text", "reasoning", "tool-call", "tool-result", "file", "source"} {
		if mapping[typ] == nil {
			t.Errorf("MessagePart has no shape for %q", typ)
		}
	}
	if len(asSlice(schemas["SendMessageResponse"].(map[string]any)["oneOf"])) != 2 {
		t.Error("SendMessageResponse is not a union")
	}
	for _, name := range exportedStructs(t) {
		if _, ok := schemas[name]; !ok {
			t.Errorf("client.%s is not in components/schemas (add it to publicTypes)", name)
		}
	}

	// Every operation is a method of the Go client.
	ct := reflect.TypeFor[*client.Client]()
	for id := range ops {
		if _, ok := ct.MethodByName(id); !ok {
			t.Errorf("operation %s has no method of the same name on client.Client", id)
		}
	}
	if !json.Valid(raw) {
		t.Fatal("not JSON")
	}
}

// checkOperation checks one operation's structure.
func checkOperation(t *testing.T, key string, rt route, path string, op map[string]any, schemes map[string]any) {
	t.Helper()
	for _, f := range []string{"operationId", "summary", "description"} {
		if s, _ := op[f].(string); s == "" {
			t.Errorf("%s: no %s", key, f)
		}
	}
	resps, _ := op["responses"].(map[string]any)
	if len(resps) == 0 {
		t.Errorf("%s: no responses", key)
	}
	for code, r := range resps {
		n, err := strconv.Atoi(code)
		if err != nil || http.StatusText(n) == "" {
			t.Errorf("%s: response %q is not a status code", key, code)
		}
		if d, _ := r.(map[string]any)["description"].(string); d == "" {
			t.Errorf("%s: response %s has no description", key, code)
		}
	}
	// Path parameters match the template, one for one.
	var declared []string
	for _, p := range asSlice(op["parameters"]) {
		pm := p.(map[string]any)
		if pm["in"] == "path" {
			declared = append(declared, pm["name"].(string))
			if pm["required"] != true {
				t.Errorf("%s: path parameter %v must be required", key, pm["name"])
			}
		}
		if pm["schema"] == nil || pm["description"] == "" {
			t.Errorf("%s: parameter %v needs a schema and a description", key, pm["name"])
		}
	}
	var inPath []string
	for _, m := range wildcardRE.FindAllStringSubmatch(path, -1) {
		inPath = append(inPath, m[1])
	}
	if !slices.Equal(declared, inPath) {
		t.Errorf("%s: path parameters %v, template has %v", key, declared, inPath)
	}
	// Security: the bearer scheme exactly on authenticated routes.
	sec := asSlice(op["security"])
	if (rt.scope != scopeNone) != (len(sec) >= 1) || op["x-chatd-scope"] != nil != (rt.scope != scopeNone) {
		t.Errorf("%s: security %v, x-chatd-scope %v, scope %q", key, sec, op["x-chatd-scope"], rt.scope)
	}
	for _, req := range sec {
		for name := range req.(map[string]any) {
			if _, ok := schemes[name]; !ok {
				t.Errorf("%s: unknown security scheme %s", key, name)
			}
		}
	}
	if rb, ok := op["requestBody"].(map[string]any); ok {
		if _, ok := rb["content"].(map[string]any)["application/json"]; !ok {
			t.Errorf("%s: request body is not application/json", key)
		}
	}
}

// TestRequestTypesMatchHandlers: each documented request type (package
// client) encodes exactly the members its handler decodes.
func TestRequestTypesMatchHandlers(t *testing.T) {
	decoders := map[string]any{
		"POST /api/v1/chats":                            createChatBody{},
		"PATCH /api/v1/chats/{chat}":                    updateChatBody{},
		"POST /api/v1/chats/{chat}/messages":            sendMessageBody{},
		"PATCH /api/v1/chats/{chat}/messages/{message}": editBody{},
		"POST /api/v1/chats/{chat}/tool-results":        toolResultsBody{},
		"POST /api/v1/tokens":                           client.CreateTokenRequest{},
	}
	for key, d := range routeDocs() {
		if d.request == nil {
			continue
		}
		dec, ok := decoders[key]
		if !ok {
			t.Errorf("%s: add the handler's body type to this test", key)
			continue
		}
		if got, want := fieldNames(reflect.TypeOf(d.request)), fieldNames(reflect.TypeOf(dec)); !slices.Equal(got, want) {
			t.Errorf("%s: documented %v, handler decodes %v", key, got, want)
		}
	}
	// One level down, where the handler declares its own element type.
	got := fieldNames(reflect.TypeFor[client.ToolResult]())
	want := fieldNames(reflect.TypeOf(toolResultsBody{}.Results).Elem())
	if !slices.Equal(got, want) {
		t.Errorf("tool result: documented %v, handler decodes %v", got, want)
	}
}

func fieldNames(t reflect.Type) []string {
	var out []string
	for _, f := range jsonFields(t) {
		out = append(out, f.name)
	}
	slices.Sort(out)
	return out
}

func TestSchemaReflection(t *testing.T) {
	g := &schemaGen{components: map[string]any{}}
	g.schema(reflect.TypeFor[client.StructuredOutput]())
	g.schema(reflect.TypeFor[client.CreateChatRequest]())
	g.schema(reflect.TypeFor[client.MessagePart]())
	so := g.components["StructuredOutput"].(map[string]any)
	props := so["properties"].(map[string]any)
	if !reflect.DeepEqual(so["required"], []string{"request_id", "status"}) {
		t.Errorf("required %v: omitempty fields are optional", so["required"])
	}
	if id := props["request_id"].(map[string]any); id["type"] != "string" || id["format"] != "uuid" {
		t.Errorf("uuid.UUID: %v", id)
	}
	if v := props["value"].(map[string]any); v["type"] != nil {
		t.Errorf("json.RawMessage must allow any JSON value: %v", v)
	}
	if e := props["error"].(map[string]any); e["nullable"] != nil || e["type"] != nil || e["allOf"] == nil {
		t.Errorf("an omitempty pointer to a struct is an optional $ref, not nullable: %v", e)
	}
	cc := g.components["CreateChatRequest"].(map[string]any)
	if rf := cc["properties"].(map[string]any)["response_format"].(map[string]any); rf["nullable"] != true || rf["type"] != "object" || rf["allOf"] == nil {
		t.Errorf("a nullable $ref needs a type beside nullable: %v", rf)
	}
	if !reflect.DeepEqual(cc["required"], []string{"content"}) {
		t.Errorf("CreateChatRequest required %v", cc["required"])
	}
	content := cc["properties"].(map[string]any)["content"].(map[string]any)
	if content["type"] != "array" || content["items"].(map[string]any)["$ref"] != "#/components/schemas/TextPart" {
		t.Errorf("slice of structs: %v", content)
	}
	data := g.components["MessagePart"].(map[string]any)["properties"].(map[string]any)["data"].(map[string]any)
	if data["format"] != "byte" {
		t.Errorf("[]byte: %v", data)
	}
	ts := reflect.TypeFor[client.Chat]()
	g.schema(ts)
	created := g.components["Chat"].(map[string]any)["properties"].(map[string]any)["created_at"].(map[string]any)
	if created["format"] != "date-time" {
		t.Errorf("time.Time: %v", created)
	}
}

// exportedStructs parses package client and returns its exported struct
// types, except the client itself.
func exportedStructs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../client/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("client sources: %v", err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				// Generic types (Partial[T]) are the client's typed views of
				// wire types, not wire types.
				if _, isStruct := ts.Type.(*ast.StructType); isStruct && ts.Name.IsExported() && ts.TypeParams == nil &&
					ts.Name.Name != "Client" && ts.Name.Name != "APIError" &&
					ts.Name.Name != "Stream" && ts.Name.Name != "StreamEvent" { // the SSE reader, not wire types
					out = append(out, ts.Name.Name)
				}
			}
		}
	}
	return out
}

func samplePath(path string) string {
	return wildcardRE.ReplaceAllStringFunc(path, func(w string) string {
		if s := pathParams[w[1:len(w)-1]].schema; s["format"] == "uuid" {
			return "00000000-0000-4000-8000-000000000001"
		}
		return "1"
	})
}

func walk(v any, f func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		f(x)
		for _, c := range x {
			walk(c, f)
		}
	case []any:
		for _, c := range x {
			walk(c, f)
		}
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
