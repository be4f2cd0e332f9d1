// Package mcp gives the agent the tools of operator-configured Model
// Context Protocol servers. It owns the connections (stdio child processes
// or streamable HTTP), lists and admits their tools, and makes calls with a
// deadline and a size cap. The runner decides when a call is made and
// records it; this package only talks to the servers.
package mcp

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"time"
)

// Transports.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http" // streamable HTTP
)

// Who may use a server.
const (
	ChatsAll   = "all"    // every chat (of the listed models)
	ChatsOptIn = "opt_in" // chats created with its name in mcp_servers
)

// Limits and defaults.
const (
	DefaultTimeout = 30 * time.Second
	MaxTimeout     = 10 * time.Minute
	// MaxResultBytes caps one stored call result, like a client tool's output.
	MaxResultBytes = 256 << 10
	// MaxMessageBytes caps one message read from a server: a bigger one
	// breaks the connection rather than the process's memory.
	MaxMessageBytes = 16 << 20
	// MaxTools caps the tools taken from one server.
	MaxTools = 128
	// Separator joins a server's name and a tool's name: name__tool.
	Separator = "__"
)

// ServerConfig is one entry of mcp_servers in the config file. Secrets are
// never in the file: env and headers name environment variables of chatd.
type ServerConfig struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	// stdio: the program and its arguments, run without a shell.
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Env maps a variable of the child to the chatd variable it is copied
	// from. The child gets these and nothing else of chatd's environment.
	Env map[string]string `json:"env,omitempty"`
	Dir string            `json:"dir,omitempty"`
	// http: the endpoint, and headers mapped to the variables holding them.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Allow lists the only tools offered; Deny lists tools never offered.
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// Timeout of one call, e.g. "30s".
	Timeout string `json:"timeout,omitempty"`
	// Chats is "opt_in" (the default) or "all"; Models, when set, limits
	// the server to chats of those models.
	Chats  string   `json:"chats,omitempty"`
	Models []string `json:"models,omitempty"`
	// Idempotent says a call may be repeated: a call in flight when its
	// worker died is made again (false: answered with an error result).
	Idempotent bool `json:"idempotent,omitempty"`
}

// NameRE is the form of a server name: no underscores, so that the first
// "__" of a namespaced tool name always ends the server's name.
var NameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,31}$`)

var (
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// CheckConfigs checks every server against the configured model ids.
func CheckConfigs(cfgs []ServerConfig, models []string) error {
	seen := map[string]bool{}
	for i, c := range cfgs {
		if !NameRE.MatchString(c.Name) {
			return fmt.Errorf("mcp_servers[%d].name %q must match %s", i, c.Name, NameRE)
		}
		if seen[c.Name] {
			return fmt.Errorf("mcp server %q is defined twice", c.Name)
		}
		seen[c.Name] = true
		if err := c.check(models); err != nil {
			return fmt.Errorf("mcp server %q: %w", c.Name, err)
		}
	}
	return nil
}

func (c ServerConfig) check(models []string) error {
	switch c.Transport {
	case TransportStdio:
		if c.Command == "" {
			return fmt.Errorf("command is required for transport stdio")
		}
		if c.URL != "" || len(c.Headers) > 0 {
			return fmt.Errorf("url and headers are for transport http")
		}
		for k, v := range c.Env {
			if !envNameRE.MatchString(k) || !envNameRE.MatchString(v) {
				return fmt.Errorf("env %q: %q: both must be environment variable names", k, v)
			}
		}
	case TransportHTTP:
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("url must be an http or https URL")
		}
		if u.User != nil {
			return fmt.Errorf("url must not carry credentials; use headers")
		}
		if c.Command != "" || len(c.Args) > 0 || len(c.Env) > 0 || c.Dir != "" {
			return fmt.Errorf("command, args, env and dir are for transport stdio")
		}
		for k, v := range c.Headers {
			if !headerNameRE.MatchString(k) || !envNameRE.MatchString(v) {
				return fmt.Errorf("headers %q: %q: a header name and an environment variable name", k, v)
			}
		}
	default:
		return fmt.Errorf("transport %q is not stdio or http", c.Transport)
	}
	if len(c.Allow) > 0 && len(c.Deny) > 0 {
		return fmt.Errorf("give allow or deny, not both")
	}
	if _, err := c.timeout(); err != nil {
		return err
	}
	switch c.Chats {
	case "", ChatsOptIn, ChatsAll:
	default:
		return fmt.Errorf("chats %q is not %s or %s", c.Chats, ChatsOptIn, ChatsAll)
	}
	for _, m := range c.Models {
		if !slices.Contains(models, m) {
			return fmt.Errorf("models: %q is not a configured model", m)
		}
	}
	return nil
}

func (c ServerConfig) timeout() (time.Duration, error) {
	if c.Timeout == "" {
		return DefaultTimeout, nil
	}
	d, err := time.ParseDuration(c.Timeout)
	if err != nil || d <= 0 || d > MaxTimeout {
		return 0, fmt.Errorf("timeout %q must be a duration above 0 and at most %s", c.Timeout, MaxTimeout)
	}
	return d, nil
}

// offers reports whether the tool's bare name passes the allow/deny lists.
func (c ServerConfig) offers(tool string) bool {
	if len(c.Allow) > 0 {
		return slices.Contains(c.Allow, tool)
	}
	return !slices.Contains(c.Deny, tool)
}

// usableBy reports whether a chat of model that opted into optIn may use
// the server.
func (c ServerConfig) usableBy(model string, optIn []string) bool {
	if len(c.Models) > 0 && !slices.Contains(c.Models, model) {
		return false
	}
	return c.Chats == ChatsAll || slices.Contains(optIn, c.Name)
}
