package mockllm

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The Gemini API (POST /v1beta/models/MODEL:streamGenerateContent?alt=sse
// and :generateContent; chatd type google, base URL without /v1beta),
// shaped after the recorded traffic in fantasy's
// providertests/testdata/TestGoogle* cassettes: contents of role user and
// model made of parts (text, thought text, functionCall, functionResponse)
// with thoughtSignature bytes (base64 in JSON), function declarations with
// parameters or parametersJsonSchema, server-sent events "data: {...}"
// separated by CRLF CRLF, each a GenerateContentResponse with the
// cumulative usageMetadata, the last with the candidate's finishReason.

// geminiFormat is the Gemini API for one request: the model and the
// method (streamed or not) are in the URL, not the body.
type geminiFormat struct {
	model  string
	stream bool
}

func (geminiFormat) name() string   { return FormatGemini }
func (geminiFormat) callID() string { return strings.ToLower(rand.Text()[:8]) }

// geminiMethods are the model methods served.
const (
	geminiStream   = "streamGenerateContent"
	geminiGenerate = "generateContent"
)

// serveGemini routes POST /v1beta/models/{call}, call being
// "MODEL:METHOD".
func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request) {
	model, method, ok := strings.Cut(r.PathValue("call"), ":")
	if !ok || model == "" || method != geminiStream && method != geminiGenerate {
		geminiFormat{}.writeError(w, ErrorSpec{Status: http.StatusNotFound,
			Message: fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path)})
		return
	}
	s.serve(geminiFormat{model: model, stream: method == geminiStream}, w, r)
}

// signatureKey signs the thought signatures the mock issues.
var signatureKey = []byte("mockllm gemini thought signature v1")

// signaturePrefix starts every signature: Gemini's are binary, and these
// bytes are what a text codec gets wrong (not UTF-8, a NUL, U+E000 in
// UTF-8, an overlong sequence).
var signaturePrefix = []byte{0x12, 0xff, 0x00, 0xee, 0x80, 0x80, 0xc0, 0xaf, 0xfe}

// ThoughtSignature issues a thought signature for a function call of that
// name ("" for a text part): binary, a nonce and its MAC, so that a forged
// or altered one is refused (VerifyThoughtSignature).
func ThoughtSignature(name string) []byte {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	return append(append(append([]byte{}, signaturePrefix...), nonce...), signatureMAC(name, nonce)...)
}

func signatureMAC(name string, nonce []byte) []byte {
	m := hmac.New(sha256.New, signatureKey)
	m.Write([]byte(name))
	m.Write([]byte{0})
	m.Write(nonce)
	return m.Sum(nil)[:16]
}

// VerifyThoughtSignature reports whether sig is one the mock issued for a
// function call of that name ("" for a text part).
func VerifyThoughtSignature(name string, sig []byte) bool {
	n := len(signaturePrefix)
	if len(sig) != n+32 || !bytes.Equal(sig[:n], signaturePrefix) {
		return false
	}
	return hmac.Equal(sig[n+16:], signatureMAC(name, sig[n:n+16]))
}

// signatureLog keeps the signatures an answer issued; copies of a Request
// share it.
type signatureLog struct {
	mu   sync.Mutex
	sigs [][]byte
}

func (l *signatureLog) add(sig []byte) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sigs = append(l.sigs, sig)
}

// IssuedSignatures are the thought signatures the answer to this Gemini
// request carried, in order (empty until it was answered).
func (r *Request) IssuedSignatures() [][]byte {
	if r.issuedSignatures == nil {
		return nil
	}
	r.issuedSignatures.mu.Lock()
	defer r.issuedSignatures.mu.Unlock()
	return append([][]byte(nil), r.issuedSignatures.sigs...)
}

