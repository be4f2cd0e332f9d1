package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/validate"
)

// apiError is an error with an HTTP status and a client-safe message.
type apiError struct {
	status      int
	message     string
	validations []client.ValidationError
}

func (e *apiError) Error() string { return e.message }

func errorf(status int, format string, args ...any) *apiError {
	return &apiError{status: status, message: fmt.Sprintf(format, args...)}
}

// fieldHints say, for an unknown field a request written for another API
// often carries, what chatd takes instead (keyed by dotted path).
var fieldHints = map[string]string{
	"messages": `chatd takes one message per request: send its parts as "content" ` +
		`([{"type":"text","text":"…"}]); the chat keeps the history`,
	"model":       `a chat's model is chosen when the chat is created`,
	"system":      `the system prompt is "system_prompt", set when the chat is created`,
	"tools":       `client-executed tools are "dynamic_tools", declared when the chat is created`,
	"stream":      `answers are streamed by GET /api/v1/chats/{chat}/stream, not by this request`,
	"strict":      `"strict" belongs in response_format.json_schema, and only true is accepted there (chatd always validates)`,
	"json_schema": `"json_schema" belongs in response_format, beside "type":"json_schema"`,
}

// unknownField is the detail for an unknown member at path, with a hint
// when one applies.
func unknownField(path string) string {
	if h, ok := fieldHints[path]; ok {
		return "unknown field: " + h
	}
	return "unknown field"
}

// badField is a 400 naming the field at fault.
func badField(field, detail string) *apiError {
	return &apiError{status: http.StatusBadRequest, message: "Invalid request.",
		validations: []client.ValidationError{{Field: field, Detail: detail}}}
}

// maxValidations caps the validations of one response: the first ones
// say enough, and a hostile body cannot make the answer large.
const maxValidations = 20

// badFields is a 400 naming every field at fault (the first
// maxValidations of them, in order).
func badFields(vs []client.ValidationError) *apiError {
	return &apiError{status: http.StatusBadRequest, message: "Invalid request.", validations: vs[:min(len(vs), maxValidations)]}
}

func fromFieldError(fe *validate.FieldError) *apiError {
	var vs []client.ValidationError
	for _, e := range fe.All() {
		vs = append(vs, client.ValidationError{Field: e.Field, Detail: e.Detail})
	}
	return badFields(vs)
}

var (
	errNotFound    = errorf(http.StatusNotFound, "Not found.")
	errUnavailable = errorf(http.StatusServiceUnavailable, "The database is not reachable; retry after a moment.")
)

// handlerFunc is an HTTP handler that returns its error for render.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// render writes err as the one JSON error shape. Unknown errors are logged
// and reported as 500 without their text.
func (s *Server) render(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &mbe):
		ae = errorf(http.StatusRequestEntityTooLarge, "Request body exceeds %d bytes.", mbe.Limit)
	case errors.Is(err, store.ErrNotFound):
		ae = errNotFound
	case errors.Is(err, store.ErrChatDeleted):
		ae = deletedError(err)
	case errors.Is(err, store.ErrQueueFull):
		ae = errorf(http.StatusConflict, "The chat's queue is full (20 messages); wait for the running turn or delete queued messages.")
	case errors.Is(err, store.ErrConflict):
		ae = conflictError(err)
	case errors.Is(err, store.ErrTooManyRunnable):
		w.Header().Set("Retry-After", "5")
		ae = errorf(http.StatusTooManyRequests, "Too many runnable chats: this user already has %d running or queued for a worker, "+
			"the server's limit (--max-runnable-per-user); retry when some of them finish.", s.maxRunnable)
	case errors.Is(err, r.Context().Err()) && r.Context().Err() != nil:
		return // the client went away
	case store.Unavailable(err):
		s.log.WarnContext(r.Context(), "database unavailable", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.String("error", err.Error()))
		w.Header().Set("Retry-After", "1")
		ae = errUnavailable
	default:
		s.log.ErrorContext(r.Context(), "request failed", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.String("error", err.Error()))
		ae = errorf(http.StatusInternalServerError, "Internal error.")
	}
	writeJSON(w, ae.status, client.Error{Message: ae.message, Validations: ae.validations})
}

