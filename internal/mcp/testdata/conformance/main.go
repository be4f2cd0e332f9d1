// Command conformance is the MCP client under test of the
// @modelcontextprotocol/conformance client scenarios that apply to chatd
// (initialize, tools_call, sse-retry): it connects through internal/mcp's
// Manager over streamable HTTP to the URL given last, as chatd does, lists
// the tools and calls each with arguments for its scenario. See
// docs/tools.md for how it is run and the results.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/chatd/chatd/internal/mcp"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: conformance URL")
		os.Exit(2)
	}
	url := os.Args[len(os.Args)-1]
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	m := mcp.New([]mcp.ServerConfig{{Name: "conf", Transport: mcp.TransportHTTP, URL: url, Chats: mcp.ChatsAll, Timeout: "20s"}},
		mcp.Options{Logger: log})
	m.Start(context.Background())
	defer m.Close()
	deadline := time.After(20 * time.Second)
	for !m.Up("conf") {
		select {
		case <-m.Changed("conf"):
		case <-deadline:
			fmt.Fprintln(os.Stderr, "not connected")
			os.Exit(1)
		}
	}
	args := map[string]string{"add_numbers": `{"a":2,"b":3}`}
	for _, t := range m.Tools("m", nil) {
		a := args[t.Tool]
		if a == "" {
			a = `{}`
		}
		res, err := m.Call(context.Background(), t, json.RawMessage(a))
		fmt.Printf("%s: error=%v %s (%v)\n", t.Name, res.IsError, res.Output, err)
	}
}
