package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The server refuses a config file with a bad webhook before it opens the
// database, as it does any other bad config.
func TestLoadServerConfigChecksWebhooks(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "chatd.json")
	doc := `{"providers":[{"name":"p","type":"openai"}],"models":[{"id":"m","provider":"p","model":"gpt-5"}],` +
		`"webhooks":[{"name":"ops","url":"javascript:alert(1)","secret_env":"S"}]}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := loadServerConfig(path, "", slog.New(slog.DiscardHandler))
	if err == nil || !strings.HasPrefix(err.Error(), "config: ") || !strings.Contains(err.Error(), "absolute http or https URL") {
		t.Fatalf("loadServerConfig: %v", err)
	}
}