// deletedError is the 404 of a chat that was deleted: it says when and
// why (its tombstone), and to whom the id belonged is not told (only its
// owner learns of the tombstone).
func deletedError(err error) *apiError {
	var de *store.DeletedError
	if errors.As(err, &de) {
		return errorf(http.StatusNotFound, "The chat was deleted (%s) at %s.", de.Reason, de.At.UTC().Format(time.RFC3339))
	}
	return errorf(http.StatusNotFound, "The chat was deleted.")
}

// conflictError words a store conflict (409) for clients.
func conflictError(err error) *apiError {
	var se *store.StateError
	var pm *store.PlanModeConflictError
	switch {
	case errors.As(err, &se) && se.Op == store.OpInterrupt:
		return errorf(http.StatusConflict, "The chat is %s; there is no turn to interrupt.", se.Status)
	case errors.As(err, &se) && se.Op == store.OpSubmitToolResults:
		return errorf(http.StatusConflict, "The chat is %s; it is not waiting for tool results.", se.Status)
	case errors.As(err, &se) && se.Op == store.OpPlanMode:
		return errorf(http.StatusConflict, "A child chat cannot switch to plan mode.")
	case errors.As(err, &pm):
		ae := errorf(http.StatusConflict, "The chat has an active or queued structured request (%s); plan mode would not honour it. "+
			"Wait for it to finish, or cancel it first.", pm.RequestID)
		ae.validations = []client.ValidationError{{Field: "plan_mode", Detail: "structured request " + pm.RequestID.String() + " is active or queued"}}
		return ae
	}
	return errorf(http.StatusConflict, "The chat's state does not allow this.")
}

// toolResultsError words submitted tool results that do not match the
// pending calls (400, naming the field).
func toolResultsError(e *store.ToolResultsError) *apiError {
	field := fmt.Sprintf("results.%d.tool_call_id", e.Index)
	switch e.Problem {
	case store.ResultDuplicate:
		return badField(field, fmt.Sprintf("duplicate result for %q", e.ToolCallID))
	case store.ResultForFinalizer:
		return badField(field, fmt.Sprintf("%q is a call of the server-owned %s tool; clients cannot answer it", e.ToolCallID, client.FinalizerName))
	case store.ResultForChild:
		return badField(field, fmt.Sprintf("%q is a %s call: its spawned child chat answers it, clients cannot", e.ToolCallID, store.SpawnTool))
	case store.ResultMissing:
		return badField("results", fmt.Sprintf("missing a result for pending call %q (%s)", e.ToolCallID, e.ToolName))
	}
	return badField(field, fmt.Sprintf("%q is not a pending tool call", e.ToolCallID))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// decodeBody decodes a JSON request body strictly: one value, no unknown
// fields, no trailing data, within the size limit.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, dst any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return errorf(http.StatusUnsupportedMediaType, "Content-Type must be application/json.")
	}
	data, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) || strings.HasPrefix(err.Error(), "json: unknown field ") {
			if field, detail, ok := mismatch(data, reflect.TypeOf(dst)); ok {
				return badField(field, detail)
			}
		}
		return jsonError(err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, errEOF) {
		return badField("body", "unexpected data after the JSON object")
	}
	// encoding/json keeps the last of duplicate members, matches member
	// names case-insensitively and turns null into a zero value: the
	// documented strict decoding refuses all three.
	if field, ok := duplicateMember(data, reflect.TypeOf(dst)); ok {
		return badField(field, "duplicate member")
	}
	if field, detail, ok := mismatch(data, reflect.TypeOf(dst)); ok {
		return badField(field, detail)
	}
	return nil
}

// duplicateMember names the first member that appears twice in one object
// of data (a JSON value already known to be valid), at any depth, as a
// dotted path. Values decoded into json.RawMessage are left to their own
// checks (a schema's, a tool result's), which say more.
func duplicateMember(data []byte, t reflect.Type) (string, bool) {
	d := dupScan{dec: json.NewDecoder(bytes.NewReader(data)), next: t}
	d.dec.UseNumber()
	for {
		d.elemType()
		if !d.expectKey && opaque(deref(d.next)) {
			var skip json.RawMessage
			if d.dec.Decode(&skip) != nil || len(d.stack) == 0 {
				return "", false
			}
			d.endValue()
			continue
		}
		tok, err := d.dec.Token()
		if err != nil {
			return "", false
		}
		field, found, more := d.token(tok)
		if !more {
			return field, found
		}
	}
}