type geminiPart struct {
	Text             *string `json:"text"`
	Thought          bool    `json:"thought"`
	ThoughtSignature []byte  `json:"thoughtSignature"`
	FunctionCall     *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

func (f geminiFormat) parse(body []byte) (Request, error) {
	var wire struct {
		Contents          []geminiContent `json:"contents"`
		SystemInstruction *geminiContent  `json:"systemInstruction"`
		Tools             []struct {
			FunctionDeclarations []json.RawMessage `json:"functionDeclarations"`
		} `json:"tools"`
		ToolConfig       json.RawMessage `json:"toolConfig"`
		GenerationConfig *struct {
			MaxOutputTokens int64 `json:"maxOutputTokens"`
			ThinkingConfig  *struct {
				IncludeThoughts bool   `json:"includeThoughts"`
				ThinkingBudget  *int64 `json:"thinkingBudget"`
				ThinkingLevel   string `json:"thinkingLevel"`
			} `json:"thinkingConfig"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return Request{}, fmt.Errorf("Invalid JSON payload received. %v", err)
	}
	if len(wire.Contents) == 0 {
		return Request{}, fmt.Errorf("* GenerateContentRequest.contents: contents is not specified")
	}
	req := Request{Model: f.model, Stream: f.stream, IncludeUsage: true, ToolChoice: wire.ToolConfig, Body: body, issuedSignatures: &signatureLog{}}
	if g := wire.GenerationConfig; g != nil {
		req.MaxTokens = g.MaxOutputTokens
		if t := g.ThinkingConfig; t != nil {
			req.IncludeThoughts, req.ThinkingLevel = t.IncludeThoughts, t.ThinkingLevel
			if t.ThinkingBudget != nil {
				req.ThinkingBudget = *t.ThinkingBudget
			}
		}
	}
	if si := wire.SystemInstruction; si != nil {
		var b strings.Builder
		for _, p := range si.Parts {
			if p.Text != nil {
				b.WriteString(*p.Text)
			}
		}
		req.Messages = append(req.Messages, Message{Role: "system", Content: b.String()})
	}
	if err := geminiMessages(&req, wire.Contents); err != nil {
		return Request{}, err
	}
	for i, t := range wire.Tools {
		for j, raw := range t.FunctionDeclarations {
			tool, err := geminiDeclaration(raw)
			if err != nil {
				return Request{}, fmt.Errorf("* GenerateContentRequest.tools[%d].function_declarations[%d]: %v", i, j, err)
			}
			req.Tools = append(req.Tools, tool)
		}
	}
	return req, nil
}

// geminiMessages normalises the contents: a user content's text is a user
// message and its functionResponse parts tool messages
// (geminiUserContent); a model content is an assistant message
// (geminiModelContent). Function responses answer the calls of the model
// content right before them, one for one.
func geminiMessages(req *Request, contents []geminiContent) error {
	turn := 0 // the first content of the current turn: the last with user text
	for i, c := range contents {
		for _, p := range c.Parts {
			if c.Role == "user" && p.Text != nil {
				turn = i
			}
		}
	}
	var pending []MessageToolCall // calls of the previous model content
	for i, c := range contents {
		raw, _ := json.Marshal(c)
		switch c.Role {
		case "user":
			if err := geminiUserContent(req, i, c, raw, pending); err != nil {
				return err
			}
			pending = nil
		case "model":
			if len(pending) > 0 {
				return errResponseCount
			}
			msg, err := geminiModelContent(i, c, raw, i >= turn)
			if err != nil {
				return err
			}
			pending = msg.ToolCalls
			req.Messages = append(req.Messages, msg)
		default:
			return fmt.Errorf("Please use a valid role: user, model.")
		}
	}
	return nil
}

// errResponseCount is the API's error for function responses that do not
// match the calls of the model content before them.
var errResponseCount = errors.New("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.")

// geminiUserContent adds user content i to req: its text as a user
// message, each functionResponse, which must answer one of the pending
// calls, as a tool message.
func geminiUserContent(req *Request, i int, c geminiContent, raw json.RawMessage, pending []MessageToolCall) error {
	var responses int
	var text *Message
	for j, p := range c.Parts {
		switch {
		case p.FunctionResponse != nil:
			fr := p.FunctionResponse
			id := cmp.Or(fr.ID, fr.Name)
			if !answers(pending, id, fr.Name) {
				return fmt.Errorf("* GenerateContentRequest.contents[%d].parts[%d].function_response: "+
					"no function call named %q with id %q in the previous model turn", i, j, fr.Name, fr.ID)
			}
			responses++
			req.Messages = append(req.Messages, Message{Role: "tool", ToolCallID: id, Content: geminiResult(fr.Response), Raw: raw})
			text = nil
		case p.Text != nil:
			if text == nil {
				req.Messages = append(req.Messages, Message{Role: "user", Raw: raw})
				text = &req.Messages[len(req.Messages)-1]
			}
			text.Content += *p.Text
		}
	}
	if len(pending) > 0 && responses != len(pending) {
		return errResponseCount
	}
	return nil
}

// geminiModelContent reads model content i as an assistant message:
// thought text as Reasoning, function calls as ToolCalls, the first call's
// signature as Signature. Every thought signature must be one the mock
// issued, and in the current turn the first function call must carry one.
func geminiModelContent(i int, c geminiContent, raw json.RawMessage, current bool) (Message, error) {
	msg := Message{Role: "assistant", Raw: raw}
	first := true
	for j, p := range c.Parts {
		name := ""
		if p.FunctionCall != nil {
			name = p.FunctionCall.Name
		}
		if len(p.ThoughtSignature) > 0 && !VerifyThoughtSignature(name, p.ThoughtSignature) {
			return Message{}, fmt.Errorf("Corrupted thought signature.")
		}
		switch {
		case p.FunctionCall != nil:
			fc := p.FunctionCall
			if first && current && len(p.ThoughtSignature) == 0 {
				return Message{}, fmt.Errorf("Function call is missing a thought_signature in functionCall parts. This is required for tools "+
					"to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, "+
					"function call `default_api:%s` , position %d. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures "+
					"for more details.", fc.Name, i+1)
			}
			if first {
				msg.Signature = string(p.ThoughtSignature)
			}
			first = false
			if fc.Name == "" {
				return Message{}, fmt.Errorf("* GenerateContentRequest.contents[%d].parts[%d].function_call.name: Name cannot be empty.", i, j)
			}
			msg.ToolCalls = append(msg.ToolCalls, MessageToolCall{ID: cmp.Or(fc.ID, fc.Name), Name: fc.Name, Arguments: cmp.Or(string(fc.Args), "{}")})
		case p.Text != nil && p.Thought:
			msg.Reasoning += *p.Text
		case p.Text != nil:
			msg.Content += *p.Text
		}
	}
	return msg, nil
}

// answers reports whether a function response with that id and name
// answers one of the calls (by id when the calls had ids).
func answers(calls []MessageToolCall, id, name string) bool {
	for _, c := range calls {
		if c.ID == id && c.Name == name {
			return true
		}
	}
	return false
}

// geminiResult flattens a function response: fantasy sends
// {"result": text}.
func geminiResult(raw json.RawMessage) string {
	var r struct {
		Result *string `json:"result"`
	}
	if json.Unmarshal(raw, &r) == nil && r.Result != nil {
		return *r.Result
	}
	return string(raw)
}

// geminiDeclaration reads a function declaration: its parameters are
// parametersJsonSchema (JSON Schema, kept as sent) or parameters
// (Gemini's OpenAPI subset, types in capitals, turned into JSON Schema
// for value generation), never both.
func geminiDeclaration(raw json.RawMessage) (Tool, error) {
	var d struct {
		Name                 string          `json:"name"`
		Description          string          `json:"description"`
		Parameters           json.RawMessage `json:"parameters"`
		ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return Tool{}, err
	}
	if d.Name == "" {
		return Tool{}, errors.New("name: Name cannot be empty")
	}
	switch {
	case len(d.Parameters) > 0 && len(d.ParametersJSONSchema) > 0:
		return Tool{}, errors.New("parameters and parameters_json_schema are mutually exclusive")
	case len(d.ParametersJSONSchema) > 0:
		var schema any
		if err := json.Unmarshal(d.ParametersJSONSchema, &schema); err != nil {
			return Tool{}, err
		}
		if err := checkGeminiRefs(schema, schema, "parameters_json_schema"); err != nil {
			return Tool{}, err
		}
		return Tool{Name: d.Name, Description: d.Description, Parameters: d.ParametersJSONSchema}, nil
	case len(d.Parameters) > 0:
		var schema any
		if err := json.Unmarshal(d.Parameters, &schema); err != nil {
			return Tool{}, err
		}
		lowerTypes(schema)
		params, _ := json.Marshal(schema)
		return Tool{Name: d.Name, Description: d.Description, Parameters: params}, nil
	}
	return Tool{Name: d.Name, Description: d.Description, Parameters: json.RawMessage(`{"type":"object"}`)}, nil
}

// checkGeminiRefs applies the API's rules on $ref: beside it only
// description, default and keywords starting with "$"; and (the mock's
// reading of "$defs" being the definitions keyword Gemini supports) a
// reference is "#/$defs/NAME" with NAME defined at the root, or "#".
func checkGeminiRefs(root, node any, at string) error {
	switch n := node.(type) {
	case map[string]any:
		if ref, ok := n["$ref"].(string); ok {
			for k := range n {
				if k != "description" && k != "default" && !strings.HasPrefix(k, "$") {
					return fmt.Errorf("$ref '%s' was set alongside unsupported fields. If a schema node has $ref set, then only "+
						"description and default can be set alongside it", strings.TrimPrefix(ref, "#/$defs/"))
				}
			}
			defs, _ := root.(map[string]any)["$defs"].(map[string]any)
			name, local := strings.CutPrefix(ref, "#/$defs/")
			if _, defined := defs[name]; ref != "#" && (!local || !defined) {
				return fmt.Errorf("reference to undefined schema at %s", at)
			}
		}
		for k, v := range n {
			if err := checkGeminiRefs(root, v, at+"."+k); err != nil {
				return err
			}
		}
	case []any:
		for i, v := range n {
			if err := checkGeminiRefs(root, v, at+"."+strconv.Itoa(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// lowerTypes turns the OpenAPI subset's "STRING" into JSON Schema's
// "string", everywhere.
func lowerTypes(node any) {
	switch n := node.(type) {
	case map[string]any:
		for k, v := range n {
			if s, ok := v.(string); ok && k == "type" {
				n[k] = strings.ToLower(s)
				continue
			}
			lowerTypes(v)
		}
	case []any:
		for _, v := range n {
			lowerTypes(v)
		}
	}
}

func (geminiFormat) check(*Request) error { return nil } // parse applies the rules

// geminiStatus is the error status Google uses for an HTTP status.
func geminiStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	return "INTERNAL"
}

// writeError answers in Google's envelope; a RetryAfter travels as a
// google.rpc.RetryInfo detail, where the API puts it (no Retry-After
// header).
func (geminiFormat) writeError(w http.ResponseWriter, e ErrorSpec) {
	status := cmp.Or(e.Status, http.StatusInternalServerError)
	body := map[string]any{"code": status, "message": cmp.Or(e.Message, http.StatusText(status)), "status": cmp.Or(e.Type, geminiStatus(status))}
	if e.RetryAfter > 0 {
		body["details"] = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo",
			"retryDelay": strconv.FormatFloat(e.RetryAfter, 'f', -1, 64) + "s"}}
	}
	writeJSON(w, status, map[string]any{"error": body})
}

// geminiAnswer is a reply as Gemini would send it.
type geminiAnswer struct {
	thoughts string // thought summary, sent when the request asks for thoughts
	text     string
	calls    []map[string]any // functionCall parts, the first with its signature
	textSig  []byte           // the signature on the last part of an answer without calls
	finish   string
	usage    map[string]any
}

// geminiReply adapts a reply: thought summaries only when the request
// includes thoughts (then always, by default a short one); a refusal is a
// SAFETY stop without content, as Gemini blocks; arguments that are not a
// JSON object are a MALFORMED_FUNCTION_CALL stop without the calls; a
// signature on the first function call of the answer, or on its last part
// when it has none (as Gemini 3 does).
func geminiReply(req *Request, rep reply) geminiAnswer {
	a := geminiAnswer{text: rep.text, finish: "STOP"}
	if req.IncludeThoughts {
		a.thoughts = cmp.Or(rep.reasoning, "Considering the request: "+strings.TrimPrefix(echo(req), "mockllm: "))
	}
	switch rep.finish {
	case "length":
		a.finish = "MAX_TOKENS"
	case "content_filter":
		a.finish = "SAFETY"
	}
	if rep.refusal != "" {
		a.text, a.finish = "", "SAFETY"
	}
	for i, c := range rep.calls {
		var args map[string]any
		if json.Unmarshal([]byte(c.args), &args) != nil || args == nil {
			a.calls, a.finish = nil, "MALFORMED_FUNCTION_CALL"
			break
		}
		part := map[string]any{"functionCall": map[string]any{"name": c.name, "args": json.RawMessage(c.args), "id": c.id}}
		if i == 0 {
			sig := ThoughtSignature(c.name)
			req.issuedSignatures.add(sig)
			part["thoughtSignature"] = sig
		}
		a.calls = append(a.calls, part)
	}
	if len(a.calls) == 0 && a.finish != "SAFETY" {
		a.textSig = ThoughtSignature("")
		req.issuedSignatures.add(a.textSig)
	}
	a.usage = geminiUsage(req, rep, a)
	return a
}

// geminiUsage is the usageMetadata: promptTokenCount includes the cached
// tokens (cachedContentTokenCount), candidatesTokenCount excludes the
// thoughts (thoughtsTokenCount). Scripted figures are chatd's: input +
// cache_read is the prompt, output - reasoning the candidates.
func geminiUsage(req *Request, rep reply, a geminiAnswer) map[string]any {
	m := map[string]any{}
	if u := rep.usage; u != nil {
		var total int64
		if u.InputTokens != nil {
			n := *u.InputTokens
			if u.CacheReadTokens != nil {
				n += *u.CacheReadTokens
			}
			m["promptTokenCount"], total = n, n
		}
		if u.CacheReadTokens != nil {
			m["cachedContentTokenCount"] = *u.CacheReadTokens
		}
		if u.OutputTokens != nil {
			n := *u.OutputTokens
			if u.ReasoningTokens != nil {
				n -= *u.ReasoningTokens
			}
			m["candidatesTokenCount"], total = n, total+*u.OutputTokens
		}
		if u.ReasoningTokens != nil {
			m["thoughtsTokenCount"] = *u.ReasoningTokens
		}
		m["totalTokenCount"] = total
		return m
	}
	out := len(a.text)
	for _, c := range rep.calls {
		out += len(c.name) + len(c.args)
	}
	prompt, candidates := tokens(len(req.Body)), tokens(out)
	m["promptTokenCount"], m["candidatesTokenCount"] = prompt, candidates
	total := prompt + candidates
	if a.thoughts != "" {
		m["thoughtsTokenCount"] = tokens(len(a.thoughts))
		total += tokens(len(a.thoughts))
	}
	m["totalTokenCount"] = total
	return m
}

// chunks are the answer's streamed parts: thoughts and text in pieces,
// each function call whole, the text signature on an empty last text part.
func (a geminiAnswer) chunks() [][]map[string]any {
	var out [][]map[string]any
	for _, p := range pieces(a.thoughts) {
		out = append(out, []map[string]any{{"text": p, "thought": true}})
	}
	for _, p := range pieces(a.text) {
		out = append(out, []map[string]any{{"text": p}})
	}
	for _, c := range a.calls {
		out = append(out, []map[string]any{c})
	}
	if a.textSig != nil {
		out = append(out, []map[string]any{{"text": "", "thoughtSignature": a.textSig}})
	}
	return out
}

func geminiResponse(req *Request, id string, parts []map[string]any, finish string, usage map[string]any) map[string]any {
	cand := map[string]any{"index": 0}
	if len(parts) > 0 {
		cand["content"] = map[string]any{"parts": parts, "role": "model"}
	}
	if finish != "" {
		cand["finishReason"] = finish
	}
	return map[string]any{"candidates": []any{cand}, "usageMetadata": usage, "modelVersion": req.Model, "responseId": id}
}

func (geminiFormat) writeJSON(w http.ResponseWriter, req *Request, rep reply) {
	a := geminiReply(req, rep)
	// Not streamed, thoughts and text are one part each, the text
	// signature on the last part.
	var parts []map[string]any
	if a.thoughts != "" {
		parts = append(parts, map[string]any{"text": a.thoughts, "thought": true})
	}
	if a.text != "" || a.textSig != nil {
		parts = append(parts, map[string]any{"text": a.text})
	}
	parts = append(parts, a.calls...)
	if a.textSig != nil {
		parts[len(parts)-1]["thoughtSignature"] = a.textSig
	}
	body, err := json.Marshal(geminiResponse(req, rand.Text(), parts, a.finish, a.usage))
	if err != nil {
		geminiFormat{}.writeError(w, ErrorSpec{Message: err.Error()})
		return
	}
	if rep.truncate {
		body = body[:len(body)/2]
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// writeStream sends one event per chunk, each with the usage so far (the
// candidates' count grows, as Gemini reports it), the finishReason on the
// last; a truncated stream stops half-way without one.
func (geminiFormat) writeStream(ctx context.Context, w http.ResponseWriter, req *Request, rep reply, delay time.Duration) {
	a := geminiReply(req, rep)
	chunks := a.chunks()
	if len(chunks) == 0 {
		chunks = [][]map[string]any{nil}
	}
	if rep.truncate {
		chunks = chunks[:(len(chunks)+1)/2]
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	id := rand.Text()
	for i, parts := range chunks {
		if i > 0 && !sleep(ctx, delay) {
			return
		}
		usage := map[string]any{}
		for k, v := range a.usage {
			usage[k] = v
		}
		if n, ok := a.usage["candidatesTokenCount"].(int); ok && len(chunks) > 1 {
			usage["candidatesTokenCount"] = n * (i + 1) / len(chunks)
			usage["totalTokenCount"] = a.usage["totalTokenCount"].(int) - n + usage["candidatesTokenCount"].(int)
		}
		finish := ""
		if i == len(chunks)-1 && !rep.truncate {
			finish, usage = a.finish, a.usage
		}
		data, err := json.Marshal(geminiResponse(req, id, parts, finish, usage))
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "data: %s\r\n\r\n", data); err != nil || rc.Flush() != nil || ctx.Err() != nil {
			return
		}
	}
}
