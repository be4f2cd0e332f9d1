package mcp

import "github.com/chatd/chatd/internal/metrics"

// mcpMetrics are the package's instruments; all are no-ops without a
// registry.
type mcpMetrics struct {
	calls     *metrics.CounterVec
	latency   *metrics.HistogramVec
	connects  *metrics.CounterVec
	refreshes *metrics.CounterVec
	refused   *metrics.CounterVec
}

func (m *Manager) instrument(reg *metrics.Registry) {
	m.m.calls = reg.Counter("chatd_mcp_calls_total",
		"MCP tool calls by server, tool and outcome (ok, tool_error, timeout, unavailable, error, too_large, cancelled).",
		"server", "tool", "outcome")
	m.m.latency = reg.Histogram("chatd_mcp_call_duration_seconds",
		"MCP tool calls, from the request to the answer or the timeout, by server and tool.",
		metrics.LatencyBuckets, "server", "tool")
	m.m.connects = reg.Counter("chatd_mcp_connects_total",
		"Connections to MCP servers (a stdio server's start) by server and outcome (ok, error).", "server", "outcome")
	m.m.refreshes = reg.Counter("chatd_mcp_tool_refreshes_total",
		"Tool lists read again after a connection, by server and reason (list_changed).", "server", "reason")
	m.m.refused = reg.Counter("chatd_mcp_tools_refused_total",
		"Tools of MCP servers never offered to a model, by server and reason (name, reserved, schema, too_many).",
		"server", "reason")
	reg.Collect("chatd_mcp_server_up", "1 while chatd has a live connection to the MCP server.", metrics.TypeGauge,
		[]string{"server"}, func() []metrics.Sample {
			out := make([]metrics.Sample, 0, len(m.names))
			for _, n := range m.names {
				s := m.servers[n]
				s.mu.Lock()
				up := s.session != nil && !s.session.closed()
				s.mu.Unlock()
				v := 0.0
				if up {
					v = 1
				}
				out = append(out, metrics.Sample{Values: []string{n}, Value: v})
			}
			return out
		})
	reg.Collect("chatd_mcp_tools", "Tools of the MCP server offered to models (after allow/deny and admission).",
		metrics.TypeGauge, []string{"server"}, func() []metrics.Sample {
			out := make([]metrics.Sample, 0, len(m.names))
			for _, n := range m.names {
				out = append(out, metrics.Sample{Values: []string{n}, Value: float64(len(m.servers[n].listed()))})
			}
			return out
		})
}