// dupScan is duplicateMember's walk: the open containers with their Go
// types, the path to the current position and the Go type of the next
// value (nil: unknown).
type dupScan struct {
	dec       *json.Decoder
	stack     []dupFrame
	path      []string // per open container: the current member or index
	expectKey bool
	next      reflect.Type
}

type dupFrame struct {
	typ   reflect.Type    // the container's Go type; nil: unknown
	keys  map[string]bool // nil for an array
	index int
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// opaque: values decoded into json.RawMessage or an interface are left to
// their own checks.
func opaque(t reflect.Type) bool {
	return t != nil && (t == reflect.TypeFor[json.RawMessage]() || t.Kind() == reflect.Interface)
}

// elemType sets the next value's type when it is an array's element.
func (d *dupScan) elemType() {
	n := len(d.stack)
	if n == 0 || d.expectKey || d.stack[n-1].keys != nil {
		return
	}
	d.next = nil
	if t := d.stack[n-1].typ; t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		d.next = t.Elem()
	}
}

// endValue: a value of the innermost container ended.
func (d *dupScan) endValue() {
	n := len(d.stack)
	if n == 0 {
		return
	}
	if d.stack[n-1].keys != nil {
		d.expectKey = true
		return
	}
	d.stack[n-1].index++
	d.path[n-1] = strconv.Itoa(d.stack[n-1].index)
	d.expectKey = false
}

// token takes one token; more is false when the walk is over, with the
// duplicate's path when found.
func (d *dupScan) token(tok json.Token) (field string, found, more bool) {
	switch tok {
	case json.Delim('{'):
		d.stack, d.path, d.expectKey = append(d.stack, dupFrame{typ: deref(d.next), keys: map[string]bool{}}), append(d.path, ""), true
		return "", false, true
	case json.Delim('['):
		d.stack, d.path, d.expectKey = append(d.stack, dupFrame{typ: deref(d.next)}), append(d.path, "0"), false
		return "", false, true
	case json.Delim('}'), json.Delim(']'):
		d.stack, d.path = d.stack[:len(d.stack)-1], d.path[:len(d.path)-1]
		if len(d.stack) == 0 {
			return "", false, false
		}
		d.endValue()
		return "", false, true
	}
	if len(d.stack) == 0 {
		return "", false, false
	}
	if !d.expectKey {
		d.endValue()
		return "", false, true
	}
	return d.key(tok.(string))
}

// key records member k of the innermost object and finds its Go type.
func (d *dupScan) key(k string) (string, bool, bool) {
	top := &d.stack[len(d.stack)-1]
	d.path[len(d.path)-1] = k
	if top.keys[k] {
		return strings.Join(d.path, "."), true, false
	}
	top.keys[k], d.expectKey = true, false
	d.next = nil
	switch ct := top.typ; {
	case ct == nil:
	case ct.Kind() == reflect.Struct:
		fields := jsonFields(ct)
		if i := slices.IndexFunc(fields, func(f jsonField) bool { return f.name == k }); i >= 0 {
			d.next = fields[i].typ
		}
	case ct.Kind() == reflect.Map:
		d.next = ct.Elem()
	}
	return "", false, true
}

// readBody reads the whole body within limit (413) and within the body
// deadline the handler wrapper set (408).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &mbe):
			return nil, err // 413
		case errors.As(err, &ne) && ne.Timeout():
			return nil, errorf(http.StatusRequestTimeout, "The request body was not received in time.")
		}
		return nil, badField("body", "the body could not be read")
	}
	// The body is in: the handler's own work is not bounded by its deadline.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	return data, nil
}

// mismatch finds where a JSON body and the Go type it is decoded into
// disagree and names the place as a dotted path with array indices
// (content.0.type, dynamic_tools.1.bogus): encoding/json's errors name
// neither indices nor the path of an unknown member. Object members are
// visited in sorted order, so the answer is deterministic; ok is false when
// nothing disagrees.
func mismatch(data []byte, t reflect.Type) (field, detail string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "", "", false
	}
	return mismatchAt(v, t, "")
}

