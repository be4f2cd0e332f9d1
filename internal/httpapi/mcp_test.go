package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/mcp"
	"github.com/chatd/chatd/internal/testenv"
)

// A chat opts into MCP servers by name only: configured names available to
// its model, each once. Nothing in the body can define a server, and client
// tools cannot take a name in a server's namespace. (The servers are never
// started: admission reads the configuration.)
func TestMCPServersOptIn(t *testing.T) {
	t.Parallel()
	m := mcp.New([]mcp.ServerConfig{
		{Name: "optin", Transport: mcp.TransportStdio, Command: "/nonexistent"},
		{Name: "everyone", Transport: mcp.TransportStdio, Command: "/nonexistent", Chats: mcp.ChatsAll},
		{Name: "bigonly", Transport: mcp.TransportStdio, Command: "/nonexistent", Models: []string{"mock/big"}},
	}, mcp.Options{})
	env := testenv.New(t, testenv.Options{NoRunner: true, MCP: m})
	token := env.Token("alice")
	seventeen := `"optin"` + strings.Repeat(`,"x"`, 16)
	for _, c := range []struct {
		name, body string
		status     int
		field      string
	}{
		{"unknown", createBody("", `"mcp_servers":["nosuch"]`), 400, "mcp_servers.0"},
		{"twice", createBody("", `"mcp_servers":["optin","optin"]`), 400, "mcp_servers.1"},
		{"not for the model", createBody("", `"mcp_servers":["optin","bigonly"]`), 400, "mcp_servers.1"},
		{"too many", createBody("", `"mcp_servers":[`+seventeen+`]`), 400, "mcp_servers"},
		{"a definition", createBody("", `"mcp_servers":[{"name":"mine","transport":"stdio","command":"sh"}]`), 400, "mcp_servers.0"},
		{"a client tool in a server's namespace", createBody("", `"dynamic_tools":[{"name":"optin__echo"}]`), 400, "dynamic_tools.0.name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := call(t, env, token, "POST", "/api/v1/chats", c.body)
			if res.status != c.status || len(res.err.Validations) == 0 || res.err.Validations[0].Field != c.field {
				t.Errorf("%d %+v, want %d naming %s", res.status, res.err, c.status, c.field)
			}
		})
	}
	if got := rows(t, env); !strings.HasPrefix(got, "chats=0 ") {
		t.Errorf("a refused request left rows: %s", got)
	}

	res := call(t, env, token, "POST", "/api/v1/chats", createBody("", `"mcp_servers":["optin","everyone"]`))
	if res.status != 201 {
		t.Fatalf("%d %s", res.status, res.body)
	}
	var out client.CreateChatResponse
	if err := json.Unmarshal(res.body, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Join(out.Chat.MCPServers, ",") != "optin,everyone" {
		t.Errorf("mcp_servers %v", out.Chat.MCPServers)
	}
	got, err := env.Client("alice").GetChat(t.Context(), out.Chat.ID)
	if err != nil || strings.Join(got.MCPServers, ",") != "optin,everyone" {
		t.Errorf("read back: %+v %v", got, err)
	}
}
