package jsonb

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestDocumentRoundTrip: a document with U+0000 and U+E000 in keys and
// strings is encoded into one jsonb accepts (no \u0000) and decoded back
// to the same keys, strings and number texts; a clean document is stored
// and read as it is.
func TestDocumentRoundTrip(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		`{"pattern":"^[^\u0000]*$","enum":["a\u0000b","\ue000","\ue000\ue001","\ue000\ue000x"],"k\u0000":1.50}`,
		`{"type":"object","properties":{"a":{"const":1e3}}}`,
	} {
		enc, err := EncodeDocument(json.RawMessage(doc))
		if err != nil {
			t.Fatal(err)
		}
		if scanRaw(enc)&rawUnstorable != 0 {
			t.Errorf("%s: encoded %s is not storable", doc, enc)
		}
		dec, err := DecodeDocument(enc)
		if err != nil {
			t.Fatal(err)
		}
		var want, got any
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(dec, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s: read back %s", doc, dec)
		}
	}
	clean := json.RawMessage(`{"type": "string"}`)
	if enc, _ := EncodeDocument(clean); &enc[0] != &clean[0] {
		t.Errorf("a clean document was copied: %s", enc)
	}
}
