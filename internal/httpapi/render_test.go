package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/store"
)

// A control row an earlier release wrote with its notice as a hook-notice
// part reaches clients as text, like the rows written now: clients know
// only the documented part types.
func TestLegacyHookNoticeIsText(t *testing.T) {
	t.Parallel()
	content, err := json.Marshal([]jsonb.Part{{Type: jsonb.PartHookNotice, Text: "Checking again."}})
	if err != nil {
		t.Fatal(err)
	}
	row := store.Message{ID: 4, ChatID: uuid.New(), Role: client.RoleAssistant, Kind: store.KindControl,
		Visibility: store.VisibleUser, Content: content,
		StructuredRequestID: uuid.NullUUID{UUID: uuid.New(), Valid: true}}
	m, err := toMessage(row)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Content) != 1 || m.Content[0].Type != "text" || m.Content[0].Text != "Checking again." {
		t.Fatalf("content %+v", m.Content)
	}
	if m.StructuredOutput != nil || m.StructuredOutputRequestID != nil || m.Usage != nil {
		t.Fatalf("a control row carries no result, request id or usage: %+v", m)
	}
}