func mismatchAt(v any, t reflect.Type, path string) (string, string, bool) {
	at := mismatchPath(path)
	nullable := t.Kind() == reflect.Pointer // null leaves an optional field unset
	t = deref(t)
	if opaque(t) {
		return "", "", false
	}
	if v == nil {
		// encoding/json would leave "" or 0 for null: a required scalar is
		// omitted or given, never null. An absent slice, map or optional
		// field is fine.
		if isScalar(t.Kind()) && !nullable {
			return at.bad("must not be null")
		}
		return "", "", false
	}
	switch t.Kind() {
	case reflect.Struct:
		return mismatchStruct(v, t, at)
	case reflect.Slice:
		return mismatchSlice(v, t, at)
	case reflect.Map:
		obj, isObj := v.(map[string]any)
		if !isObj {
			return at.bad("must be an object")
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if f, d, bad := mismatchAt(obj[k], t.Elem(), at.join(k)); bad {
				return f, d, bad
			}
		}
		return "", "", false
	}
	return mismatchScalar(v, t, at)
}

// mismatchPath is the dotted path of a value mismatchAt visits ("" at the
// top: the body).
type mismatchPath string

func (p mismatchPath) bad(detail string) (string, string, bool) {
	if p == "" {
		return "body", detail, true
	}
	return string(p), detail, true
}

func (p mismatchPath) join(name string) string {
	if p == "" {
		return name
	}
	return string(p) + "." + name
}

func isScalar(k reflect.Kind) bool {
	switch k {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

func mismatchStruct(v any, t reflect.Type, at mismatchPath) (string, string, bool) {
	obj, isObj := v.(map[string]any)
	if !isObj {
		return at.bad("must be an object")
	}
	fields := jsonFields(t)
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		// Exact names only: encoding/json would take "CONTENT" for
		// "content".
		i := slices.IndexFunc(fields, func(f jsonField) bool { return f.name == k })
		if i < 0 {
			return at.join(k), unknownField(at.join(k)), true
		}
		if f, d, bad := mismatchAt(obj[k], fields[i].typ, at.join(k)); bad {
			return f, d, bad
		}
	}
	return "", "", false
}

func mismatchSlice(v any, t reflect.Type, at mismatchPath) (string, string, bool) {
	if t.Elem().Kind() == reflect.Uint8 {
		if _, isStr := v.(string); !isStr {
			return at.bad("must be a base64 string")
		}
		return "", "", false
	}
	arr, isArr := v.([]any)
	if !isArr {
		return at.bad("must be an array")
	}
	for i, e := range arr {
		if f, d, bad := mismatchAt(e, t.Elem(), at.join(strconv.Itoa(i))); bad {
			return f, d, bad
		}
	}
	return "", "", false
}

func mismatchScalar(v any, t reflect.Type, at mismatchPath) (string, string, bool) {
	switch t.Kind() {
	case reflect.String:
		if _, isStr := v.(string); !isStr {
			return at.bad("must be a string")
		}
	case reflect.Bool:
		if _, isBool := v.(bool); !isBool {
			return at.bad("must be a boolean")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, isNum := v.(json.Number)
		if !isNum {
			return at.bad("must be a number")
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return at.bad("must be an integer in range")
		}
	case reflect.Float32, reflect.Float64:
		if _, isNum := v.(json.Number); !isNum {
			return at.bad("must be a number")
		}
	}
	return "", "", false
}

// jsonError turns a decoding error into a 400 naming the field.
func jsonError(err error) error {
	var mbe *http.MaxBytesError
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return badField(field, fmt.Sprintf("must be %s", jsonType(te.Type.Kind().String())))
	case errors.As(err, &se):
		return badField("body", fmt.Sprintf("invalid JSON at byte %d: %s", se.Offset, se.Error()))
	case errors.Is(err, errEOF):
		return badField("body", "a JSON object is required")
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return badField(f, unknownField(f))
	}
	return badField("body", strings.TrimPrefix(msg, "json: "))
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "a boolean"
	case "int", "int32", "int64", "uint", "uint32", "uint64", "float64":
		return "a number"
	}
	return "of another type"
}
