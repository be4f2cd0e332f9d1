package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestMismatchNamesThePath(t *testing.T) {
	cases := []struct {
		body          string
		field, detail string
	}{
		{`{"content":[{"type":"text","text":"a"},{"type":1}]}`, "content.1.type", "must be a string"},
		{`{"content":[{"type":"text","text":"a","extra":1}]}`, "content.0.extra", "unknown field"},
		{`{"content":[],"dynamic_tools":[{"name":"a"},{"name":"b","bogus":true}]}`, "dynamic_tools.1.bogus", "unknown field"},
		{`{"content":[],"dynamic_tools":[{"name":5}]}`, "dynamic_tools.0.name", "must be a string"},
		{`{"content":"hi"}`, "content", "must be an array"},
		{`{"plan_mode":"yes"}`, "plan_mode", "must be a boolean"},
		{`{"temperature":1}`, "temperature", "unknown field"},
		{`[]`, "body", "must be an object"},
		{`{"Content":[{"type":"text","text":"a"}],"response_format":{"anything":["goes"]},"model":null}`, "Content", "unknown field"},
		{`{"content":[{"type":"text","text":"a"}],"response_format":{"anything":["goes"]},"model":null}`, "", ""},
		{`{"content":[{"type":"text","text":null}]}`, "content.0.text", "must not be null"},
	}
	for _, tc := range cases {
		field, detail, ok := mismatch([]byte(tc.body), reflect.TypeFor[*createChatBody]())
		if field != tc.field || detail != tc.detail || ok != (tc.field != "") {
			t.Errorf("%s: %q %q %v, want %q %q", tc.body, field, detail, ok, tc.field, tc.detail)
		}
	}
	field, _, _ := mismatch([]byte(`{"results":[{"tool_call_id":"a","output":1},{"tool_call_id":2}]}`), reflect.TypeFor[*toolResultsBody]())
	if field != "results.1.tool_call_id" {
		t.Errorf("tool results: %q", field)
	}
}

func TestDecodeBodyErrorsNameTheField(t *testing.T) {
	s := New(Options{})
	for body, field := range map[string]string{
		`{"content":[{"type":"text","text":"a"},{"type":1}]}`: "content.1.type",
		`{"content":[{"type":"text","text":"a","x":1}]}`:      "content.0.x",
		`{"content":[{"type":"text","text":"a"}]} []`:         "body",
		`{"content":[{"type":"text"`:                          "body",
		``:                                                    "body",
	} {
		req := httptest.NewRequest("POST", "/api/v1/chats", strings.NewReader(body))
		var dst createChatBody
		err := decodeBody(httptest.NewRecorder(), req, s.maxBody, &dst)
		ae, ok := err.(*apiError)
		if !ok || ae.status != 400 || len(ae.validations) != 1 || ae.validations[0].Field != field {
			t.Errorf("%s: %#v, want a 400 on %s", body, err, field)
		}
	}
}

func TestPanicIsTheJSON500(t *testing.T) {
	s := New(Options{})
	h := s.handler(route{"GET", "/boom", scopeNone, func(w http.ResponseWriter, r *http.Request) error {
		var m map[string]int
		m["x"] = 1 //nolint:staticcheck // the nil map write is the panic under test
		return nil
	}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil))
	var body struct{ Message string }
	if rec.Code != 500 || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Message != "Internal error." {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

func TestDuplicateMemberNamesThePath(t *testing.T) {
	for body, want := range map[string]string{
		`{"title":"a","title":"b"}`: "title",
		`{"content":[{"type":"text"},{"type":"text","text":"a","type":"x"}]}`:                   "content.1.type",
		`{"dynamic_tools":[{"name":"a"},{"name":"b","input_schema":{"a":1,"a":2},"name":"c"}]}`: "dynamic_tools.1.name",
		`{"dynamic_tools":[{"name":"a","input_schema":{"a":1,"a":2}}]}`:                         "",
		`{"response_format":{"type":"x","type":"y"},"content":[]}`:                              "",
		`{"unknown":{"a":{"b":1,"b":2}}}`:                                                       "unknown.a.b",
		`{"content":[{"type":"text","text":"{\"a\":1,\"a\":1}"}]}`:                              "",
		`{"content":[[{"a":1}],[{"a":1,"a":1}]]}`:                                               "content.1.0.a",
		`[]`: "",
	} {
		got, ok := duplicateMember([]byte(body), reflect.TypeFor[*createChatBody]())
		if got != want || ok != (want != "") {
			t.Errorf("%s: %q %v, want %q", body, got, ok, want)
		}
	}
}
